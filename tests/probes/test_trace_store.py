"""The read-back (``--traces URL``) against a trace store's query API on 127.0.0.1.

The store (``tests/support/trace_store.py``) answers with the products' recorded answers
(``fixtures/traces/``) under the ids asked: the read-back finds which product it is by the route
that answers, reads each trace, asks again for the traces the store has not ingested yet, and turns
an unreachable store, an error status, a slow or a malformed answer into an evidence error or a
count, never an exception; the store's credentials never reach the bundle.
"""

from __future__ import annotations

import _thread
import json
import socket
import time

import httpx
import pytest

from doctor.bundle import dumps
from doctor.collection.collector import collect
from doctor.derive import Evidence
from doctor.derive.request_hops import TOLERANCE_S
from doctor.evidence import Bundle
from doctor.evidence.traces import Span, TraceEvidence
from doctor.foundation.clock import Clock
from doctor.probes.plan import CollectConfig
from doctor.probes.stream import run_stream_probe
from doctor.probes.tracestore import WORKERS, probe_window, read_back
from tests.support.engine_spans import export_vllm_spans
from tests.support.sse_server import SseServer
from tests.support.trace_store import FIXTURES, TraceStoreServer

IDS = ["4bf92f3577b34da6a3ce929d0e0e4736", "0af7651916cd43dd8448eb211c80319c"]
WINDOW = (1_765_000_000.0, 1_765_000_120.0)


def read(url: str, ids=IDS, **kw):
    opts = {"headers": {}, "verify": True, "timeout_s": 5.0, "sleep": lambda _s: None} | kw
    return read_back(url, ids, WINDOW, **opts)


@pytest.mark.parametrize("persona, route, window", [
    ("tempo", "/api/v2/traces/", {"start": ["1765000000"], "end": ["1765000120"]}),
    ("jaeger", "/api/v3/traces/", {"start_time": ["2025-12-06T05:46:40.000000Z"], "end_time": ["2025-12-06T05:48:40.000000Z"]}),
    ("jaeger-classic", "/api/traces/", {"start": ["1765000000000000"], "end": ["1765000120000000"]}),
])
def test_each_store_is_found_by_its_route_and_answers_every_trace(persona, route, window):
    with TraceStoreServer(persona) as store:
        evidence, errors = read(store.url)
    assert errors == []
    assert sorted(s.trace_id for s in evidence.spans) == sorted(IDS)
    assert all(s.kind == "server" for s in evidence.spans) and evidence.payloads == 2
    assert evidence.source == store.url and evidence.malformed == 0
    asked = [(path, query) for path, query, _ in store.log.requests if path.startswith(route)]
    assert {path.rsplit("/", 1)[1] for path, _ in asked} == set(IDS)
    # the window in the route's unit; the path Jaeger's classic API shares with Tempo's v1 is asked
    # once to find the store, without a window (their units differ), then with the found route's
    assert [query for _, query in asked] == [{} if route == "/api/traces/" else window, window]
    assert all(h.get("accept") == "application/json" for _, _, h in store.log.requests)
    # the first trace alone finds the route (each path once), the rest are asked there only
    assert len(store.log.requests) == 1 + len(IDS) - 1 + {"/api/v3/traces/": 0, "/api/v2/traces/": 1, "/api/traces/": 2}[route]


def test_traces_not_ingested_yet_are_asked_again_until_found():
    with TraceStoreServer("tempo", ingest_after=2) as store:
        evidence, errors = read(store.url)
    assert errors == [] and sorted(s.trace_id for s in evidence.spans) == sorted(IDS)
    assert all(store.log.asked[t] == 3 for t in IDS)


def test_a_trace_never_found_is_a_note_not_an_error():
    with TraceStoreServer("jaeger", held=IDS[:1]) as store:
        evidence, errors = read(store.url, wait_s=0.0)
    assert errors == [] and [s.trace_id for s in evidence.spans] == IDS[:1]
    assert any("1 of 2 trace(s) not in the trace store" in n for n in evidence.notes)


def test_a_path_two_stores_share_is_asked_once_per_trace():
    """Jaeger's classic API and Tempo's v1 both serve /api/traces/{id}: one request, and the answer says which."""
    with TraceStoreServer("jaeger-classic", held=[]) as store:
        evidence, errors = read(store.url, wait_s=0.0)
    assert errors == [] and evidence.spans == []
    assert [store.log.asked[t] for t in sorted(IDS)] == [1, 1]


def test_a_hung_store_is_asked_once_not_once_per_trace():
    """A store that takes requests and never answers: the first timeout stops the read-back, and the
    traces not asked yet are not sent at all (not a timeout each, WORKERS at a time)."""
    ids = [f"{i:032x}" for i in range(1, 41)]
    with TraceStoreServer("tempo", delay=30.0) as store:
        evidence, errors = read(store.url, ids=ids, timeout_s=0.5)
        asked = len(store.log.requests)
    assert asked == 1
    assert [(e.kind, e.fatal) for e in errors] == [("timeout", True)] and evidence.spans == []
    assert "40 of 40 trace(s) not read back" in errors[0].message


class _InterruptedStore(TraceStoreServer):
    """Answers the first trace, then hangs, and Ctrl-C comes while the second is asked."""

    def answer(self, path: str, headers: dict[str, str]) -> tuple[int, str, str]:
        with self._lock:
            n = len(self.log.requests)
        if n > 1:
            if n == 2:
                _thread.interrupt_main()
            time.sleep(30.0)
        return super().answer(path, headers)


def test_ctrl_c_drops_the_traces_not_asked_yet():
    ids = [f"{i:032x}" for i in range(1, 41)]
    with _InterruptedStore("tempo") as store:
        with pytest.raises(KeyboardInterrupt):
            read(store.url, ids=ids, timeout_s=0.5)
        asked = len(store.log.requests)
    assert asked <= 1 + WORKERS  # the first, and those in flight: the queued ones are not sent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_store_is_one_evidence_error():
    evidence, errors = read(f"http://127.0.0.1:{_free_port()}")
    assert [(e.source, e.kind, e.fatal) for e in errors] == [("traces", "connect", True)]
    assert evidence.spans == []


@pytest.mark.parametrize("knobs, timeout_s, kind", [({"status": 500}, 5.0, "http-status"), ({"token": "s3cret-token-1"}, 5.0, "http-status"),
                                                    ({"delay": 3.0}, 0.5, "timeout")])
def test_an_error_status_or_a_slow_store_is_one_evidence_error(knobs, timeout_s, kind):
    with TraceStoreServer("tempo", **knobs) as store:
        evidence, errors = read(store.url, timeout_s=timeout_s)
    assert [e.kind for e in errors] == [kind] and evidence.spans == []
    assert len(store.log.requests) <= 4 * len(IDS)  # one round, no retries after a failure


def test_a_malformed_answer_is_counted():
    with TraceStoreServer("tempo", body='{"trace": {"resourceSpans": [{"scopeSpans": [{"spans": [{"startTimeUnixNano": "soon"}]}]}]}}') as store:
        evidence, errors = read(store.url, wait_s=0.0)
    assert errors == [] and evidence.spans == [] and evidence.malformed == 2
    assert any("did not decode" in n for n in evidence.notes)


def test_the_span_cap_holds_for_the_read_back_too():
    with TraceStoreServer("tempo") as store:
        evidence, _ = read(store.url, cap=1)
    assert len(evidence.spans) == 1 and evidence.dropped == 1


def test_spans_read_back_past_a_full_cap_are_said_found_and_not_kept():
    full = TraceEvidence(source="otlp", cap=1)
    full.take([Span(trace_id="f" * 32, span_id="e" * 16, name="another user's", start_ns=1, end_ns=2)])
    with TraceStoreServer("tempo") as store:
        evidence, _ = read(store.url, into=full)
    assert evidence.dropped == 2 and len(evidence.spans) == 1
    assert any("2 of 2 trace(s) found, 2 span(s); 2 of them not kept: the cap of 1 span(s) was full" in n for n in evidence.notes)


def test_diagnose_reads_the_probes_traces_back_and_keeps_the_stores_credentials_out():
    token = "tr4ce-store-s3cret-value"
    with SseServer() as server, TraceStoreServer("tempo", token=token, echo_auth=True) as store:
        config = CollectConfig(engine=server.base(ttft=0.02, itl=0.002, n=4), requests=3, warmup=0, concurrency=1,
                               gpu=False, host=False, metrics=False, traces=store.url,
                               traces_headers={"Authorization": f"Bearer {token}", "X-Scope-OrgID": "tenant-a"})
        bundle = collect(config)
    assert bundle.traces is not None and bundle.traces.source == store.url
    ours = {r.trace_id for r in bundle.stream.requests if r.trace_id}
    assert len(ours) == 3 and {s.trace_id for s in bundle.traces.spans} == ours
    assert all(h.get("x-scope-orgid") == "tenant-a" for _, _, h in store.log.requests)
    text = dumps(bundle)
    assert token not in text
    assert "http.request.header.authorization" in json.dumps(json.loads(text)["traces"])


def test_a_refused_stores_error_keeps_the_urls_credentials_out():
    with SseServer() as server, TraceStoreServer("jaeger", token="not-this-one") as store:
        config = CollectConfig(engine=server.base(ttft=0.02, itl=0.002, n=4), requests=2, warmup=0, concurrency=1,
                               gpu=False, host=False, metrics=False, traces=store.url.replace("http://", "http://user:pw-in-url@"))
        lines: list[str] = []
        bundle = collect(config, lines.append)
    assert any(h.get("authorization", "").startswith("Basic ") for _, _, h in store.log.requests)
    assert [(e.source, e.kind) for e in bundle.errors if e.source == "traces"] == [("traces", "http-status")]
    assert "pw-in-url" not in dumps(bundle) and not any("pw-in-url" in line for line in lines)


@pytest.mark.parametrize("persona", ["tempo", "jaeger"])
def test_spans_read_back_from_a_store_join_as_the_receivers_do(persona):
    """vLLM-shaped spans (the real SDK's exporter) sent to the store, read back after the probe: the
    join names the queue for the requests that waited behind one slot, as it does for the receiver's."""
    with SseServer() as server, TraceStoreServer(persona, ingest=True) as store:
        config = CollectConfig(engine=server.base(ttft=0.1, itl=0.005, n=4, slots=1), requests=6, warmup=0, concurrency=3)
        stream, _ = run_stream_probe(config, Clock(), lambda _msg: None)
        export_vllm_spans(server.log.requests.values(), f"{store.url}/v1/traces")
        ids = [r.trace_id for r in stream.requests if r.trace_id]
        traces, errors = read_back(store.url, ids, probe_window(stream), headers={}, verify=True, timeout_s=5.0)
        route, fixture = {"tempo": ("/api/v2/traces/", "tempo-v2-trace.json"), "jaeger": ("/api/v3/traces/", "jaeger-v3-get-trace.json")}[persona]
        served = httpx.get(f"{store.url}{route}{ids[0]}", headers={"Accept": "application/json"}).json()
    assert errors == [] and traces.source == store.url
    # what the store served is the product's recorded answer's shape: its wrapper, its id spelling, its kind's type
    recorded = json.loads((FIXTURES / fixture).read_text())
    assert served.keys() == recorded.keys()
    [wrapper] = recorded
    ours, theirs = (d[wrapper]["resourceSpans"][0]["scopeSpans"][0]["spans"][0] for d in (served, recorded))
    assert len(ours["traceId"]) == len(theirs["traceId"]) and type(ours["kind"]) is type(theirs["kind"])
    assert set(theirs) - {"parentSpanId"} <= set(ours)
    view = Evidence(Bundle(stream=stream, traces=traces)).maybe("request_hops")
    assert view is not None and len(view.requests) == 6
    for row in view.requests:
        assert sum(h.seconds for h in row.hops) == pytest.approx(row.ttft, abs=1e-9)
        assert all(h.seconds >= -TOLERANCE_S for h in row.hops), row.hops
    assert view.slow_hop == "queue" and all(view.requests[i].slowest_hop == "queue" for i in view.slow)


def test_with_the_receiver_too_the_store_fills_in_what_it_did_not_get():
    with SseServer() as server, TraceStoreServer("tempo") as store:
        config = CollectConfig(engine=server.base(ttft=0.02, itl=0.002, n=4), requests=2, warmup=0, concurrency=1,
                               gpu=False, host=False, metrics=False, otlp_listen="127.0.0.1:0", traces=store.url)
        bundle = collect(config)
    assert bundle.traces is not None and bundle.traces.source == "otlp" and bundle.traces.listen
    assert {s.trace_id for s in bundle.traces.spans} == {r.trace_id for r in bundle.stream.requests}
    assert any("read back from Grafana Tempo" in n for n in bundle.traces.notes)
    assert [e for e in bundle.errors if e.source == "traces"] == []


def test_the_store_is_asked_for_traces_the_receiver_holds_spans_of_too():
    """The gateway exports to --otlp-listen and the engine to the store: the receiver holding a trace's
    gateway span must not keep the engine's spans of that trace from being read back."""
    with SseServer() as server, TraceStoreServer("tempo") as store:
        receiver: list[str] = []

        def progress(line: str) -> None:
            if line.startswith("OTLP receiver on "):
                receiver.append(line.split()[3].rstrip(":"))
            elif line.startswith("waiting up to"):  # the gateway's spans, before the receiver's wait
                export_vllm_spans(server.log.requests.values(), receiver[0])

        config = CollectConfig(engine=server.base(ttft=0.02, itl=0.002, n=4), requests=2, warmup=0, concurrency=1,
                               gpu=False, host=False, metrics=False, otlp_listen="127.0.0.1:0", traces=store.url)
        bundle = collect(config, progress)
    ours = {r.trace_id for r in bundle.stream.requests}
    assert {s.trace_id for s in bundle.traces.spans if s.service == "vllm"} == ours  # from the receiver
    assert {s.trace_id for s in bundle.traces.spans if s.service == "my.service"} == ours  # from the store
    assert set(store.log.asked) == ours


def test_the_read_back_waits_after_the_after_scrapes():
    """Its wait (seconds of other users' traffic) must not fall between the /metrics before and after scrapes."""
    with SseServer() as server, TraceStoreServer("tempo") as store:
        config = CollectConfig(engine=server.base(ttft=0.02, itl=0.002, n=4), requests=2, warmup=0, concurrency=1,
                               gpu=False, host=False, traces=store.url)
        lines: list[str] = []
        bundle = collect(config, lines.append)
    assert bundle.traces is not None and bundle.metrics is not None
    steps = list(bundle.run.steps)
    assert steps.index("metrics after") < steps.index("trace store")
    said = [" ".join(line.split()[:2]) for line in lines]
    assert said.index("/metrics after") < said.index("reading the")
