"""The probe's stopping rule: it stops when every path is clearly within or clearly over budget."""

from __future__ import annotations

import pytest

from doctor.evidence import StreamEvidence
from doctor.foundation.clock import Clock
from doctor.model import Budgets
from doctor.probes.plan import CollectConfig
from doctor.probes.sampling import FAIL_FAST, binomial_cdf, conclusive, decided
from doctor.probes.stream import run_stream_probe
from tests.support.bundles import request
from tests.support.sse_server import SseServer


def test_binomial_cdf_matches_small_cases_by_hand() -> None:
    assert abs(binomial_cdf(0, 8, 0.1) - 0.9 ** 8) < 1e-12
    assert abs(binomial_cdf(1, 2, 0.5) - 0.75) < 1e-12
    assert binomial_cdf(8, 8, 0.1) == 1.0 and binomial_cdf(-1, 8, 0.1) == 0.0


def test_eight_fast_requests_cannot_say_a_p90_is_within_budget_but_29_can() -> None:
    assert decided(0, 8) is None  # 0.9^8 = 43 %: a 10 % exceedance would often show none
    assert decided(0, 29) == "within"  # 0.9^29 < 5 %
    assert decided(4, 8) == "over"
    assert decided(1, 8) is None


def test_a_slow_path_is_conclusive_early_and_a_healthy_one_only_with_enough_requests() -> None:
    slow = [request("direct", i, ttft=2.0, gaps=[0.02] * 9, start=i * 3.0) for i in range(8)]
    assert conclusive(slow, ["direct"], ttft_s=0.5, tpot_s=0.05)
    fast = [request("direct", i, ttft=0.1, gaps=[0.02] * 9, start=i * 1.0) for i in range(8)]
    assert not conclusive(fast, ["direct"], ttft_s=0.5, tpot_s=0.05)
    more = [request("direct", i, ttft=0.1, gaps=[0.02] * 9, start=i * 1.0) for i in range(30)]
    assert conclusive(more, ["direct"], ttft_s=0.5, tpot_s=0.05)


def test_requests_still_waiting_at_the_stall_timeout_count_as_over_and_every_path_must_conclude() -> None:
    waiting = []
    for i in range(8):
        r = request("gateway", i, ttft=0.0, gaps=[], start=i * 1.0, outcome="stall")
        r.t_end = r.t_scheduled + 30.0  # finished: the probe gave up waiting
        waiting.append(r)
    fast = [request("direct", i, ttft=0.1, gaps=[0.02] * 9, start=i * 1.0) for i in range(8)]
    assert conclusive(waiting, ["gateway"], ttft_s=0.5, tpot_s=0.05)
    assert not conclusive(waiting + fast, ["gateway", "direct"], ttft_s=0.5, tpot_s=0.05)


# --------------------------------------------------------------------------- the probe, adaptive


def adaptive(server: SseServer, duration_s: float = 60.0, **opts) -> StreamEvidence:
    config = CollectConfig(engine=server.base(**opts), requests=None, warmup=0, duration_s=duration_s,
                           max_tokens=4, budgets=Budgets(ttft_s=0.5, tpot_s=0.05))
    evidence, _ = run_stream_probe(config, Clock(), lambda _msg: None)
    assert evidence is not None
    return evidence


def test_without_a_request_count_a_slow_path_stops_early_and_a_fast_one_samples_until_it_is_sure() -> None:
    with SseServer() as server:
        slow = adaptive(server, ttft=0.6, itl=0.001)
        fast = adaptive(server, ttft=0.001, itl=0.001)
    assert slow.shape.stopped is not None and slow.shape.stopped.startswith("conclusive after 8")
    assert fast.shape.stopped is not None and fast.shape.stopped.startswith("conclusive after")
    assert len(fast.requests) > len(slow.requests) >= 8  # 8 cannot prove a p90 within budget; they can prove it over
    assert fast.shape.requests == len(fast.requests) and fast.shape.duration_s == 60.0


@pytest.mark.slow
def test_the_duration_bounds_an_undecided_probe() -> None:
    """Within budget, but each answer takes 0.3 s: 29 of them (what proves a p90 within) do not fit in 2 s."""
    with SseServer() as server:
        evidence = adaptive(server, duration_s=2.0, ttft=0.3, itl=0.001)
    assert evidence.shape.stopped == "the 2 s duration ran out"


def test_a_path_whose_first_requests_all_fail_is_not_hammered() -> None:
    """A refused gateway beside a working engine: three failures say it, a fourth would not say more."""
    with SseServer() as server:
        config = CollectConfig(engine=server.base(ttft=0.001, itl=0.001), gateway=server.base(fail="status"),
                               requests=None, warmup=0, max_tokens=4)
        evidence, errors = run_stream_probe(config, Clock(), lambda _msg: None)
    assert evidence is not None
    gateway = [t for t in evidence.requests if t.path == "gateway"]
    assert FAIL_FAST <= len(gateway) <= FAIL_FAST + 1 and not any(t.ok for t in gateway)
    assert evidence.shape.stopped is not None and evidence.shape.stopped.startswith("gateway: the first 3")
    assert any(e.kind == "http-status" for e in errors)


def test_requests_the_deadline_left_unsent_are_not_failures() -> None:
    with SseServer() as server:
        # each answer takes 2 s and the run 4 s: the first request is sent whatever the start costs (model
        # discovery, the endpoints' questions), and most of the six cannot be
        config = CollectConfig(engine=server.base(ttft=0.001, itl=0.2, n=10), requests=6, warmup=0, deadline_s=4.0)
        evidence, _ = run_stream_probe(config, Clock(), lambda _msg: None)
    assert evidence is not None
    sent = evidence.requests
    assert 0 < len(sent) < 6  # the rest were never sent, and have no trace to be counted as failed
    assert evidence.shape.stopped is not None and "never sent" in evidence.shape.stopped
