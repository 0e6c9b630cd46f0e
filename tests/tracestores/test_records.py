"""Every trace store record answers the same questions, and each route reads its recorded real answer.

Each route of ``doctor.tracestores.RECORDS`` names its path, answer shape and window unit from the
fixed lists, and a recorded answer of the product itself (``fixtures/traces/``, provenance in
``fixtures/PROVENANCE.md``) that ``read_answer`` turns into the spans the product put in it; an
answer of the other product served at the same path is not taken for this route's.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from doctor.tracestores import RECORDS, ROUTES
from doctor.tracestores.reading import BadAnswer, NotFound, NotThisRoute, read_answer, trace_path, window_params
from doctor.tracestores.record import ANSWERS, ID_SPELLINGS, WINDOW_UNITS, TraceRoute

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures" / "traces"
#: What each recorded answer holds, read from the answer itself: (trace id, span id, name, kind, service, duration ns).
HELD = {
    "jaeger-v3-get-trace.json": ("000000000000009600000000000000a0", "00000000000000b4", "foobar", "server", "myservice", 0),
    "jaeger-api-traces.json": ("83a9efd15c1c98a977e0711cc93ee28b", "e127af99e3b3e074", "okey-dokey-0", "server", "telemetrygen", 123_000),
    "tempo-v2-trace.json": ("5b8efff798038103d269b633813fc700", "eee19b7ec3c1b100", "I am a span!", "server", "my.service", 698_000_000_000),
    "tempo-v1-trace.json": ("5b8efff798038103d269b633813fc700", "eee19b7ec3c1b100", "I am a span!", "server", "my.service", 698_000_000_000),
}
PAIRS = [pytest.param(record, route, id=f"{record.id}{route.path}") for record, route in ROUTES]


@pytest.mark.parametrize("record, route", PAIRS)
def test_every_route_is_spelled_from_the_fixed_lists(record, route: TraceRoute) -> None:
    assert "{trace_id}" in route.path and route.path.startswith("/api/")
    assert route.answer in ANSWERS and route.window in WINDOW_UNITS and route.ids in ID_SPELLINGS
    assert route.start_param and route.end_param and route.spans_key
    assert record.docs and record.port and record.not_found
    assert route.fixture in (ROOT / "fixtures" / "PROVENANCE.md").read_text()


@pytest.mark.parametrize("record, route", PAIRS)
def test_each_route_reads_its_recorded_answer(record, route: TraceRoute) -> None:
    spans = read_answer(route, 200, (FIXTURES / route.fixture).read_text())
    trace_id, span_id, name, kind, service, duration = HELD[route.fixture]
    assert [(s.trace_id, s.span_id, s.name, s.kind, s.service, s.end_ns - s.start_ns) for s in spans] == [
        (trace_id, span_id, name, kind, service, duration)]


def test_a_route_shared_by_two_stores_takes_only_its_own_answer() -> None:
    shared = [(r, route) for r, route in ROUTES if route.path == "/api/traces/{trace_id}"]
    assert {r.id for r, _ in shared} == {"jaeger", "tempo"}
    for _, route in shared:
        for _, other in shared:
            if other is not route:
                with pytest.raises(NotThisRoute):
                    read_answer(route, 200, (FIXTURES / other.fixture).read_text())
    every_route = [route for _, route in ROUTES]
    for route in every_route:
        with pytest.raises(NotThisRoute):
            read_answer(route, 200, "<!doctype html><html>Jaeger UI</html>")


def test_a_hex_routes_short_trace_id_is_read_as_hex_not_base64() -> None:
    """Jaeger's API v3 writes ids in hex: a 64-bit trace id (16 hex digits) is not Tempo's base64."""
    route = next(route for r, route in ROUTES if r.id == "jaeger" and route.answer == "otlp")
    text = (FIXTURES / route.fixture).read_text().replace("000000000000009600000000000000a0", "96000000000000a0")
    [span] = read_answer(route, 200, text)
    assert span.trace_id == "96000000000000a0"
    assert [r.id for r, route in ROUTES if route.ids == "base64"] == ["tempo", "tempo"]


def test_jaeger_classic_keeps_the_parent_the_scope_and_the_other_tags() -> None:
    route = next(route for r, route in ROUTES if r.id == "jaeger" and route.answer == "jaeger")
    [span] = read_answer(route, 200, (FIXTURES / route.fixture).read_text())
    assert span.parent_span_id == "909541b92cf05311" and span.scope == "telemetrygen"
    assert span.start_ns == 1706678909209712000
    assert span.attributes == {"net.peer.ip": "1.2.3.4", "peer.service": "telemetrygen-client"}


@pytest.mark.parametrize("record, route", PAIRS)
def test_not_found_and_malformed_answers_are_told_apart(record, route: TraceRoute) -> None:
    with pytest.raises(NotFound):
        read_answer(route, 404, "trace not found")
    wrapped = (lambda tree: {route.wrapper: tree}) if route.wrapper else (lambda tree: tree)
    import json
    with pytest.raises(BadAnswer):
        read_answer(route, 200, json.dumps(wrapped({route.spans_key: "not a list" if route.answer == "otlp" else 7})))


def test_each_window_is_spelled_in_its_routes_unit_and_covers_the_window() -> None:
    start, end = 1_765_000_000.25, 1_765_000_090.75
    spelled = {route.window: window_params(route, start, end) for _, route in ROUTES}
    assert spelled["rfc3339"] == {"start_time": "2025-12-06T05:46:40.250000Z", "end_time": "2025-12-06T05:48:10.750000Z"}
    assert spelled["unix_us"] == {"start": "1765000000250000", "end": "1765000090750000"}
    assert spelled["unix_s"] == {"start": "1765000000", "end": "1765000091"}
    assert trace_path(RECORDS[0].routes[0], "ABCDEF") == "/api/v3/traces/abcdef"
