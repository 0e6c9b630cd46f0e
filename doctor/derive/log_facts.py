"""Facts read from a vLLM startup log: configuration, KV capacity, errors, stats over time."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from doctor.derive.missing import Missing
from doctor.evidence import Bundle


@dataclass
class Fact:
    """A value and its provenance: the line number in the source log and the raw line."""

    value: Any
    line: int | None = None
    raw: str | None = None


@dataclass
class StartupError:
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


@dataclass
class Startup:
    first_line: int
    last_line: int | None = None
    version: str | None = None


@dataclass
class LogFacts:
    source: str = ""
    facts: dict[str, Fact] = field(default_factory=dict)
    errors: list[StartupError] = field(default_factory=list)
    stats: list[StatsPoint] = field(default_factory=list)
    preemption_warnings: int = 0
    preemptions_cumulative: int | None = None
    startups: list[Startup] = field(default_factory=list)  # every startup found; facts are from the last

    def value(self, key: str, default: Any = None) -> Any:
        fact = self.facts.get(key)
        return default if fact is None else fact.value


def derive_log_facts(bundle: Bundle) -> LogFacts:
    if bundle.log is None:
        raise Missing("no startup log (pass --log PATH)")
    raise Missing("the startup-log parser is not available in this build")
