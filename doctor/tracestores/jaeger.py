"""Jaeger's query service: API v3 (Jaeger v2, OTLP JSON) first, then the classic API the UI reads.

API v3's ``GET /api/v3/traces/{trace_id}`` answers ``{"result": TracesData}`` with hex ids and the
window as ``start_time`` / ``end_time`` in RFC 3339 (``cmd/query/app/apiv3/http_gateway.go``: its
``GRPCGatewayWrapper``; a 404 with ``{"error": {"httpCode": 404, ...}}`` when the trace is not found).
The classic ``GET /api/traces/{traceID}`` answers Jaeger's own JSON, ``{"data": [trace], "errors": ...}``,
each span with ``startTime`` and ``duration`` in microseconds, ``tags``, ``references`` and a
``processID`` into the trace's ``processes``; its window is ``start`` / ``end`` in unix microseconds
(``cmd/query/app/http_handler.go``; 404 with ``errors: [{"code": 404, ...}]``).
"""

from __future__ import annotations

from doctor.tracestores.record import TraceRoute, TraceStoreRecord

RECORD = TraceStoreRecord(
    id="jaeger",
    display="Jaeger",
    routes=(
        TraceRoute(path="/api/v3/traces/{trace_id}", answer="otlp", wrapper="result", spans_key="resourceSpans",
                   window="rfc3339", start_param="start_time", end_param="end_time", fixture="jaeger-v3-get-trace.json"),
        TraceRoute(path="/api/traces/{trace_id}", answer="jaeger", spans_key="data",
                   window="unix_us", start_param="start", end_param="end", fixture="jaeger-api-traces.json"),
    ),
    port=16686,
    not_found="404, with the error in JSON (API v3: error.httpCode; classic: errors[].code)",
    docs="https://www.jaegertracing.io/docs/latest/architecture/apis/; jaegertracing/jaeger cmd/query/app/apiv3/http_gateway.go, cmd/query/app/http_handler.go",
)
