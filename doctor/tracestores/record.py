"""What llm-doctor knows about one trace store's HTTP query API, as one record: the routes that answer
one trace by its id, in the order tried, and how each spells its answer and its time window.

``--traces URL`` reads the probe's spans back from the store after the probe (``doctor.probes.
tracestore``): every table of stores (the routes tried, the docs' table) is derived from the records
in ``doctor.tracestores.RECORDS``, so adding a product is one module of this package plus a
recorded answer of each of its routes in ``fixtures/traces/`` (``tests/tracestores/
test_records.py`` holds every record to the same questions).
"""

from __future__ import annotations

from dataclasses import dataclass

#: How a route spells its window: RFC 3339 with nanoseconds (Jaeger's API v3), unix microseconds
#: (Jaeger's classic API), unix seconds (Tempo).
WINDOW_UNITS: tuple[str, ...] = ("rfc3339", "unix_us", "unix_s")
#: The shapes of an answer: OTLP's ``resourceSpans`` tree as JSON, or Jaeger's own JSON (``data[].spans[]``).
ANSWERS: tuple[str, ...] = ("otlp", "jaeger")
#: How a route's OTLP answer spells trace and span ids: hex, as the OTLP specification (Jaeger's API
#: v3), or base64, as protobuf's canonical JSON mapping (Tempo).
ID_SPELLINGS: tuple[str, ...] = ("hex", "base64")


@dataclass(frozen=True)
class TraceRoute:
    """One route that answers one trace by its id.

    ``path`` holds ``{trace_id}`` (32 lower-case hex digits); ``answer`` is one of ``ANSWERS``;
    ``wrapper`` the key the answer's tree is under (None: the answer is the tree); ``spans_key`` the
    key of its list of resource spans (or of traces, for Jaeger's JSON): an answer without it is
    not this route's (two products serve ``/api/traces/{id}``); ``start_param`` / ``end_param``
    and ``window`` (one of ``WINDOW_UNITS``) narrow the lookup to the probe's window; ``fixture`` the
    recorded answer in ``fixtures/traces/``; ``ids`` (one of ``ID_SPELLINGS``) how its OTLP answer
    spells ids, so a short hex id is never read as base64. Every route is asked with ``Accept: application/json``
    (Tempo answers protobuf without it).
    """

    path: str
    answer: str
    spans_key: str
    window: str
    start_param: str
    end_param: str
    fixture: str
    wrapper: str | None = None
    ids: str = "hex"


@dataclass(frozen=True)
class TraceStoreRecord:
    """One trace store product: its routes, newest API first, and where they are defined (``docs``).

    ``port`` is its query API's usual port (for the docs and messages); ``not_found`` how it
    answers an id it does not hold (a 404, with the body it sends), which the read-back counts as
    not yet ingested rather than as an error.
    """

    id: str
    display: str
    routes: tuple[TraceRoute, ...]
    port: int
    not_found: str
    docs: str


__all__ = ["ANSWERS", "ID_SPELLINGS", "WINDOW_UNITS", "TraceRoute", "TraceStoreRecord"]
