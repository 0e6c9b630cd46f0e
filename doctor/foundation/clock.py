"""One monotonic clock for every probe of a run, so stream, scrape and log times share an axis.

The kernel stamps what it receives and sends on ``CLOCK_REALTIME`` (``SO_TIMESTAMPING``,
``doctor.probes.kernel_stamps``); the run's clock is ``perf_counter_ns``, which is
``CLOCK_MONOTONIC`` on Linux. ``Clock.from_realtime`` converts one to the other with an offset
sampled once per run (``realtime_offset_ns``): the two clocks advance at the same rate (NTP slews
both), and only a step of the wall clock during the run (``settimeofday``) would move a kernel
stamp, which is why the bundle records the offset (``ClientHealth.realtime_offset_ns``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

#: Readings taken to sample the offset: the one bracketed most tightly by its two monotonic
#: readings wins, so a preemption between them does not skew it.
_OFFSET_SAMPLES = 5


def realtime_offset_ns() -> int:
    """``CLOCK_REALTIME - perf_counter`` now, in ns, to within the tightest of a few readings (about 1 us)."""
    best: tuple[int, int] | None = None
    for _ in range(_OFFSET_SAMPLES):
        before = time.perf_counter_ns()
        wall = time.clock_gettime_ns(time.CLOCK_REALTIME) if hasattr(time, "clock_gettime_ns") else time.time_ns()
        after = time.perf_counter_ns()
        if best is None or after - before < best[0]:
            best = (after - before, wall - (before + after) // 2)
    assert best is not None
    return best[1]


@dataclass
class Clock:
    """``t0`` is taken once per run; every probe stamps seconds since it with ``perf_counter_ns``."""

    t0_ns: int = field(default_factory=time.perf_counter_ns)
    t0_wall: float = field(default_factory=time.time)
    # CLOCK_REALTIME - perf_counter, sampled once when the clock is made (each process of a sharded
    # probe samples its own): how a kernel stamp lands on this clock
    realtime_offset_ns: int = field(default_factory=realtime_offset_ns)

    def now(self) -> float:
        return (time.perf_counter_ns() - self.t0_ns) / 1e9

    def at(self, ns: int) -> float:
        """Seconds since t0 of a ``perf_counter_ns`` reading taken elsewhere (e.g. in a callback)."""
        return (ns - self.t0_ns) / 1e9

    def from_realtime(self, ns: int) -> int:
        """The ``perf_counter_ns`` reading of a ``CLOCK_REALTIME`` stamp (the kernel's), by the run's offset."""
        return ns - self.realtime_offset_ns
