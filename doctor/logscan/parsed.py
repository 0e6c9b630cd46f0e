"""What the startup-log parser reports: facts with provenance, errors, stats, startups.

These types are re-exported by ``doctor.derive.log_facts`` (the ``log_facts`` view), which is
where checks import them from; they live here so that the parser does not import the derive
layer that calls it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Fact:
    """A value and its provenance: the line number in the source log and the raw line."""

    value: Any
    line: int | None = None
    raw: str | None = None
    note: str | None = None  # how a value that no line states was inferred, e.g. block_size


@dataclass
class StartupError:
    """An error the engine logged while starting (no memory for the KV cache, a max length the cache
    cannot hold, OOM), with the line it was read from: why a server never came up or came up small."""

    kind: str  # no-cache-memory | max-len-exceeds-kv | memory-below-utilisation | oom | other
    message: str
    line: int | None = None
    raw: str | None = None


@dataclass
class StatsPoint:
    """One periodic stats line (V0 or V1), as a point of a time series."""

    line: int
    timestamp: str | None = None
    running: float | None = None
    waiting: float | None = None
    swapped: float | None = None
    pending: float | None = None
    kv_usage_pct: float | None = None
    cpu_kv_usage_pct: float | None = None
    prefix_cache_hit_pct: float | None = None
    prompt_throughput: float | None = None  # tokens/s
    generation_throughput: float | None = None
    preemptions: float | None = None
    engine: str | None = None  # "000" per engine, "2 Engines Aggregated" for a DP aggregate
    startup: int | None = None  # index in ``LogFacts.startups`` of the startup that printed it


@dataclass
class Startup:
    """One start of the engine found in the log, its lines, version and model: a log holding several
    restarts is read as its last one, and the restarts themselves are evidence."""

    first_line: int
    last_line: int | None = None
    version: str | None = None
    engine_generation: str | None = None  # V0 | V1
    model: str | None = None
    errors: list[str] = field(default_factory=list)  # kinds of its startup errors


@dataclass
class LogFacts:
    """The ``log_facts`` view: what the engine's startup log says: its configuration as facts with
    the line each was read from, startup errors, the periodic stats lines, preemption warnings and
    every startup. Facts use vLLM's keys whatever the engine, so a check reads ``max_num_seqs`` once."""

    source: str = ""
    engine: str = "vllm"  # whose log it is (``doctor.engines.names``); the facts use vLLM's keys
    identified_by: str = ""  # why ``engine`` (``names.identify_log``): the markers counted, or none
    facts: dict[str, Fact] = field(default_factory=dict)
    errors: list[StartupError] = field(default_factory=list)
    stats: list[StatsPoint] = field(default_factory=list)  # every startup's; ``last_stats``: the last one's
    preemption_warnings: int = 0
    preemptions_cumulative: int | None = None
    startups: list[Startup] = field(default_factory=list)  # every startup found; facts are from the last

    @property
    def last_stats(self) -> list[StatsPoint]:
        """The stats points of the last startup, which the facts and errors describe: a restart
        begins a new series (``stats`` holds every startup's)."""
        last = len(self.startups) - 1
        return [p for p in self.stats if p.startup is None or p.startup == last]

    @property
    def empty(self) -> bool:
        """Nothing vLLM-specific was found (the kept lines only shared a word with vLLM's)."""
        return not (self.facts or self.errors or self.stats or self.preemption_warnings)

    def value(self, key: str, default: Any = None) -> Any:
        fact = self.facts.get(key)
        return default if fact is None else fact.value
