"""The per-request join: a real SSE server's streams, joined with spans the real OpenTelemetry SDK
exported for them (shaped as vLLM's) through llm-doctor's own OTLP receiver.

The server queues requests behind one slot (``slots=1``): the later ones of each burst wait for the
earlier ones, and their spans say so. The join must name the queue as the slow requests' hop, and the
healthy control (no slot limit) must show a queue of about nothing. Every hop of every request sums to
the client's TTFT, and none is below ``-TOLERANCE_S``; an engine clock 30 s ahead is aligned away.
"""

from __future__ import annotations

import pytest

from doctor.collection.collector import CollectConfig
from doctor.derive import Evidence
from doctor.derive.request_hops import BEFORE_ENGINE, IN_GATEWAY, TOLERANCE_S, RequestHopsView, hops_seconds
from doctor.evidence import Bundle
from doctor.foundation.clock import Clock
from doctor.probes.otlp import PATH, Receiver
from doctor.probes.stream import run_stream_probe
from tests.support import bundles
from tests.support.engine_spans import export_vllm_spans
from tests.support.sse_server import SseServer


def joined(server_opts: dict, *, trace_context: bool = True, skew: float = 0.0, others: int = 0) -> tuple[Bundle, RequestHopsView | None]:
    with SseServer() as server:
        rx = Receiver("127.0.0.1:0")
        rx.start()
        config = CollectConfig(engine=server.base(**server_opts), requests=6, warmup=0, concurrency=3, trace_context=trace_context)
        stream, _ = run_stream_probe(config, Clock(), lambda _msg: None)
        export_vllm_spans(server.log.requests.values(), f"http://{rx.evidence.listen}{PATH}", clock_skew_s=skew,
                          others=others, other_queue_s=0.4)
        bundle = Bundle(stream=stream, traces=rx.result())
    return bundle, Evidence(bundle).maybe("request_hops")


@pytest.fixture(scope="module")
def queued():
    return joined({"ttft": 0.1, "itl": 0.005, "n": 4, "slots": 1}, others=5)


def test_every_request_is_joined_and_its_hops_sum_to_its_ttft(queued):
    bundle, view = queued
    assert view is not None
    assert len(view.requests) == len(bundle.stream.requests) == 6
    for row in view.requests:
        assert row.engine_span and row.request_id.startswith("chatcmpl-")
        assert [h.name for h in row.hops] == ["to the engine", "engine front end", "queue", "prefill", "delivery"]
        assert sum(h.seconds for h in row.hops) == pytest.approx(row.ttft, abs=1e-9)
        assert all(h.seconds >= -TOLERANCE_S for h in row.hops), row.hops
        assert row.engine_ttft <= row.ttft + TOLERANCE_S
    assert view.alignment.consistent and view.alignment.offset_s == 0.0  # one host, one clock


def test_the_slow_requests_queued_and_the_join_names_it(queued):
    _, view = queued
    slow = [view.requests[i] for i in view.slow]
    assert slow and all(r.slowest_hop == "queue" for r in slow)
    assert view.slow_hop == "queue" and view.slow_hop_share > 0.5
    fastest = min(view.requests, key=lambda r: r.ttft)
    assert fastest.queue < min(r.queue for r in slow)


def test_other_users_spans_give_the_servers_distribution(queued):
    _, view = queued
    assert view.others == 5 and view.others_queue.n == 5 and view.others_queue.p50 == pytest.approx(0.4)


def test_healthy_control_shows_no_queue():
    _, view = joined({"ttft": 0.1, "itl": 0.005, "n": 4})
    assert view is not None
    assert all(r.queue < 0.1 * r.engine_ttft for r in view.requests)
    assert view.slow_hop == "prefill"


def test_an_engine_clock_far_ahead_is_aligned_and_reported():
    _, view = joined({"ttft": 0.1, "itl": 0.005, "n": 4}, skew=30.0)
    assert view.alignment.consistent and -30.1 < view.alignment.offset_s < -29.9
    for row in view.requests:
        assert all(h.seconds >= -TOLERANCE_S for h in row.hops), row.hops


def test_without_trace_context_the_join_is_missing_and_says_why():
    bundle, view = joined({"ttft": 0.05, "itl": 0.005, "n": 2}, trace_context=False)
    assert view is None
    evidence = Evidence(bundle)
    evidence.maybe("request_hops")
    assert "no traceparent" in evidence.missing_reason("request_hops")
    assert all(r.trace_id is None for r in bundle.stream.requests)


def test_without_spans_the_join_says_how_to_turn_tracing_on():
    with SseServer() as server:
        config = CollectConfig(engine=server.base(ttft=0.05, itl=0.005, n=2), requests=2, warmup=0)
        stream, _ = run_stream_probe(config, Clock(), lambda _msg: None)
        traced = [s.traceparent for s in server.log.requests.values()]
    assert traced == [f"00-{r.trace_id}-{r.span_id}-01" for r in stream.requests]
    evidence = Evidence(Bundle(stream=stream))
    evidence.maybe("request_hops")
    assert "--otlp-traces-endpoint" in evidence.missing_reason("request_hops")


def test_a_gateway_span_splits_the_time_before_the_engine_and_hops_seconds_sums_it():
    """A built bundle (``bundles.traced``): the gateway's span enters 0.5 ms after the send, the engine's
    starts 1 ms after it plus the 0.3 s the gateway held request 0; the hops before the engine sum to that."""
    stream = bundles.stream([bundles.request("gateway", i, ttft=0.4, gaps=[0.03] * 3, start=i * 2.0) for i in range(3)])
    traces = bundles.traced(stream, {}, held={0: 0.3}, gateway="nginx")
    view = Evidence(Bundle(stream=stream, traces=traces)).maybe("request_hops")
    assert view is not None
    row = next(r for r in view.requests if r.index == 0)
    assert [h.name for h in row.hops][:2] == ["to the gateway", IN_GATEWAY] and row.gateway_span == "nginx"
    assert set(BEFORE_ENGINE) >= {h.name for h in row.hops[:2]}
    assert hops_seconds(row) == pytest.approx(0.301, abs=TOLERANCE_S)
    assert hops_seconds(row, (IN_GATEWAY,)) == pytest.approx(0.3005, abs=TOLERANCE_S)
    assert hops_seconds(next(r for r in view.requests if r.index == 1)) < TOLERANCE_S
