"""The trace stores ``--traces URL`` reads the probe's spans back from, one record each, and the
reading of their answers into ``Span`` records.

Each product is one module holding one ``TraceStoreRecord`` (``record``): ``jaeger`` (API v3 and
the classic API), ``tempo`` (``/api/v2/traces`` and ``/api/traces``). The routes the read-back
tries are derived from ``RECORDS`` (``ROUTES``, newest API of each first); ``reading`` turns one
answer into spans, ``otlp_json`` is the OTLP decoding the receiver (``--otlp-listen``) shares.

Pure: no probe, no network. The read-back itself is ``doctor.probes.tracestore``.
"""

from __future__ import annotations

from doctor.tracestores import jaeger, tempo
from doctor.tracestores.record import TraceRoute, TraceStoreRecord

RECORDS: tuple[TraceStoreRecord, ...] = (jaeger.RECORD, tempo.RECORD)
BY_ID: dict[str, TraceStoreRecord] = {r.id: r for r in RECORDS}
#: Every route with its store, in the order tried: each store's newest API first, then the rest.
ROUTES: tuple[tuple[TraceStoreRecord, TraceRoute], ...] = tuple(
    sorted(((r, route) for r in RECORDS for route in r.routes), key=lambda pair: pair[0].routes.index(pair[1])))

__all__ = ["BY_ID", "RECORDS", "ROUTES", "TraceRoute", "TraceStoreRecord"]
