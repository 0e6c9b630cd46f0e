"""When each probe request is sent: paired, counterbalanced, never over the asked load.

Direct and gateway requests are paired and interleaved A B B A A B ... (counterbalanced, so
neither path is always second to hit a warm engine), dispatched in that order by one loop.
Each path has its own ``concurrency`` numbered slots; a request waits for a free slot of its
path and is told which one (the probe keeps one connection per slot), so the probe never runs
more than ``concurrency`` streams per path nor more than the asked count,
and because one dispatcher serves both paths they stay in step: a fast path cannot run ahead
of the pairs.

Closed loop (no ``rate``): a request is scheduled when a slot frees. Poisson (``rate`` per
second per path): the pair's send time is drawn up front and latency counts from that
scheduled time even when the request had to wait for a slot (no coordinated omission); the
wait itself is the client queueing, ``t_sent - t_scheduled``, reported apart from latency.
Warm-up pairs run first, closed loop, and all finish before the measured phase starts.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from doctor.clock import Clock


@dataclass(frozen=True)
class Job:
    """One request to send: ``index`` is per path, so a pair shares it."""

    index: int
    path: str
    warmup: bool
    offset: float | None = None  # Poisson: seconds after the measured phase starts


def plan(paths: list[str], requests: int, warmup: int, rate: float | None, seed: int = 0) -> tuple[list[Job], list[Job]]:
    """(warm-up jobs, measured jobs), each in counterbalanced pair order."""

    def order(k: int) -> list[str]:
        return paths if k % 2 == 0 else paths[::-1]

    warm = [Job(k, p, True) for k in range(warmup) for p in order(k)]
    rng = random.Random(seed)
    measured: list[Job] = []
    offset = 0.0
    for k in range(warmup, warmup + requests):
        if rate:
            offset += rng.expovariate(rate) if k > warmup else 0.0
        measured += [Job(k, p, False, offset if rate else None) for p in order(k)]
    return warm, measured


#: Runs one request: (job, scheduled time on the clock, slot number) -> None. Records its own trace.
Send = Callable[[Job, float, int], Awaitable[None]]


async def dispatch(jobs: list[Job], concurrency: int, send: Send, clock: Clock) -> None:
    """Send ``jobs`` in order, at most ``concurrency`` in flight per path; wait for all."""
    free: dict[str, asyncio.Queue[int]] = {}
    running: set[asyncio.Task[None]] = set()
    start = clock.now()
    try:
        for job in jobs:
            if job.path not in free:
                free[job.path] = asyncio.Queue()
                for slot in range(concurrency):
                    free[job.path].put_nowait(slot)
            if job.offset is not None:
                scheduled = start + job.offset
                delay = scheduled - clock.now()
                if delay > 0:
                    await asyncio.sleep(delay)
                slot = await free[job.path].get()
            else:
                slot = await free[job.path].get()
                scheduled = clock.now()
            task = asyncio.ensure_future(send(job, scheduled, slot))
            running.add(task)
            task.add_done_callback(lambda t, q=free[job.path], s=slot: (running.discard(t), q.put_nowait(s)))
        if running:
            await asyncio.gather(*running)
    finally:
        for task in running:
            task.cancel()
        if running:
            await asyncio.gather(*running, return_exceptions=True)
