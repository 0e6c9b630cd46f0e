"""Grafana Tempo's query frontend: ``/api/v2/traces/{id}`` first, then ``/api/traces/{id}``.

Both answer OTLP, protobuf unless asked ``Accept: application/json``; v2 wraps the trace as
``{"trace": {"resourceSpans": ...}}``, v1 spells its list ``batches``. Tempo writes the JSON with
protobuf's own mapping, so its ids are base64, not the hex of the OTLP specification, and a span's
kind is its enum name (``SPAN_KIND_SERVER``). The window is ``start`` / ``end`` in unix seconds;
an id it does not hold is a 404 ("trace not found"). (Tempo's docs, ``docs/sources/tempo/api_docs``.)
"""

from __future__ import annotations

from doctor.tracestores.record import TraceRoute, TraceStoreRecord

RECORD = TraceStoreRecord(
    id="tempo",
    display="Grafana Tempo",
    routes=(
        TraceRoute(path="/api/v2/traces/{trace_id}", answer="otlp", wrapper="trace", spans_key="resourceSpans",
                   window="unix_s", start_param="start", end_param="end", fixture="tempo-v2-trace.json", ids="base64"),
        TraceRoute(path="/api/traces/{trace_id}", answer="otlp", spans_key="batches",
                   window="unix_s", start_param="start", end_param="end", fixture="tempo-v1-trace.json", ids="base64"),
    ),
    port=3200,
    not_found="404, trace not found",
    docs="https://grafana.com/docs/tempo/latest/api_docs/; grafana/tempo docs/sources/tempo/api_docs/pushing-spans-with-http.md",
)
