"""The stream probe sharded over worker processes (``doctor.probes.shard``), judged by the server.

A real SSE server on 127.0.0.1 counts what it saw: the requests, and the streams it held at once.
Sharded, the probe must send exactly what one process would (the count, the global in-flight
cap, the schedule's order), stamp every request on the run's one clock, keep each worker's
self-check, and still stop at once and write the report when the parent gets SIGTERM.
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest

from doctor.collection.collector import CollectConfig
from doctor.derive.stream_stats import derive_stream_stats
from doctor.evidence import Bundle, ClientHealth, ProbePath, RequestTrace, StreamEvidence, TokenEvent
from doctor.exit_codes import ExitCode
from doctor.foundation.clock import Clock
from doctor.foundation.serial import from_jsonable, to_jsonable
from doctor.probes.shard import choose_workers
from doctor.probes.stream import poisson_streams, request_id, run_stream_probe, shard_workers
from tests.collection.test_collect import stop_mid_stream
from tests.runs.test_load import COMMON, measured, most_in_flight
from tests.support.sse_server import SseServer


def _load_config(base: str, **fields: Any) -> CollectConfig:
    return CollectConfig(engine=base, route="chat", warmup=0, adaptive=False, only_path=ProbePath.DIRECT, **fields)


def _ordered(trace: RequestTrace) -> list[float]:
    """The trace's stamps in the order they must have happened."""
    stamps = [trace.t_scheduled, trace.t_sent, trace.t_headers, trace.t_first_token, trace.t_last_token, trace.t_end]
    return [t for t in stamps if t is not None]


def test_the_worker_count_follows_the_streams_and_the_cpus_unless_given() -> None:
    assert [choose_workers(n, cpus=16) for n in (1, 64, 65, 128, 256, 1024)] == [1, 1, 2, 2, 4, 16]
    assert choose_workers(1024, cpus=2) == 2 and choose_workers(256, cpus=1) == 1
    assert choose_workers(256, requested=1) == 1 and choose_workers(3, requested=8) == 3  # at least a slot each
    many: dict[str, Any] = {"concurrency": 512, "requests": 2048, "client_workers": 4}
    assert shard_workers(_load_config("http://127.0.0.1:9", **many)) == 4
    # a diagnosis shards only when --client-workers asks, paired paths too, never past its slots
    assert shard_workers(CollectConfig(engine="http://127.0.0.1:9", gateway="http://127.0.0.1:8", **many)) == 4
    assert shard_workers(CollectConfig(engine="http://127.0.0.1:9", concurrency=512, requests=2048)) == 1
    assert shard_workers(CollectConfig(engine="http://127.0.0.1:9", concurrency=3, client_workers=4)) == 3


def test_poisson_arrivals_are_sharded_by_the_streams_their_budgets_allow_not_by_the_safety_cap() -> None:
    """Little's law at the budgets: 8/s x (0.5 s + 63 x 50 ms) = 29.2 -> 30 streams, one process,
    though --max-concurrency (256) and the planned 160 requests would have asked for three."""
    slow = _load_config("http://127.0.0.1:9", rate=8.0, max_tokens=64, concurrency=256, requests=160)
    assert poisson_streams(slow) == 30 and shard_workers(slow) == 1
    busy = _load_config("http://127.0.0.1:9", rate=200.0, max_tokens=64, concurrency=256, requests=4000)
    assert poisson_streams(busy) > 700 and shard_workers(busy) == choose_workers(256)  # the cap still bounds it


@pytest.mark.slow
def test_a_sharded_closed_loop_sends_the_count_under_the_global_cap_on_one_clock() -> None:
    with SseServer() as srv:
        config = _load_config(srv.base(ttft=0.02, itl=0.005, n=6), concurrency=6, requests=30, max_tokens=6, client_workers=2)
        clock = Clock()
        evidence, errors = run_stream_probe(config, clock, lambda _msg: None)
        ended = clock.now()
        sent = measured(srv)
    assert evidence is not None and errors == []
    traces = evidence.requests
    assert len(traces) == len(sent) == 30 and all(t.ok for t in traces)
    assert sorted(t.index for t in traces) == list(range(30))
    assert most_in_flight(sent) == 6  # the server held the cap at once, never more: counted by itself
    assert {t.shard for t in traces} == {0, 1} and len(evidence.client.shards) == 2
    assert "sharded over 2 worker processes" in evidence.client.transport
    for trace in traces:  # every stamp in order, and within the run
        stamps = _ordered(trace)
        assert stamps == sorted(stamps) and stamps[0] >= 0 and stamps[-1] <= ended
        assert [e.t for e in trace.tokens] == sorted(e.t for e in trace.tokens)
    # the workers' stamps are on the parent's clock: each request left before the server read it,
    # and its first token came after (the server waits 20 ms between the two)
    for trace in traces:
        read = srv.log.requests[request_id(clock, trace.path, trace.index)].t_request
        assert trace.t_sent is not None and trace.t_sent < clock.at(read) < trace.tokens[0].t


@pytest.mark.slow
def test_sharded_poisson_arrivals_keep_the_global_cap_and_report_lateness() -> None:
    """Arrivals faster than three streams serve: the cap binds over both workers together, and
    the arrivals that waited for a slot are late (their latency still counts from the schedule)."""
    with SseServer() as srv:
        config = _load_config(srv.base(ttft=0.05, itl=0.01, n=5), concurrency=3, requests=24, rate=60.0, max_tokens=5,
                              client_workers=2)
        evidence, errors = run_stream_probe(config, Clock(), lambda _msg: None)
        sent = measured(srv)
    assert evidence is not None and errors == []
    assert len(sent) == 24 and most_in_flight(sent) == 3
    waited = [t.t_sent - t.t_scheduled for t in evidence.requests if t.t_sent is not None]
    assert max(waited) > 10 * min(waited)  # some arrivals waited for a slot of either worker
    offsets = sorted(t.t_scheduled for t in evidence.requests)
    assert offsets == [t.t_scheduled for t in sorted(evidence.requests, key=lambda t: t.index)]  # drawn once, in order


def test_a_workers_freezes_are_taken_out_of_its_own_requests_only() -> None:
    """Two requests side by side, read by two workers; worker 1 froze over both. Only its own
    request loses the freeze: worker 0 was awake and its stamps are true."""
    def trace(shard: int) -> RequestTrace:
        return RequestTrace(index=shard, path=ProbePath.DIRECT, t_scheduled=0.0, t_sent=0.0, shard=shard,
                            tokens=[TokenEvent(1.0), TokenEvent(1.1), TokenEvent(1.2)])

    freeze = [[0.2, 0.9]]
    client = ClientHealth(freezes=freeze, shards=[ClientHealth(), ClientHealth(freezes=freeze)])
    stream = StreamEvidence(requests=[trace(0), trace(1)], client=client)
    stats = derive_stream_stats(Bundle(stream=stream)).paths[ProbePath.DIRECT]
    ttft = {r.index: r.ttft for r in stats.requests}
    assert abs(ttft[0] - 1.0) < 1e-9 and abs(ttft[1] - 0.3) < 1e-9
    # an old bundle (no shard, no shards) and an unknown shard take every freeze out: a lower bound
    written = json.loads(json.dumps(to_jsonable(stream)))  # as a file written before sharding holds it
    written["requests"] = [{k: v for k, v in written["requests"][0].items() if k != "shard"}]
    written["client"] = {"freezes": freeze}
    old = from_jsonable(StreamEvidence, written)
    assert old.requests[0].shard is None and old.client.shards == []
    assert abs(derive_stream_stats(Bundle(stream=old)).paths[ProbePath.DIRECT].requests[0].ttft - 0.3) < 1e-9
    assert client.freezes_of(7) == freeze


def ignore_sigint() -> None:
    """In the child before it runs: SIGINT ignored, as a job started with ``&`` by a script inherits it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.slow
@pytest.mark.parametrize("inherited", [None, ignore_sigint], ids=["sigint-default", "sigint-ignored"])
def test_sigterm_to_the_parent_stops_every_worker_and_still_writes_the_report(tmp_path: Path, inherited) -> None:
    """Also when started in the background of a script (SIGINT inherited ignored), where the
    requests in flight once vanished from the report (32 of 40 sent) and ``summary`` was null."""
    out = tmp_path / "load.json"
    with SseServer() as srv:
        command = [sys.executable, "-m", "doctor", "load", "--engine", srv.base(itl="0.05", n="100000"), *COMMON,
                   "--scenario", "server", "--rate", "20", "--duration", "60", "--max-concurrency", "8",
                   "--client-workers", "2", "--json", str(out)]
        code, output, workers = stop_mid_stream(command, srv, signal.SIGTERM, streaming=2, inherited=inherited)
        sent = len(srv.log.requests)
    assert code == ExitCode.INTERRUPTED and "Traceback" not in output, output
    assert len(workers) >= 2
    _, alive = psutil.wait_procs(workers, timeout=10)
    assert alive == []  # no worker outlives the parent
    doc = json.loads(out.read_text())
    stream = doc["bundle"]["stream"]
    assert doc["bundle"]["interrupted"] and doc["summary"]["n"] == sent  # every request sent is in the report
    assert len(stream["client"]["shards"]) == 2 and {r["shard"] for r in stream["requests"]} == {0, 1}
    assert any(r["outcome"] == "cancelled" and r["tokens"] for r in stream["requests"])  # in flight, measured so far
