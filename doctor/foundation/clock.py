"""One monotonic clock for every probe of a run, so stream, scrape and log times share an axis."""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class Clock:
    """``t0`` is taken once per run; every probe stamps seconds since it with ``perf_counter_ns``."""

    t0_ns: int = field(default_factory=time.perf_counter_ns)
    t0_wall: float = field(default_factory=time.time)

    def now(self) -> float:
        return (time.perf_counter_ns() - self.t0_ns) / 1e9

    def at(self, ns: int) -> float:
        """Seconds since t0 of a ``perf_counter_ns`` reading taken elsewhere (e.g. in a callback)."""
        return (ns - self.t0_ns) / 1e9
