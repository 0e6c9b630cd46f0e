"""Spans shaped as vLLM's, exported by the real OpenTelemetry SDK, for what ``SseServer`` served.

vLLM's ``OutputProcessor.do_tracing`` (vLLM 0.32) ends each request with one SERVER span named
``llm_request``, started at the request's arrival (wall clock), a child of the request's
``traceparent``, with the ``gen_ai.latency.*`` attributes of ``vllm/tracing/utils.py``. This does
the same with the SDK's own tracer and its OTLP/HTTP protobuf exporter (what vLLM uses with
``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf``), from the times the test server recorded:
queue from the request to its ``slots`` admission, prefill from there to the first token.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from tests.support.sse_server import Sent


def export_vllm_spans(sent: Iterable[Sent], endpoint: str, *, clock_skew_s: float = 0.0, others: int = 0,
                      other_queue_s: float = 0.0) -> int:
    """Export one ``llm_request`` span per request in ``sent`` to ``endpoint`` (``.../v1/traces``), and
    ``others`` spans of requests no probe sent (other users', in no probe trace); the spans exported.

    ``clock_skew_s`` is added to every span time: an engine host whose clock is that far ahead.
    """
    provider = TracerProvider(resource=Resource.create({"service.name": "vllm"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint, timeout=5)))
    tracer = provider.get_tracer("vllm.v1.engine.output_processor")
    to_wall = time.time_ns() - time.perf_counter_ns() + int(clock_skew_s * 1e9)
    count = 0
    for k, s in enumerate(sent):
        if not s.tokens:
            continue
        context = TraceContextTextMapPropagator().extract({"traceparent": s.traceparent} if s.traceparent else {})
        queue = (s.t_admitted - s.t_request) / 1e9
        # the engine's own times of its first and last token: before their writes, as vLLM stamps them
        first, last = (s.produced or s.tokens)[0], (s.produced or s.tokens)[-1]
        ttft = (first - s.t_request) / 1e9
        attributes = {
            "gen_ai.latency.time_to_first_token": ttft, "gen_ai.latency.e2e": (last - s.t_request) / 1e9,
            "gen_ai.latency.time_in_queue": queue, "gen_ai.latency.time_in_model_prefill": (first - s.t_admitted) / 1e9,
            "gen_ai.latency.time_in_model_decode": (last - first) / 1e9,
            "gen_ai.latency.time_in_model_inference": (last - s.t_admitted) / 1e9,
            "gen_ai.usage.prompt_tokens": 38, "gen_ai.usage.completion_tokens": len(s.tokens),
            "gen_ai.request.id": f"chatcmpl-{k}",
        }
        span = tracer.start_span("llm_request", context=context, kind=trace.SpanKind.SERVER,
                                 start_time=s.t_request + to_wall, attributes=attributes)
        span.end(end_time=last + to_wall)
        count += 1
    now = time.time_ns() + int(clock_skew_s * 1e9)
    for k in range(others):
        start = now - 1_000_000_000 + k * 1_000_000
        span = tracer.start_span("llm_request", kind=trace.SpanKind.SERVER, start_time=start, attributes={
            "gen_ai.latency.time_in_queue": other_queue_s, "gen_ai.latency.time_in_model_prefill": 0.01,
            "gen_ai.latency.time_to_first_token": other_queue_s + 0.01, "gen_ai.request.id": f"other-{k}"})
        span.end(end_time=start + int((other_queue_s + 0.05) * 1e9))
        count += 1
    provider.force_flush()
    provider.shutdown()
    return count
