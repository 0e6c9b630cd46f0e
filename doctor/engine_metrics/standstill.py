"""Whether the engine stood still: its progress counters unchanged over the latest scrapes.

A wedged engine (its core deadlocked or stopped, vllm#39863, #52319) keeps an API server that
answers ``/health``, ``/v1/models`` and ``/metrics`` with 200; only the engine's own counters
show it: the tokens it generated and prefilled, the requests it finished, the observations of
its histograms stop moving while requests are in flight. A histogram with no new observation is
evidence here, not a missing one. Read live by the probe's watchdog (``doctor.probes.watchdog``)
and afterwards by the check (``checks/engine_wedged.py``), from the same scrapes, so both say
the same thing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from doctor.engine_metrics.metric_names import FAMILY_BY_KEY, Sample
from doctor.engine_metrics.window import parse_scrape
from doctor.evidence import Scrape

#: Series identity -> value of every engine counter and histogram count in one scrape.
Progress = dict[tuple[object, ...], float]


def progress(samples: Iterable[Sample]) -> Progress:
    """The engine's progress counters in one scrape: counters (tokens, finished requests, preemptions)
    and the observation count of each histogram (TTFT, queue, prefill, inter-token, end to end).

    Only the engine's known families (``doctor.engine_metrics.metric_names``): the API server's own
    process, Python and HTTP counters move with every scrape and request it answers, wedged or not.
    """
    out: Progress = {}
    for s in samples:
        kind = FAMILY_BY_KEY[s.family].kind
        if (kind == "counter" and s.part == "value") or (kind == "histogram" and s.part == "count"):
            out[s.series] = s.value
    return out


@dataclass(frozen=True)
class Standstill:
    """The latest run of usable scrapes whose progress counters are all equal."""

    since: float  # the first scrape of the run (the probe's clock)
    until: float  # the last usable scrape
    scrapes: int
    counters: int  # series compared
    running: float | None  # the engine's running gauge at the last scrape (summed over engines), None: not exposed
    waiting: float | None

    @property
    def seconds(self) -> float:
        return self.until - self.since


def standstill(scrapes: Sequence[Scrape], cache: dict[float, tuple[Progress, dict[str, float]] | None] | None = None,
               until: float | None = None) -> Standstill | None:
    """The run of scrapes (up to ``until``, else the latest) over which no progress counter moved;
    ``None`` without a usable scrape or without any counter.

    ``cache`` (scrape time -> parsed counters and gauges) spares the watchdog a parse of every
    scrape on every look; a scrape that fails is skipped, not a break in the run (a timeout of
    /metrics says nothing about the engine's counters).
    """
    parsed: list[tuple[float, Progress, dict[str, float]]] = []
    for scrape in sorted(scrapes, key=lambda s: s.t):
        if until is not None and scrape.t > until:
            break
        if cache is not None and scrape.t in cache:
            hit = cache[scrape.t]
        else:
            result, _ = parse_scrape(scrape)
            hit = None if result is None else (progress(result.samples), _gauges(result.samples))
            if cache is not None:
                cache[scrape.t] = hit
        if hit is not None:
            parsed.append((scrape.t, *hit))
    if not parsed or not parsed[-1][1]:
        return None
    last_t, last, gauges = parsed[-1]
    since, n = last_t, 0
    for t, counters, _ in reversed(parsed):
        if counters != last:
            break
        since, n = t, n + 1
    return Standstill(since=since, until=last_t, scrapes=n, counters=len(last),
                      running=gauges.get("running"), waiting=gauges.get("waiting"))


def _gauges(samples: Iterable[Sample]) -> dict[str, float]:
    """The running and waiting gauges, summed over engines."""
    out: dict[str, float] = {}
    for s in samples:
        if s.family in ("running", "waiting"):
            out[s.family] = out.get(s.family, 0.0) + s.value
    return out
