"""What every engine's log parser shares: startups, facts by how directly a line states them,
stats points, and retractions counted once per event.

vLLM's parser (``doctor.engine_readers.vllm``) is tuned to vLLM's many releases; the other engines'
logs are simpler, and each adapter only says which line means what. ``Logbook`` keeps the rules
they share: the same fact stated twice keeps the more direct statement (a resolved limit beats
a command-line argument), a new startup begins when a startup line follows a serving one, a
retraction that every tensor-parallel rank prints is one event, and a fact read under a check's
key notes the engine's own name for it (``own``: "TGI --max-concurrent-requests"), the engine
named by its record.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from doctor.engines.record import EngineRecord
from doctor.evidence.log import LogLine
from doctor.foundation.wire import number
from doctor.logscan.gate import OTHER_ERROR, OUT_OF_MEMORY
from doctor.logscan.parsed import Fact, LogFacts, Startup, StartupError, StatsPoint

# How directly a line states a fact; a higher rank replaces a lower one within a startup.
ARGUMENT, STATED, RESOLVED = 1, 2, 3
_MAX_ERRORS = 10
_MAX_ERROR_MESSAGE = 400


@dataclass
class _Startup:
    first_line: int
    last_line: int
    facts: dict[str, tuple[int, Fact]] = field(default_factory=dict)
    errors: list[StartupError] = field(default_factory=list)
    events: set[tuple[str, str]] = field(default_factory=set)  # (time, message) of retractions
    retracted: int = 0
    serving: bool = False


class Logbook:
    """Facts, stats and events of one engine's log, startup by startup."""

    def __init__(self, record: EngineRecord, source: str, own_names: Mapping[str, str]) -> None:
        self.engine = record.id
        self.display = record.display
        self.source = source
        self.own_names = own_names  # check key -> the engine's name for it, for the fact's note
        self.startups: list[_Startup] = []
        self.stats: list[StatsPoint] = []

    def at(self, line: LogLine, *, starting: bool = False) -> _Startup:
        """The startup ``line`` belongs to; ``starting``: a startup line, which after a serving
        line (a stats point) begins a new startup (the engine restarted)."""
        if not self.startups or (starting and self.startups[-1].serving):
            self.startups.append(_Startup(first_line=line.no, last_line=line.no))
        current = self.startups[-1]
        current.last_line = line.no
        return current

    def fact(self, line: LogLine, key: str, value: Any, rank: int = STATED, note: str | None = None) -> None:
        """``key`` = ``value`` as ``line`` states it; kept unless a more direct statement is held.

        A number (an argument read as a literal) is bounded like every number from outside
        (``doctor.foundation.wire.number``): one beyond any real setting is not a fact.
        """
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = number(value, int) if isinstance(value, int) else number(value)
        if value is None or value == "":
            return
        state = self.at(line, starting=True)
        held = state.facts.get(key)
        if held is None or rank > held[0]:
            state.facts[key] = (rank, Fact(value=value, line=line.no, raw=line.text, note=note))

    def own(self, line: LogLine, key: str, value: Any, rank: int) -> None:
        """``fact``, noting the engine's own name for ``key`` ("TGI --max-concurrent-requests")
        when the reader knows it."""
        own = self.own_names.get(key)
        self.fact(line, key, value, rank, note=f"{self.display} {own}" if own else None)

    def infer(self, key: str, value: Any, source: str, note: str) -> None:
        """Set ``key`` in the last startup from another fact (``source``, whose line it cites),
        when no line states it."""
        if not self.startups or value is None:
            return
        facts = self.startups[-1].facts
        if key not in facts and source in facts:
            origin = facts[source][1]
            facts[key] = (0, Fact(value=value, line=origin.line, raw=origin.raw, note=f"inferred: {note}"))

    def forget(self, key: str) -> None:
        """Drop ``key`` from the last startup, so that the next statement of it holds."""
        if self.startups:
            self.startups[-1].facts.pop(key, None)

    def value(self, key: str) -> Any:
        held = self.startups[-1].facts.get(key) if self.startups else None
        return None if held is None else held[1].value

    def stat(self, line: LogLine, point: StatsPoint) -> None:
        state = self.at(line)
        state.serving = True
        point.startup = len(self.startups) - 1
        self.stats.append(point)

    def retraction(self, line: LogLine, when: str, message: str, requests: int) -> None:
        """A retraction (SGLang) or pause (TensorRT-LLM): ``when`` and ``message`` identify the
        event, so the copies that several ranks print of it count once."""
        state = self.at(line)
        if (when, message) not in state.events:
            state.events.add((when, message))
            state.retracted += requests

    def error(self, line: LogLine, message: str) -> bool:
        """Record ``message`` when it is an error (out of memory, an exception); whether it was."""
        if OUT_OF_MEMORY.search(message):
            kind = "oom"
        elif OTHER_ERROR.search(message):
            kind = "other"
        else:
            return False
        state = self.at(line)
        message = message.strip()[:_MAX_ERROR_MESSAGE]
        if not state.serving and len(state.errors) < _MAX_ERRORS and all(e.message != message for e in state.errors):
            state.errors.append(StartupError(kind=kind, message=message, line=line.no, raw=line.text))
        return True

    def result(self) -> LogFacts:
        facts = LogFacts(source=self.source, engine=self.engine, stats=self.stats)
        facts.startups = [
            Startup(first_line=s.first_line, last_line=s.last_line, version=_held(s, "version"),
                    model=_held(s, "model"), errors=[e.kind for e in s.errors])
            for s in self.startups
        ]
        if self.startups:
            last = self.startups[-1]
            facts.facts = {key: fact for key, (_rank, fact) in sorted(last.facts.items())}
            facts.errors = list(last.errors)
            facts.preemption_warnings = len(last.events)
            facts.preemptions_cumulative = last.retracted if last.events else None
        return facts


def _held(state: _Startup, key: str) -> Any:
    held = state.facts.get(key)
    return None if held is None else held[1].value
