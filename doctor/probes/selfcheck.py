"""Could the client itself have distorted the timings? Event-loop lag and the client's CPU.

Every token is stamped by the event loop that reads it; when that loop is late (a busy CPU, a
blocking call, too many streams for one process) every stamp after the delay is late too,
and the delay looks like a slow server. The sampler sleeps a fixed interval and records how
late it woke up; psutil reports the process's CPU. Either one over its limit marks the
evidence ``suspect``, so a diagnosis can say "client suspect" instead of blaming the server.

Each wake-up later than ``FREEZE_MS`` is also kept as a freeze, ``(start, end)`` on the run's
clock. A freeze is time the client could not read: a token that arrived during it is stamped at
its end. Kept as intervals, the derivations can take each freeze out of the gaps and waits it
overlaps (``doctor.derive.stream_stats``), and the probe can tell a read timeout the client
caused (it froze past ``--stall-timeout``; seen on a 2-core host beside a busy CPU engine: 34 s)
from a server that went silent.

The garbage collector is kept out of the measured window (``measuring``): a generation-2
collection walks every object alive, and the probe keeps every event and read of the run as
objects, so at 64 streams and more one collection stopped every stream at once for tens of ms
(docs/benchmarks.md, issue 25). It collects the young generation before each phase, when no
stream is in flight, freezes what survives (never scanned again) and stays off while the phase
runs; the cyclic garbage a phase leaves (a failed request's traceback) waits for a later
collection, and is bounded by the probe's caps on requests and events. Any collection that still runs inside the
window (someone calls ``gc.collect``) is recorded, and one over ``GC_PAUSE_LIMIT_MS`` is a reason.

A probe sharded over worker processes (``doctor.probes.shard``) runs one ``SelfCheck`` per
worker, each on its own loop and CPU; ``merge`` keeps every worker's health and marks the whole
client suspect when any one of them was: one saturated worker delays the stamps of its streams.
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import gc
import statistics
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import TypeVar

import psutil

from doctor.evidence import ClientHealth, RequestTrace
from doctor.evidence.stream import LATE_AFTER_S, frozen_overlap, late_arrival, send_lag
from doctor.foundation.clock import Clock
from doctor.foundation.stats import quantile

SAMPLE_INTERVAL_S = 0.01
CPU_INTERVAL_S = 0.25
#: Limits over which the client may have delayed its own stamps.
LAG_P99_LIMIT_MS = 10.0
LAG_MAX_LIMIT_MS = 50.0
SEND_P99_LIMIT_MS = 10.0  # writing a request on an open connection takes well under 1 ms when the client keeps up
CPU_LIMIT_PERCENT = 90.0  # of one core: a single event loop cannot use more than one
#: A wake-up this late is a freeze of the client, kept as an interval (``ClientHealth.freezes``).
FREEZE_MS = LAG_MAX_LIMIT_MS
#: A collection inside a measured window longer than this is a pause of the client (``measuring``).
GC_PAUSE_LIMIT_MS = 10.0
#: At most this many freezes are kept (the longest): enough to correct every gap that matters.
MAX_FREEZES = 1000


class SelfCheck:
    """Run ``sample()`` as a task for the probe's duration, then read ``health()``."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.lags_ms: list[float] = []
        self.freezes: list[tuple[float, float]] = []  # (start, end) on ``clock``, in time order
        self._awake_at = clock.now()  # the sampler's last wake-up
        self.cpu: list[float] = []
        self._process = psutil.Process()
        self._process.cpu_percent(None)  # primes the counter: the first reading is always 0
        self._cpu_read_at = time.perf_counter()
        self.gc_pauses_ms: list[float] = []  # collections inside a measured window (``measuring``)
        self._windows = 0  # measured windows open: the collector is off while one is
        self._gc_started = 0.0
        #: per kernel-stamped read, seconds from the kernel's stamp to the loop's (``note_gaps``);
        #: an array of doubles, 8 bytes a read, and no object for the collector to walk
        self.gaps = array.array("d")
        #: per read the drain thread took, seconds from the kernel's stamp to that read (``ReadLog.read_gaps``)
        self.read_gaps = array.array("d")

    def note_gaps(self, gaps: Iterable[float], read_gaps: Iterable[float] = ()) -> None:
        """Keep a request's kernel-to-loop gaps (``ReadLog.gaps``) for the run's distortion figure, and
        its kernel-to-reader gaps (``ReadLog.read_gaps``) for what merged tokens could still add."""
        self.gaps.extend(gaps)
        self.read_gaps.extend(read_gaps)

    @contextlib.contextmanager
    def measuring(self) -> Iterator[None]:
        """A measured window (a phase of the probe, a client worker's life): collect now, freeze what
        survives, keep the collector off until the window closes, then give back what was frozen."""
        if self._windows == 0:
            # the young generation only (what the last phase left): a full collection of a large
            # process (diagnose holds its whole run) costs 100 ms or more of the run's --deadline
            gc.collect(0)
            gc.freeze()
        enabled = gc.isenabled()
        gc.disable()
        self._windows += 1
        try:
            yield
        finally:
            self._windows -= 1
            if enabled:
                gc.enable()
            if self._windows == 0:
                gc.unfreeze()

    def _on_gc(self, phase: str, _info: dict[str, int]) -> None:
        """``gc.callbacks``: the length of each collection that runs inside a measured window."""
        if not self._windows:
            return
        if phase == "start":
            self._gc_started = time.perf_counter()
        else:
            self.gc_pauses_ms.append((time.perf_counter() - self._gc_started) * 1000)

    def _read_cpu(self, now: float) -> None:
        """Record CPU % since the previous reading; a window much shorter than the interval is noise
        (a 5 ms window of one busy callback reads as 100 %), so it is skipped."""
        if now - self._cpu_read_at >= CPU_INTERVAL_S / 2:
            self.cpu.append(self._process.cpu_percent(None))
            self._cpu_read_at = now

    async def sample(self) -> None:
        """Measure event-loop lag and this process's CPU until cancelled (it never returns by itself)."""
        next_cpu = time.perf_counter() + CPU_INTERVAL_S
        gc.callbacks.append(self._on_gc)
        try:
            while True:
                before = time.perf_counter()
                await asyncio.sleep(SAMPLE_INTERVAL_S)
                now = time.perf_counter()
                lag_ms = max(0.0, (now - before - SAMPLE_INTERVAL_S) * 1000)
                self.lags_ms.append(lag_ms)
                self._awake_at = self.clock.now()
                if lag_ms > FREEZE_MS:
                    self.freezes.append((self._awake_at - lag_ms / 1000, self._awake_at))
                if now >= next_cpu:
                    self._read_cpu(now)
                    next_cpu = now + CPU_INTERVAL_S
        finally:
            gc.callbacks.remove(self._on_gc)

    def frozen_within(self, start: float, end: float) -> float:
        """Seconds of ``[start, end]`` (the run's clock) the client spent frozen.

        A freeze is recorded when the sampler wakes up; a caller that wakes up first from the
        same freeze (a read timeout) finds it still open: since the sampler's last wake-up.
        """
        now, since = self.clock.now(), self._awake_at + SAMPLE_INTERVAL_S  # the sampler's sleep is no freeze
        freezes = [*self.freezes, (since, now)] if (now - since) * 1000 > FREEZE_MS else self.freezes
        return frozen_overlap(freezes, start, end)

    def health(self, transport: str, requests: Sequence[RequestTrace] = (), closed_loop: bool = True) -> ClientHealth:
        """The client's health over the run, with reasons when its own stamps may be late.

        A late stamp from an overloaded client looks exactly like a slow server; the report uses
        this to refuse blaming the server for latency the client added. When the kernel stamped
        every read, the loop's lateness is no longer in the stamps: its lag, CPU and collections
        are then notes, not reasons, and what is measured instead is how late the loop read what
        the kernel had stamped (``kernel_gap_p99_ms``: the distortion the loop's clock would have
        had). One distortion stays: the kernel merges segments that wait unread and keeps the LAST
        one's stamp (``doctor.probes.kernel_stamps``), so a reader later than the gap between two
        tokens reads them together and the first is stamped at the second's arrival. The reader is
        the drain thread (``doctor.probes.drainer``) where there is one (``read_gap_p99_ms``), else
        the loop; its gap p99 over the run's median token gap is a reason.
        A request that took long to leave the client is a reason too: latencies count from when it
        left (``send_lag``), but the server saw the load later than the schedule. In an open loop
        (``closed_loop`` False) with late arrivals (``late_arrival``), the lag, CPU and collections
        stay reasons under kernel stamps: the wait from arrival to send is in TTFT there, and a
        saturated client is what makes it.
        """
        self._read_cpu(time.perf_counter())
        out = ClientHealth(cpu_count=psutil.cpu_count(), transport=transport, realtime_offset_ns=self.clock.realtime_offset_ns)
        out.stamp_clock = _which_clock(r.stamp_clock for r in requests)
        out.send_clock = _which_clock(r.send_clock for r in requests)
        kernel = out.stamp_clock == "kernel"
        # What distorts the loop's stamps, not the kernel's. But kernel stamps take the loop's lateness
        # out of the reads only: in an open loop a request the saturated client sent late keeps that
        # wait in its TTFT (``send_lag`` counts only the write there), so while arrivals were late what
        # saturates the client stays a reason.
        late = [] if closed_loop else [r for r in requests if late_arrival(r)]
        stamps = out.notes if kernel and not late else out.reasons
        said = len(stamps)
        if self.lags_ms:
            lags = sorted(self.lags_ms)
            out.loop_lag_p99_ms = round(quantile(lags, 0.99), 3)
            out.loop_lag_max_ms = round(lags[-1], 3)
            if out.loop_lag_p99_ms > LAG_P99_LIMIT_MS:
                stamps.append(f"event-loop lag p99 {out.loop_lag_p99_ms:.1f} ms > {LAG_P99_LIMIT_MS:g} ms: token stamps may be late")
            if out.loop_lag_max_ms > LAG_MAX_LIMIT_MS:
                stamps.append(f"event-loop lag max {out.loop_lag_max_ms:.0f} ms > {LAG_MAX_LIMIT_MS:g} ms: one stall of the client itself")
        if self.gaps:
            gaps = sorted(self.gaps)
            out.kernel_gap_p99_ms = round(quantile(gaps, 0.99) * 1000, 3)
            out.kernel_gap_max_ms = round(gaps[-1] * 1000, 3)
            if self.read_gaps:
                read = sorted(self.read_gaps)
                out.read_gap_p99_ms = round(quantile(read, 0.99) * 1000, 3)
                out.read_gap_max_ms = round(read[-1] * 1000, 3)
            reader, late_ms = ("the reader", out.read_gap_p99_ms) if out.read_gap_p99_ms is not None \
                else ("the loop", out.kernel_gap_p99_ms)
            pace = _median_token_gap(requests)
            if kernel and pace is not None and late_ms > pace * 1000:
                out.reasons.append(f"{reader} read {late_ms:.1f} ms after the kernel at p99, more than the "
                                   f"{pace * 1000:.1f} ms between tokens: tokens read together share the stamp of the last")
        sends = sorted(lag * 1000 for lag in (send_lag(r, closed_loop) for r in requests) if lag is not None)
        if not sends:  # a bundle's requests from before ``t_request_left``: the write on a reused connection
            sends = sorted((r.t_request_written - r.t_sent) * 1000 for r in requests
                           if r.connection_reused and r.t_request_written is not None and r.t_sent is not None)
        if sends:
            out.send_p99_ms = round(quantile(sends, 0.99), 3)
            if out.send_p99_ms > SEND_P99_LIMIT_MS:
                out.reasons.append(f"putting a request on the wire took {out.send_p99_ms:.1f} ms at p99 > {SEND_P99_LIMIT_MS:g} ms: "
                                   "latencies count from when it left, but the server got the load later than scheduled")
        long_gc = [ms for ms in self.gc_pauses_ms if ms > GC_PAUSE_LIMIT_MS]
        if long_gc:
            stamps.append(f"garbage collection paused the client {len(long_gc)} time(s) while it measured, "
                          f"the longest {max(long_gc):.0f} ms > {GC_PAUSE_LIMIT_MS:g} ms")
        out.cpu_percent_max = round(max(self.cpu), 1) if self.cpu else None
        if out.cpu_percent_max is not None and out.cpu_percent_max >= CPU_LIMIT_PERCENT:
            stamps.append(f"client CPU reached {out.cpu_percent_max:.0f} % of a core: the client was saturated")
        if kernel and late and len(stamps) > said:
            out.reasons.append(f"{len(late)} of {len(requests)} arrivals left more than {LATE_AFTER_S * 1000:g} ms after "
                               "they were due while the client was saturated: that wait is the client's, yet counts in "
                               "their TTFT")
        out.freezes = [[round(a, 6), round(b, 6)] for a, b in longest_freezes(self.freezes)]
        out.suspect = bool(out.reasons)
        return out


def _which_clock(clocks: Iterable[str | None]) -> str | None:
    """"kernel" or "loop" when every request that says agrees, "mixed" when they differ, None when none says."""
    seen = {c for c in clocks if c is not None}
    if not seen:
        return None
    return seen.pop() if len(seen) == 1 else "mixed"


def _median_token_gap(requests: Sequence[RequestTrace]) -> float | None:
    """The median gap between consecutive token events over the run's requests: the stream's pace."""
    gaps = [b.t - a.t for r in requests for a, b in zip(r.tokens, r.tokens[1:])]  # noqa: B905 - offset by one on purpose
    return statistics.median(gaps) if gaps else None


_Freeze = TypeVar("_Freeze", tuple[float, float], list[float])


def longest_freezes(freezes: Iterable[_Freeze]) -> list[_Freeze]:
    """The ``MAX_FREEZES`` longest freezes, in time order: what a bundle keeps of them."""
    return sorted(sorted(freezes, key=lambda f: f[0] - f[1])[:MAX_FREEZES])


def merge(shards: Sequence[ClientHealth | None], transport: str) -> ClientHealth:
    """The health of a client sharded over worker processes, from each worker's (``None``: the
    worker ended without reporting it). Lags and CPU are the worst worker's (CPU is per process, so
    a saturated worker reads near 100 %), every reason names its worker, and the freezes of all
    of them are kept together as well as per worker (``ClientHealth.freezes_of``)."""
    kept = [h if h is not None else ClientHealth(suspect=True, reasons=["it ended without reporting its self-check"])
            for h in shards]
    out = ClientHealth(cpu_count=next((h.cpu_count for h in kept if h.cpu_count is not None), None),
                       transport=f"{transport}, sharded over {len(kept)} worker processes", shards=kept)
    for name in ("loop_lag_p99_ms", "loop_lag_max_ms", "cpu_percent_max", "send_p99_ms", "kernel_gap_p99_ms", "kernel_gap_max_ms",
                 "read_gap_p99_ms", "read_gap_max_ms"):
        values = [v for v in (getattr(h, name) for h in kept) if v is not None]
        setattr(out, name, max(values) if values else None)
    out.stamp_clock = _which_clock(h.stamp_clock for h in kept)
    out.send_clock = _which_clock(h.send_clock for h in kept)
    out.realtime_offset_ns = next((h.realtime_offset_ns for h in kept if h.realtime_offset_ns is not None), None)
    out.reasons = [f"client worker {i}: {reason}" for i, h in enumerate(kept) for reason in h.reasons]
    out.notes = [f"client worker {i}: {note}" for i, h in enumerate(kept) for note in h.notes]
    out.freezes = longest_freezes(f for h in kept for f in h.freezes)
    out.suspect = any(h.suspect for h in kept)
    return out
