"""The OTLP/HTTP receiver, fed by the real OpenTelemetry SDK's exporter and by raw OTLP/JSON.

What it keeps must be what the SDK sent (ids, times, vLLM's attributes); what it refuses (a body
that is no OTLP, a flood past its cap) is answered and counted, and it goes on receiving.
"""

from __future__ import annotations

import gzip
import json

import httpx
import pytest
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from doctor.evidence import Bundle
from doctor.foundation.redact import redact_bundle
from doctor.foundation.serial import to_jsonable
from doctor.probes.otlp import PATH, Receiver


@pytest.fixture
def receiver():
    rx = Receiver("127.0.0.1:0")
    rx.start()
    yield rx
    rx.result()


def _url(rx: Receiver) -> str:
    return f"http://{rx.evidence.listen}{PATH}"


def _export(rx: Receiver, n: int, compression: Compression = Compression.NoCompression) -> list[trace.Span]:
    provider = TracerProvider(resource=Resource.create({"service.name": "vllm"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=_url(rx), timeout=5, compression=compression)))
    tracer = provider.get_tracer("vllm")
    spans = []
    for k in range(n):
        span = tracer.start_span("llm_request", kind=trace.SpanKind.SERVER, attributes={
            "gen_ai.latency.time_in_queue": 0.25 * k, "gen_ai.request.id": f"cmpl-{k}", "gen_ai.usage.prompt_tokens": 38})
        span.end()
        spans.append(span)
    provider.shutdown()
    return spans


@pytest.mark.parametrize("compression", [Compression.NoCompression, Compression.Gzip])
def test_the_sdk_exporters_spans_arrive_as_sent(receiver, compression):
    sent = _export(receiver, 3, compression)
    got = receiver.result().spans
    assert [s.attributes["gen_ai.request.id"] for s in got] == ["cmpl-0", "cmpl-1", "cmpl-2"]
    first = sent[0].get_span_context()
    assert got[0].trace_id == format(first.trace_id, "032x") and got[0].span_id == format(first.span_id, "016x")
    assert got[2].attributes["gen_ai.latency.time_in_queue"] == 0.5
    assert got[0].attributes["gen_ai.usage.prompt_tokens"] == 38
    assert got[0].kind == "server" and got[0].service == "vllm" and got[0].name == "llm_request"
    assert got[0].start_ns == sent[0].start_time and got[0].end_ns == sent[0].end_time
    assert receiver.evidence.malformed == 0


def test_otlp_json_with_hex_ids_and_string_nanos(receiver):
    """OTLP/JSON as the specification spells it: ids in hex, 64-bit numbers as strings, enums as numbers."""
    body = {"resourceSpans": [{"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "nginx"}}]},
                               "scopeSpans": [{"scope": {"name": "ngx_otel_module"}, "spans": [{
                                   "traceId": "4bf92f3577b34da6a3ce929d0e0e4736", "spanId": "00f067aa0ba902b7",
                                   "parentSpanId": "", "name": "/v1/chat/completions", "kind": 2,
                                   "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": "1700000000500000000",
                                   "attributes": [{"key": "http.response.status_code", "value": {"intValue": "200"}},
                                                  {"key": "tags", "value": {"arrayValue": {"values": [{"stringValue": "a"}]}}}],
                                   "status": {"code": 1}}]}]}]}
    answer = httpx.post(_url(receiver), json=body, timeout=5)
    assert answer.status_code == 200 and answer.headers["content-type"] == "application/json"
    (span,) = receiver.result().spans
    assert span.trace_id == "4bf92f3577b34da6a3ce929d0e0e4736" and span.span_id == "00f067aa0ba902b7"
    assert span.parent_span_id is None and span.service == "nginx" and span.scope == "ngx_otel_module"
    assert span.end_ns - span.start_ns == 500_000_000
    assert span.attributes == {"http.response.status_code": 200, "tags": ["a"]}
    assert span.status == "ok"


@pytest.mark.parametrize("content_type, body", [
    ("application/x-protobuf", b"\xff\xff\xff\xff garbage"),
    ("application/json", b"{not json"),
    ("application/json", b"[1, 2]"),
    ("application/json", json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz"}]}]}]}).encode()),
    ("application/json", json.dumps({"resourceSpans": "many"}).encode()),
    ("text/plain", b"hello"),
])
def test_malformed_payloads_are_answered_400_counted_and_the_receiver_goes_on(receiver, content_type, body):
    answer = httpx.post(_url(receiver), content=body, headers={"content-type": content_type}, timeout=5)
    assert answer.status_code == 400
    assert receiver.evidence.malformed == 1 and "refused" in receiver.evidence.notes[0]
    _export(receiver, 1)
    assert len(receiver.result().spans) == 1


def test_a_bomb_and_a_wrong_path_are_refused(receiver):
    bomb = gzip.compress(b"\0" * (9 * 1024 * 1024))
    answer = httpx.post(_url(receiver), content=bomb, headers={"content-type": "application/x-protobuf",
                                                              "content-encoding": "gzip"}, timeout=10)
    assert answer.status_code == 400 and receiver.evidence.malformed == 1
    assert httpx.post(f"http://{receiver.evidence.listen}/v1/metrics", content=b"", timeout=5).status_code == 404


def test_a_flood_is_capped_and_counted():
    rx = Receiver("127.0.0.1:0", cap=3)
    rx.start()
    _export(rx, 5)
    evidence = rx.result()
    assert len(evidence.spans) == 3 and evidence.dropped == 2 and evidence.payloads == 5


def test_wait_for_returns_when_every_trace_has_a_span(receiver):
    (span,) = _export(receiver, 1)
    trace_id = format(span.get_span_context().trace_id, "032x")
    # its span is in: no wait for the exporters' next batch, however long the limit
    assert receiver.wait_for({trace_id}, 60.0) < 30.0


def test_spans_are_redacted_like_the_rest_of_the_bundle(receiver):
    """A gateway's span may carry the request's headers: the key must not reach the bundle."""
    provider = TracerProvider(resource=Resource.create({"service.name": "nginx"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=_url(receiver), timeout=5)))
    provider.get_tracer("nginx").start_span("proxy", attributes={
        "http.request.header.authorization": "Bearer sk-live-0123456789abcdef0123"}).end()
    provider.shutdown()
    bundle = redact_bundle(Bundle(traces=receiver.result()), ["sk-live-0123456789abcdef0123"])
    assert "sk-live" not in json.dumps(to_jsonable(bundle)) and sum(bundle.redactions.values()) >= 1
