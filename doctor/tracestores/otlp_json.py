"""OTLP trace messages into ``Span`` records: the decoding the receiver and the trace stores share.

The OTLP/HTTP receiver (``doctor.probes.otlp``) takes export requests; Jaeger's API v3 and Tempo
answer a trace as the same ``resourceSpans`` tree (``TracesData``). Both are parsed with the
protocol's own generated classes (``opentelemetry-proto``) and protobuf's JSON mapping, and read
into ``Span`` here, once.

One difference between the JSON spellings: the OTLP specification (and Jaeger's API v3) writes
trace and span ids in hex, where protobuf's canonical JSON mapping, which Tempo's answers follow,
writes bytes in base64. ``ids_for_protobuf`` turns hex into base64 and, when ``base64_ok``, leaves
an id that is not hex of an id's length as it is, for protobuf's parser to read as base64.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as OtlpSpan
from opentelemetry.proto.trace.v1.trace_pb2 import Status

from doctor.evidence.traces import Span

_KINDS = {OtlpSpan.SPAN_KIND_INTERNAL: "internal", OtlpSpan.SPAN_KIND_SERVER: "server", OtlpSpan.SPAN_KIND_CLIENT: "client",
          OtlpSpan.SPAN_KIND_PRODUCER: "producer", OtlpSpan.SPAN_KIND_CONSUMER: "consumer"}
_STATUS = {Status.STATUS_CODE_OK: "ok", Status.STATUS_CODE_ERROR: "error"}
#: The id fields and the length of each in hex: a trace id is 16 bytes, a span id 8.
_HEX_IDS = {"traceId": 32, "spanId": 16, "parentSpanId": 16}


def ids_for_protobuf(data: Any, *, base64_ok: bool = False) -> Any:
    """``data`` with its hex trace and span ids as the base64 protobuf's JSON parser reads; the rest as is.

    An id that is not hex raises ``ValueError``, unless ``base64_ok`` and it is not of a hex id's
    length (Tempo's base64: 24 characters for a trace id, 12 for a span id), which is kept.
    """
    if isinstance(data, list):
        return [ids_for_protobuf(v, base64_ok=base64_ok) for v in data]
    if not isinstance(data, dict):
        return data
    out = {}
    for key, value in data.items():
        if key in _HEX_IDS and isinstance(value, str) and value and not (base64_ok and len(value) != _HEX_IDS[key]):
            try:
                value = base64.b64encode(bytes.fromhex(value)).decode()
            except ValueError:
                raise ValueError(f"{key} {value[:40]!r} is not hex") from None
        out[key] = ids_for_protobuf(value, base64_ok=base64_ok)
    return out


def parse_json(data: dict[str, Any], *, base64_ok: bool = False) -> ExportTraceServiceRequest:
    """An OTLP/JSON ``resourceSpans`` tree (an export request, or ``TracesData``: the same field) as
    its message; ``ValueError`` or ``json_format.ParseError`` when it is not one."""
    message = ExportTraceServiceRequest()
    json_format.ParseDict(ids_for_protobuf(data, base64_ok=base64_ok), message, ignore_unknown_fields=True)
    return message


def _value(value: AnyValue) -> Any:
    """An OTLP attribute value as plain JSON: scalars as they are, arrays and maps nested, bytes in hex."""
    which = value.WhichOneof("value")
    if which == "array_value":
        return [_value(v) for v in value.array_value.values]
    if which == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in value.kvlist_value.values}
    if which == "bytes_value":
        return value.bytes_value.hex()
    return getattr(value, which) if which else None


def spans_of(message: ExportTraceServiceRequest) -> Iterable[Span]:
    """Every span of an export request (or trace), with the service and scope that sent it."""
    for resource_spans in message.resource_spans:
        service = next((_value(a.value) for a in resource_spans.resource.attributes if a.key == "service.name"), None)
        for scope_spans in resource_spans.scope_spans:
            for s in scope_spans.spans:
                yield Span(
                    trace_id=s.trace_id.hex(), span_id=s.span_id.hex(), name=s.name,
                    start_ns=s.start_time_unix_nano, end_ns=s.end_time_unix_nano,
                    parent_span_id=s.parent_span_id.hex() or None, kind=_KINDS.get(s.kind),
                    service=str(service) if service is not None else None, scope=scope_spans.scope.name or None,
                    attributes={a.key: _value(a.value) for a in s.attributes}, status=_STATUS.get(s.status.code))


__all__ = ["ids_for_protobuf", "parse_json", "spans_of"]
