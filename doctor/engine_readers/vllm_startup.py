"""One startup while the parser reads its lines (``StartupState``): its facts ranked by how directly
a line states them, its errors, its phase; and ``finish_startup``, which completes the facts with what
follows from them and summarises it as a ``Startup``. The ranks and phases live here because every
step of the parse reads them; the parse loop itself is ``vllm``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from doctor.logscan.parsed import Fact, Startup, StartupError
from doctor.logscan.prefixes import Record
from doctor.logscan.printed_values import as_count, version_tuple

# How directly a line states a fact; a higher rank replaces a lower one within a startup.
INFERRED, ARGUMENT, CONFIG, STATED = 0, 1, 2, 3

# Startup phases: a marker of phase p opens a new startup when the current one already
# printed something of a later phase.
VERSION_PHASE, ARGS_PHASE, CONFIG_PHASE, LOAD_PHASE, RUNNING_PHASE = 0, 1, 2, 3, 4

_BLOCK_SIZES = (16, 8, 32, 1, 2, 4, 64, 128, 256)  # vLLM's choices, the default first
_MAX_OTHER_ERRORS = 10
_MAX_ERROR_MESSAGE = 2000  # vLLM's own advice ends its longest messages (about 500 characters): keep it


@dataclass
class StartupState:
    """One startup while its lines are read."""

    first_line: int
    last_line: int
    phase: int = -1
    facts: dict[str, tuple[int, Fact]] = field(default_factory=dict)
    errors: list[StartupError] = field(default_factory=list)
    preemption_warnings: int = 0
    preemptions_cumulative: int | None = None
    serving: bool = False  # a stats line was printed: later exceptions are not startup errors
    loaded_by: set[str | None] = field(default_factory=set)  # process names (no pid) that loaded weights

    def set(self, key: str, value: Any, record: Record, rank: int, note: str | None = None) -> None:
        """Keep ``value`` for ``key`` unless a line of a higher rank already stated it."""
        if value is None or value == "":
            return
        held = self.facts.get(key)
        if held is None or rank > held[0]:
            self.facts[key] = (rank, Fact(value=value, line=record.no, raw=record.raw, note=note))

    def infer(self, key: str, value: Any, source: Fact | None, note: str) -> None:
        """Set ``key`` from other facts, with the provenance of ``source``, if no line states it."""
        if key not in self.facts and source is not None:
            self.facts[key] = (INFERRED, Fact(value=value, line=source.line, raw=source.raw, note=note))

    def fact(self, key: str) -> Fact | None:
        """The fact held for ``key``, with its line."""
        held = self.facts.get(key)
        return None if held is None else held[1]

    def value(self, key: str) -> Any:
        """The value held for ``key``, or ``None``."""
        held = self.facts.get(key)
        return None if held is None else held[1].value

    def error(self, kind: str, message: str, record: Record) -> None:
        """Record a startup error once; generic ones only before serving and only a few."""
        message = message.strip()[:_MAX_ERROR_MESSAGE]
        if any(e.kind == kind and e.message == message for e in self.errors):
            return
        if kind == "other" and (self.serving or sum(e.kind == "other" for e in self.errors) >= _MAX_OTHER_ERRORS):
            return
        self.errors.append(StartupError(kind=kind, message=message, line=record.no, raw=record.raw))


def finish_startup(state: StartupState) -> Startup:
    """Complete a startup's facts with what follows from them, and summarise it."""
    _infer(state)
    state.errors = specific_errors(state.errors)
    return Startup(
        first_line=state.first_line,
        last_line=state.last_line,
        version=state.value("vllm_version"),
        engine_generation=state.value("engine_generation"),
        model=state.value("model"),
        errors=[e.kind for e in state.errors],
    )


#: ``num_spec_tokens=3`` in the engine config's ``SpeculativeConfig(...)`` repr (0.6-0.33), or
#: ``'num_speculative_tokens': 3`` in the ``--speculative-config`` dict of the non-default args.
_SPEC_TOKENS = re.compile(r"num_spec(?:ulative)?_tokens['\"]?\s*[:=]\s*(\d+)")


def _infer(state: StartupState) -> None:
    """Add the facts that follow from others of the same startup, each with a note saying how."""
    blocks, concurrency = state.fact("num_gpu_blocks"), state.fact("max_concurrency")
    length, tokens = state.value("max_concurrency_tokens"), state.value("kv_cache_tokens")
    if blocks and blocks.value and state.value("block_size") is None:
        size = None
        if tokens and tokens % blocks.value == 0:
            size, why, source = tokens // blocks.value, f"{tokens} KV tokens / {blocks.value} blocks", blocks
        elif concurrency and length:
            # V0 and early V1 print concurrency = blocks x block_size / max_model_len, 2 decimals.
            x = concurrency.value
            size = next((s for s in _BLOCK_SIZES if round(blocks.value * s / length, 2) == round(x, 2)), None)
            why, source = f"{blocks.value} blocks x {size} / {length} tokens = {x:.2f}x", concurrency
        if size and size & (size - 1) == 0:
            state.infer("block_size", size, source, f"inferred: {why}")
    size = state.value("block_size")
    if blocks and size and tokens is None:
        state.infer("kv_cache_tokens", blocks.value * size, blocks, f"num_gpu_blocks {blocks.value} x block_size {size}")
    spec = state.fact("speculative_config")
    if spec is not None and (k := _SPEC_TOKENS.search(str(spec.value))) and (n := as_count(k[1])) is not None:
        state.infer("num_speculative_tokens", n, spec, "from speculative_config")
    version = version_tuple(state.value("vllm_version"))
    if state.value("engine_generation") is None and version:
        if version >= (0, 11):
            state.infer("engine_generation", "V1", state.fact("vllm_version"), "vLLM 0.11+ has only V1")
        elif version < (0, 6, 4):
            state.infer("engine_generation", "V0", state.fact("vllm_version"), "vLLM before 0.6.4 had only V0")
    if state.value("served_model_name") is None and (model := state.fact("model")):
        state.infer("served_model_name", model.value, model, "defaults to the model")


def specific_errors(errors: list[StartupError]) -> list[StartupError]:
    """Drop generic exception lines when a startup error of a known kind explains them."""
    if any(e.kind != "other" for e in errors):
        return [e for e in errors if e.kind != "other"]
    return errors

