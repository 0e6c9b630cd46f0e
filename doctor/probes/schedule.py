"""When each probe request is sent: paired, counterbalanced, never over the asked load.

Direct and gateway requests are paired and interleaved A B B A A B ... (counterbalanced, so
neither path is always second to hit a warm engine). Each path has its own ``concurrency``
numbered slots; a request waits for a free slot of its own path and is told which one (the
probe keeps one connection per slot), so the probe never runs more than ``concurrency``
streams per path nor more than the asked count.

Closed loop (no ``rate``): one dispatcher sends the jobs in pair order, each when its path has
a free slot, so the paths stay in step: a fast path cannot run ahead of the pairs. Latency
counts from the send, since the schedule is the slot.

Poisson (``rate`` per second per path): the pair's send time is drawn up front, and at that
time each request of the pair starts and waits, first come first served, for a slot of its
own path only: a slow gateway whose slots are all busy must not delay the direct requests, or
the gateway's latency would show up on the direct path. Latency counts from the scheduled time
even when the request had to wait for a slot (no coordinated omission); the wait itself is the
client queueing, ``t_sent - t_scheduled``, reported apart from latency.

Warm-up pairs run first, closed loop, and all finish before the measured phase starts.

A ``stop`` predicate (the sampling rule, ``doctor.probes.sampling``) is asked before each new
pair: once it says enough, no further pair starts and those in flight finish.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass

from doctor.evidence import ProbePath
from doctor.foundation.clock import Clock


@dataclass(frozen=True)
class Job:
    """One request to send: ``index`` is per path, so a pair shares it."""

    index: int
    path: ProbePath
    warmup: bool
    offset: float | None = None  # Poisson: seconds after the measured phase starts
    control: bool = False  # an unconstrained twin of a constrained --payload (``StreamEvidence.controls``)


def plan(paths: list[ProbePath], requests: int, warmup: int, rate: float | None, seed: int = 0) -> tuple[list[Job], Iterator[Job]]:
    """(warm-up jobs, measured jobs), each in counterbalanced pair order.

    The measured jobs are drawn as they are sent, never built in advance: a run that plans
    many requests and stops early (the adaptive rule, the deadline, Ctrl-C) costs memory only
    for what it sent, and its first request starts at once whatever ``requests`` is.
    """

    def order(k: int) -> list[ProbePath]:
        return paths if k % 2 == 0 else paths[::-1]

    def measured() -> Iterator[Job]:
        rng = random.Random(seed)
        offset = 0.0
        for k in range(warmup, warmup + requests):
            if rate:
                offset += rng.expovariate(rate) if k > warmup else 0.0
            for p in order(k):
                yield Job(k, p, False, offset if rate else None)

    return [Job(k, p, True) for k in range(warmup) for p in order(k)], measured()


#: Runs one request: (job, scheduled time on the clock, slot number) -> None. Records its own trace.
Send = Callable[[Job, float, int], Awaitable[None]]


class _Slots:
    """One path's numbered slots, handed to the waiting requests strictly in arrival order.

    Hand-written rather than an ``asyncio.Queue`` of slot numbers: a queue lets a ``get`` that
    arrives while a freed slot's waiter has not resumed yet take that slot, so a later-scheduled
    request could be sent before an earlier one. Here a freed slot goes straight to the oldest
    waiter.
    """

    def __init__(self, count: int) -> None:
        self._free = deque(range(count))
        self._waiters: deque[asyncio.Future[int]] = deque()

    async def acquire(self) -> int:
        """A free slot's number, once every request that asked before has had one."""
        if self._free:  # a slot is only ever free while nobody waits
            return self._free.popleft()
        waiter: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            return await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release(waiter.result())  # handed a slot, then cancelled before taking it
            else:
                with contextlib.suppress(ValueError):  # release() may have dropped it already
                    self._waiters.remove(waiter)
            raise

    def release(self, slot: int) -> None:
        """Give ``slot`` to the oldest waiter, else free it."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(slot)
                return
        self._free.append(slot)


async def dispatch(jobs: Iterable[Job], concurrency: int, send: Send, clock: Clock,
                   stop: Callable[[], bool] | None = None) -> None:
    """Send ``jobs`` in order, at most ``concurrency`` in flight per path, until ``stop()`` says
    enough before a new pair (whole pairs only, so the paths stay comparable); wait for all."""
    slots: dict[str, _Slots] = {}
    running: set[asyncio.Task[None]] = set()
    start = clock.now()

    async def run(job: Job, scheduled: float, slot: int | None) -> None:
        path_slots = slots[job.path]
        if slot is None:
            slot = await path_slots.acquire()
        try:
            await send(job, scheduled, slot)
        finally:
            path_slots.release(slot)

    pair: int | None = None
    try:
        for job in jobs:
            if job.path not in slots:
                slots[job.path] = _Slots(concurrency)
            path_slots = slots[job.path]
            slot: int | None = None
            if job.offset is None:  # closed loop: the next job waits here, so the pairs stay in step
                slot = await path_slots.acquire()
                scheduled = clock.now()
            else:  # open loop: start on time; the request waits for its own path's slot
                scheduled = start + job.offset
                delay = scheduled - clock.now()
                if delay > 0:
                    await asyncio.sleep(delay)
            if job.index != pair:
                if stop is not None and stop():
                    if slot is not None:
                        path_slots.release(slot)
                    break
                pair = job.index
            task = asyncio.ensure_future(run(job, scheduled, slot))
            running.add(task)
            task.add_done_callback(running.discard)
        if running:
            await asyncio.gather(*running)
    finally:
        for task in running:
            task.cancel()
        if running:
            await asyncio.gather(*running, return_exceptions=True)
