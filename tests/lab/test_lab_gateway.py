"""The lab gateway's modes, each compared with the direct path to the same engine."""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Iterator

import httpx
import pytest

from doctor.gateways import family_of
from doctor.lab.engine import LabEngine
from doctor.lab.gateway import PLAYED, SERVER_NAMES, GatewayConfig, LabGateway
from doctor.lab.scheduler import EngineConfig
from tests.support.lab_client import Trace, chat_body, run_streams


@pytest.fixture(scope="module")
def engine() -> Iterator[LabEngine]:
    lab = LabEngine(EngineConfig(step_base_s=0.005, decode_s_per_seq=0.0005))
    lab.start()
    yield lab
    lab.stop()


def gateway(engine: LabEngine, **config: object) -> LabGateway:
    gw = LabGateway(engine.url, GatewayConfig(**config))  # type: ignore[arg-type]
    gw.start()
    return gw


def one_stream(url: str, max_tokens: int = 60) -> Trace:
    return run_streams(url, [chat_body(max_tokens=max_tokens)], concurrency=1)[0]


def test_pass_relays_one_event_per_read_like_direct(engine: LabEngine):
    gw = gateway(engine, mode="pass")
    try:
        direct, relayed = one_stream(engine.url), one_stream(gw.url)
    finally:
        gw.stop()
    assert relayed.headers["server"] == PLAYED and family_of(PLAYED) == "nginx"  # the product the lab plays
    assert len(relayed.tokens) == len(direct.tokens) == 60
    assert direct.events_per_read < 1.5 and relayed.events_per_read < 1.5
    assert relayed.t_headers < relayed.tokens[0]  # headers first, as vLLM sends them


@pytest.mark.parametrize("size", [4096, 8192])
def test_buffer_holds_the_stream_in_bursts_of_buffer_size(engine: LabEngine, size: int):
    gw = gateway(engine, mode="buffer", buffer_size=size)
    try:
        direct, relayed = one_stream(engine.url, 80), one_stream(gw.url, 80)
    finally:
        gw.stop()
    assert len(relayed.tokens) == 80
    full_reads = [n for _, n, _ in relayed.reads[:-1]]
    assert full_reads and all(n == size for n in full_reads)
    # The first read brings the headers' burst: many events at once where direct had one or two.
    assert relayed.reads[0][2] >= size // 300 and direct.reads[0][2] <= 2
    assert relayed.events_per_read > 10 * direct.events_per_read
    assert relayed.ttft > direct.ttft


def test_compress_gzips_the_stream_and_delivers_it_whole_at_the_end(engine: LabEngine):
    gw = gateway(engine, mode="compress", buffer_size=4096)
    try:
        direct, relayed = one_stream(engine.url), one_stream(gw.url)
    finally:
        gw.stop()
    assert relayed.headers["content-encoding"] == "gzip"
    assert "content-encoding" not in direct.headers
    assert len(relayed.tokens) == 60 and relayed.tokens[0] == relayed.tokens[-1]  # first token = last token
    assert direct.tokens[0] < direct.tokens[-1]


def test_compress_leaves_clients_without_gzip_alone(engine: LabEngine):
    gw = gateway(engine, mode="compress")
    try:
        with httpx.Client(timeout=10) as client:
            answer = client.post(
                gw.url + "/v1/chat/completions", json=chat_body(max_tokens=3), headers={"accept-encoding": "identity"}
            )
    finally:
        gw.stop()
    assert "content-encoding" not in answer.headers and "data: [DONE]" in answer.text


def test_serialise_makes_ttft_grow_with_concurrency_through_the_gateway_only(engine: LabEngine):
    gw = gateway(engine, mode="serialise")
    bodies = [chat_body(max_tokens=30) for _ in range(4)]
    try:
        relayed = sorted(run_streams(gw.url, bodies, concurrency=4), key=lambda t: t.tokens[0])
    finally:
        gw.stop()
    direct = sorted(run_streams(engine.url, bodies, concurrency=4), key=lambda t: t.tokens[0])
    # Through the gateway each answer starts only once the one before it has ended, so TTFT grows by
    # a whole answer per request ahead; directly the answers overlap. Orders of the client's own
    # stamps, not durations: loaded CI machines broke every comparison with a fraction of an answer
    # (four direct first tokens took 126 ms against half an answer's 108 ms).
    assert all(b.tokens[0] > a.tokens[-1] for a, b in itertools.pairwise(relayed))
    assert any(b.tokens[0] < a.tokens[-1] for a, b in itertools.pairwise(direct))


def test_overhead_adds_a_constant_delay(engine: LabEngine):
    overhead_s = 0.15
    gw = gateway(engine, mode="pass", overhead_ms=int(overhead_s * 1000))
    try:
        relayed = [one_stream(gw.url, 5) for _ in range(2)]
    finally:
        gw.stop()
    direct = [one_stream(engine.url, 5) for _ in range(2)]
    assert min(t.ttft for t in relayed) >= overhead_s
    # The delay is added to what the engine takes, whatever that is on a loaded machine (where the
    # direct TTFT alone can pass 150 ms): the medians differ by about the overhead.
    added = statistics.median(t.ttft for t in relayed) - statistics.median(t.ttft for t in direct)
    assert 0.5 * overhead_s < added
    assert max(t.events_per_read for t in relayed) < 1.5


@pytest.mark.parametrize("mode", ["pass", "buffer", "compress", "serialise"])
def test_every_mode_forwards_the_other_routes(engine: LabEngine, mode: str):
    gw = gateway(engine, mode=mode)
    try:
        with httpx.Client(base_url=gw.url, timeout=10) as client:
            models = client.get("/v1/models")
            version = client.get("/version")
            health = client.get("/health")
            metrics = client.get("/metrics")
    finally:
        gw.stop()
    assert models.json()["data"][0]["max_model_len"] == engine.config.max_model_len
    assert version.json()["version"] == "0.32.0"
    assert health.status_code == 200
    assert "vllm:num_requests_running" in metrics.text
    assert models.headers["server"] == SERVER_NAMES.get(mode, PLAYED)


def test_unreachable_upstream_is_a_502():
    gw = LabGateway("http://127.0.0.1:9", GatewayConfig(mode="pass", connect_timeout_s=1))
    gw.start()
    try:
        answer = httpx.get(gw.url + "/v1/models", timeout=10)
    finally:
        gw.stop()
    assert answer.status_code == 502


def test_unknown_mode_is_refused():
    with pytest.raises(ValueError, match="unknown gateway mode"):
        GatewayConfig(mode="teleport")


def test_the_serialising_edge_says_it_plays_a_python_edge(engine: LabEngine):
    gw = gateway(engine, mode="serialise")
    try:
        relayed = one_stream(gw.url)
    finally:
        gw.stop()
    assert family_of(relayed.headers["server"]) == "uvicorn"
