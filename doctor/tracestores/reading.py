"""One trace store answer into ``Span`` records, pure: the read-back's parser of outside data.

A route's answer is one of three things: the trace's spans, "not found" (a 404, or an answer that
holds no span: the store has not ingested the trace yet, or never got it), or not this route's
shape at all (Jaeger's classic API and Tempo's v1 both serve ``/api/traces/{id}``; the keys of the
answer tell them apart). OTLP answers are parsed with the protocol's generated classes
(``otlp_json``); Jaeger's own JSON is read here, field by field, because no package defines it
(its Go structs are ``model/json`` in jaegertracing/jaeger).
"""

from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Any

from google.protobuf import json_format

from doctor.evidence.traces import Span
from doctor.foundation import wire
from doctor.tracestores.otlp_json import parse_json, spans_of
from doctor.tracestores.record import TraceRoute


class NotFound(Exception):
    """The store holds no span of the trace (yet): counted, and asked again while the read-back waits."""


class NotThisRoute(Exception):
    """The answer is another product's (a route shared by two stores), or no trace store's at all."""


class BadAnswer(ValueError):
    """The answer has this route's shape and does not decode: counted as malformed, with why."""


def trace_path(route: TraceRoute, trace_id: str) -> str:
    """The route's path for one trace id (lower-case hex, as ``traceparent`` spells it)."""
    return route.path.replace("{trace_id}", trace_id.lower())


def window_params(route: TraceRoute, start_s: float, end_s: float) -> dict[str, str]:
    """The query parameters that narrow the lookup to ``start_s``..``end_s`` (unix seconds), in the
    route's own unit: whole seconds are widened outwards, so the window never loses its edges."""
    if route.window == "rfc3339":
        def spell(t: float) -> str:
            return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        start, end = spell(start_s), spell(end_s)
    elif route.window == "unix_us":
        start, end = str(math.floor(start_s * 1e6)), str(math.ceil(end_s * 1e6))
    else:
        start, end = str(math.floor(start_s)), str(math.ceil(end_s))
    return {route.start_param: start, route.end_param: end}


def read_answer(route: TraceRoute, status: int, text: str) -> list[Span]:
    """The spans of one answer of ``route``; ``NotFound``, ``NotThisRoute`` or ``BadAnswer`` otherwise.

    Only a 200 or a 404 reaches here: any other status is the store's error, the caller's to report.
    """
    if status == 404:
        raise NotFound(text[:200])
    try:
        data = wire.loads(text)
    except (wire.WireError, ValueError, RecursionError) as exc:
        raise NotThisRoute(f"not JSON: {str(exc)[:120]}") from None
    if route.wrapper is not None:
        if not isinstance(data, dict) or route.wrapper not in data:
            raise NotThisRoute(f"no {route.wrapper!r} in the answer")
        data = data[route.wrapper]
        if not data:
            raise NotFound(f"an empty {route.wrapper!r}")
    if not isinstance(data, dict) or route.spans_key not in data:
        raise NotThisRoute(f"no {route.spans_key!r} in the answer")
    spans = _otlp(route, data[route.spans_key]) if route.answer == "otlp" else _jaeger(data)
    if not spans:
        raise NotFound("an answer without spans")
    return spans


def _otlp(route: TraceRoute, resource_spans: Any) -> list[Span]:
    """OTLP's tree as spans, its ids read in the route's spelling: base64 only where the route writes it (Tempo)."""
    try:
        return list(spans_of(parse_json({"resourceSpans": resource_spans}, base64_ok=route.ids == "base64")))
    except (json_format.ParseError, ValueError, TypeError, RecursionError) as exc:
        raise BadAnswer(f"not OTLP: {type(exc).__name__}: {str(exc)[:200]}") from None


def _jaeger(answer: dict[str, Any]) -> list[Span]:
    """Jaeger's JSON (``data[].spans[]``) as spans: ``startTime`` and ``duration`` are microseconds,
    the kind, the status and the scope are tags (``span.kind``, ``otel.status_code`` or ``error``,
    ``otel.scope.name``), the parent the ``CHILD_OF`` reference, the service the span's process."""
    traces = answer.get("data")
    if traces is None:
        raise NotFound(str(answer.get("errors"))[:200])
    if not isinstance(traces, list):
        raise BadAnswer("'data' is not a list of traces")
    out = []
    for trace in traces:
        processes = wire.mapping(trace, "processes")
        for s in wire.items(trace, "spans"):
            out.append(_jaeger_span(s, processes))
    return out


def _jaeger_span(s: Any, processes: dict[str, Any]) -> Span:
    start_us, duration_us = wire.number(wire.dig(s, "startTime"), int), wire.number(wire.dig(s, "duration"), int)
    trace_id, span_id = _hex_id(wire.dig(s, "traceID"), 32), _hex_id(wire.dig(s, "spanID"), 16)
    if start_us is None or duration_us is None or trace_id is None or span_id is None:
        raise BadAnswer("a span without a hex traceID, spanID or a numeric startTime and duration")
    tags = {t["key"]: t.get("value") for t in wire.items(s, "tags") if isinstance(t, dict) and isinstance(t.get("key"), str)}
    kind = tags.pop("span.kind", None)
    status = tags.pop("otel.status_code", None)
    failed = tags.pop("error", None) is True
    scope = tags.pop("otel.scope.name", None) or tags.pop("otel.library.name", None)
    parent = next((_hex_id(r.get("spanID"), 16) for r in wire.items(s, "references")
                   if isinstance(r, dict) and r.get("refType") == "CHILD_OF"), None)
    service = wire.dig(processes, str(wire.dig(s, "processID")), "serviceName")
    return Span(trace_id=trace_id, span_id=span_id, name=str(wire.dig(s, "operationName") or ""),
                start_ns=start_us * 1000, end_ns=(start_us + duration_us) * 1000, parent_span_id=parent,
                kind=str(kind).lower() if kind else None, service=str(service) if service is not None else None,
                scope=str(scope) if scope else None, attributes=tags,
                status="error" if failed or str(status).upper() == "ERROR" else "ok" if str(status).upper() == "OK" else None)


def _hex_id(value: Any, digits: int) -> str | None:
    """A Jaeger id as ``traceparent`` spells it: lower-case hex, zero-padded (Jaeger drops leading zeros)."""
    if not isinstance(value, str) or not value or len(value) > digits:
        return None
    try:
        int(value, 16)
    except ValueError:
        return None
    return value.lower().zfill(digits)


__all__ = ["BadAnswer", "NotFound", "NotThisRoute", "read_answer", "trace_path", "window_params"]
