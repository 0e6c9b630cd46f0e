"""The wedge watchdog's decision, and the runtime readings of real vLLM scrapes.

The watchdog is exercised end to end against a real server in ``tests/checks/test_engine_wedged.py``;
here its rule alone, on scrapes in vLLM's exposition: it bites only when requests in flight had
no token for the bound while every engine counter stood still, and never while tokens flow.
"""

from __future__ import annotations

from pathlib import Path

from doctor.bundle import load_path
from doctor.engine_metrics.runtime import readings
from doctor.engine_metrics.standstill import standstill
from doctor.evidence import RequestTrace, Scrape, TokenEvent
from doctor.foundation.clock import Clock
from doctor.probes.watchdog import Watchdog
from tests.support.bundles import exposition

RECORDED = Path(__file__).resolve().parents[2] / "fixtures" / "bundles"


def scrapes(generated: list[int], every: float = 1.0) -> list[Scrape]:
    return [Scrape(phase="during", t=k * every, wall=1e9 + k * every, status=200, content_type="text/plain",
                   text=exposition({"vllm:generation_tokens_total": g, "vllm:num_requests_running": 1}))
            for k, g in enumerate(generated)]


def in_flight(sent: float, tokens: list[float] = ()) -> RequestTrace:  # type: ignore[assignment]
    return RequestTrace(index=0, path="direct", t_scheduled=sent, t_sent=sent, tokens=[TokenEvent(t=t) for t in tokens])


def watchdog(taken: list[Scrape], now: float) -> Watchdog:
    clock = Clock()
    clock.now = lambda: now  # type: ignore[method-assign]  # the decision's time, not the test's
    return Watchdog(lambda: taken, clock, bound_s=15.0)


def test_it_bites_when_counters_and_requests_stand_still_for_the_bound() -> None:
    stop = watchdog(scrapes([320] * 18), now=17.2).wedged([in_flight(0.5)])
    assert stop is not None
    assert (stop.t_first_waiting, stop.still_since, stop.scrapes, stop.in_flight) == (0.5, 0.0, 18, 1)
    assert stop.running == 1.0


def test_it_waits_out_the_bound() -> None:
    assert watchdog(scrapes([320] * 12), now=11.2).wedged([in_flight(0.5)]) is None


def test_counters_that_move_are_an_engine_at_work() -> None:
    """Plain queueing: the request waits, the engine generates for others."""
    assert watchdog(scrapes([320 + 40 * k for k in range(18)]), now=17.2).wedged([in_flight(0.5)]) is None


def test_a_token_at_the_client_is_progress_whatever_metrics_says() -> None:
    """A /metrics that stopped moving (a cache in front of it) while tokens still arrive is no wedge."""
    traces = [in_flight(0.5), in_flight(0.2, tokens=[0.3, 9.0])]
    assert watchdog(scrapes([320] * 18), now=17.2).wedged(traces) is None


def test_nothing_in_flight_nothing_to_stop() -> None:
    done = in_flight(0.5, tokens=[0.6])
    done.t_end = 0.7
    assert watchdog(scrapes([320] * 18), now=17.2).wedged([done]) is None


def test_real_vllm_scrapes_carry_the_api_servers_gc_and_cpu_and_the_wedge_stood_still() -> None:
    """vLLM 0.32's /metrics (recorded): the API server's gen-2 GC count, start time and CPU seconds;
    with its engine core stopped (SIGSTOP), every engine counter stood still while the CPU moved."""
    bundle = load_path(RECORDED / "realvllm-engine-wedged.json.gz")
    assert bundle.metrics is not None
    series = readings(bundle.metrics.scrapes)
    assert all(r.gc_full is not None and r.started is not None and r.cpu_s is not None for r in series)
    assert series[-1].cpu_s > series[0].cpu_s  # type: ignore[operator]  # the API server still answers
    still = standstill(bundle.metrics.scrapes)
    assert still is not None and still.scrapes == len(series) and still.counters > 10
