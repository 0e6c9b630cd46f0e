"""The wedge watchdog: stop the probe early when the engine stands still behind a green front end.

A wedged engine (its core deadlocked or stopped) keeps an API server that accepts requests and
answers /health and /metrics, so each probe request waits its whole stall timeout for a first
token that never comes, and the run takes a minute to say only "TTFT over budget". The engine's
own counters say it at once: while requests are in flight without a token, its generated and
prompt tokens, finished requests and histogram counts do not move. The watchdog looks at the
/metrics scrapes the collector takes beside the probe (``doctor.probes.metrics.Scraper``) every
``POLL_S``; once requests have waited ``bound_s`` with every counter still and no token reached
the client, it stops sending, cancels the requests in flight (outcome ``wedged``: censored, their
wait a lower bound of TTFT) and records why (``StreamEvidence.wedge``).

Kept apart from the probe's run loop so that loop carries only a hook (``guard`` around its
phases, ``censor`` after). It runs in the process that schedules: when client worker processes
read the streams (``doctor.probes.shard``), each says every ``POLL_S`` what it has in flight
(``doctor.probes.stream.shards``), and the stop cancels their requests through the parent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from doctor.engine_metrics.standstill import Progress, standstill
from doctor.evidence import RequestTrace, Scrape, WedgeStop
from doctor.evidence.stream import CANCELLED, WEDGED
from doctor.foundation.clock import Clock

#: How often the watchdog looks (the scrapes come every ``--scrape-interval``, 1 s by default).
POLL_S = 0.5


class Watchdog:
    """Decides from the scrapes so far and the requests in flight; ``stop`` once it has bitten."""

    def __init__(self, scrapes: Callable[[], Sequence[Scrape]], clock: Clock, bound_s: float) -> None:
        self.scrapes = scrapes
        self.clock = clock
        self.bound_s = bound_s
        self.stop: WedgeStop | None = None
        self._parsed: dict[float, tuple[Progress, dict[str, float]] | None] = {}

    def wedged(self, traces: Sequence[RequestTrace]) -> WedgeStop | None:
        """A ``WedgeStop`` when requests in flight without a token waited ``bound_s`` while every
        engine counter stood still and no token reached the client; else None."""
        waiting = [t for t in traces if t.t_sent is not None and t.t_end is None and not t.tokens]
        if not waiting:
            return None
        first = min(t.t_sent for t in waiting if t.t_sent is not None)
        still = standstill(self.scrapes(), self._parsed)
        if still is None or still.scrapes < 2:
            return None
        start = max(first, still.since)
        last_token = max((t.tokens[-1].t for t in traces if t.tokens), default=None)
        if still.until - start < self.bound_s or (last_token is not None and last_token >= start):
            return None
        return WedgeStop(t_detected=self.clock.now(), t_first_waiting=first, still_since=still.since,
                         still_until=still.until, scrapes=still.scrapes, counters=still.counters, bound_s=self.bound_s,
                         in_flight=len(waiting), sent=sum(1 for t in traces if t.t_sent is not None),
                         running=still.running, waiting=still.waiting)

    async def guard(self, work: Awaitable[None], traces: Callable[[], Sequence[RequestTrace]]) -> None:
        """Run ``work`` (the probe's phases) until it ends or the engine is seen wedged, then cancel it.
        ``traces``: every request sent so far, read at each poll (the payload's unconstrained twins,
        sent before the warm-up, included: a wedge may already hold the first of them)."""
        task = asyncio.ensure_future(work)
        try:
            while not task.done():
                await asyncio.wait({task}, timeout=POLL_S)
                if not task.done() and (stop := self.wedged(traces())) is not None:
                    self.stop = stop
                    task.cancel()
                    await asyncio.gather(task, return_exceptions=True)
                    return
            task.result()
        finally:
            if not task.done():  # the deadline or Ctrl-C cancelled the guard itself
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

    def censor(self, traces: list[RequestTrace]) -> str | None:
        """Relabel the requests cancelled by the stop ``wedged``; the sentence for ``ProbeShape.stopped``."""
        stop = self.stop
        if stop is None:
            return None
        for trace in traces:
            if trace.outcome == CANCELLED:
                trace.outcome = WEDGED
                trace.error = (f"no first token after {stop.t_detected - (trace.t_sent or trace.t_scheduled):.1f} s while the "
                               f"engine's counters stood still: the probe stopped waiting (watchdog)")
        return (f"the engine stood still: {stop.in_flight} request(s) without a first token and no engine counter moving "
                f"for {stop.still_until - max(stop.t_first_waiting, stop.still_since):.1f} s "
                f"({stop.scrapes} scrapes): stopped sending after {stop.sent} request(s)")
