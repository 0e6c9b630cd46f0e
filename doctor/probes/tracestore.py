"""Read the probe's spans back from a trace store after the probe (``--traces URL``).

Where the engine exports its spans to a Jaeger or a Tempo rather than to llm-doctor's receiver,
the spans of the probe's requests are asked back by their trace ids (each request carried a
``traceparent``; the ids are in the bundle), narrowed to the probe's window, from the routes the
store records name (``doctor.tracestores``): the first route that answers a trace with spans names
the store, and the rest of the ids are asked there only.

A store shows a span some seconds after the engine exported it (batching in the exporter and in
the store's ingestion), so the ids not found are asked again every ``RETRY_S`` until ``WAIT_S``
has passed; what is still missing then is a note, not an error. An unreachable store, or one
that answers an error status (401 without its credentials, 500), is one evidence error and the
end of the read-back; an answer that does not decode is counted as ``malformed``. Every request
has a deadline (the run's, and ``timeout_s`` each); the spans kept are bounded by the same cap
as the receiver's (``TraceEvidence.take``). The store's credentials (userinfo in the URL, or
``--traces-header``) stay in this module: the evidence keeps the URL without them, and the
collector gives the header values to the redactor.
"""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor

import httpx

from doctor.evidence import EvidenceError, StreamEvidence
from doctor.evidence.traces import Span, TraceEvidence
from doctor.probes.deadlines import RunDeadline
from doctor.probes.http import (
    BodyTooLarge,
    DeadlineExceeded,
    bounded_get,
    error_kind,
    http_client,
    join_url,
    without_credentials,
)
from doctor.probes.otlp import MAX_SPANS
from doctor.tracestores import RECORDS, ROUTES, TraceRoute, TraceStoreRecord
from doctor.tracestores.reading import BadAnswer, NotFound, NotThisRoute, read_answer, trace_path, window_params

#: How long the read-back keeps asking for the traces not found yet: Jaeger and Tempo show a span
#: seconds after its export (vLLM's batch span processor exports every 5 s, a collector batches
#: again, Tempo's ingesters answer by id as soon as they hold the span).
WAIT_S = 15.0
#: Seconds between two rounds of asking for the traces not found yet.
RETRY_S = 2.0
#: Requests in flight at once: a probe's few hundred traces in a few rounds, without flooding the store.
WORKERS = 8
#: The window is widened by this on both sides: the engine's clock may be off the client's (the
#: join aligns it), and the store indexes a trace by its spans' own times.
MARGIN_S = 60.0
#: The largest answer read: one trace of a probe request is a few kB; a trace with thousands of
#: spans is not one of the probe's.
MAX_ANSWER_BYTES = 8 * 1024 * 1024
#: The notes kept on answers that did not decode; the count says how many.
MAX_NOTES = 5

Route = tuple[TraceStoreRecord, TraceRoute]


class _Failed(Exception):
    """The store could not be asked at all (unreachable, an error status): one evidence error, the read-back ends."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def probe_window(stream: StreamEvidence) -> tuple[float, float]:
    """The probe's requests' window in unix seconds, from the first send to the last read, widened by ``MARGIN_S``."""
    ends = [t for r in stream.requests for t in (r.t_end, r.t_sent, r.t_scheduled) if t is not None]
    return stream.t0_wall - MARGIN_S, stream.t0_wall + max(ends, default=0.0) + MARGIN_S


class TraceStore:
    """One trace store at ``url``, asked for traces by id; the route that answered first is kept."""

    def __init__(self, url: str, *, headers: Mapping[str, str], verify: bool | str, timeout_s: float,
                 window: tuple[float, float], run: RunDeadline | None = None) -> None:
        self.url, self._timeout_s, self._window, self._run = url, timeout_s, window, run
        self._client = http_client({**headers, "Accept": "application/json"}, verify, timeout_s)
        self._lock = threading.Lock()
        self.found: Route | None = None  # the store and route that answered a trace with spans

    def close(self) -> None:
        self._client.close()

    def _get(self, route: TraceRoute, trace_id: str) -> tuple[int, str]:
        deadline = self._run.grant(self._timeout_s) if self._run is not None else self._timeout_s
        if deadline <= 0:
            raise _Failed("deadline", "the run's --deadline passed before the trace store was asked")
        url = join_url(self.url, trace_path(route, trace_id))
        try:
            response, text = bounded_get(self._client, url, deadline_s=deadline, max_bytes=MAX_ANSWER_BYTES,
                                         params=window_params(route, *self._window))
        except (httpx.HTTPError, DeadlineExceeded, BodyTooLarge, OSError) as exc:
            raise _Failed(error_kind(exc), f"GET {without_credentials(url)}: {str(exc) or type(exc).__name__}") from None
        return response.status_code, text

    def trace(self, trace_id: str) -> list[Span]:
        """The spans of one trace; ``NotFound`` when no route holds it, ``BadAnswer`` when the answer
        did not decode, ``_Failed`` when the store could not be asked."""
        routes = [self.found] if self.found is not None else list(ROUTES)
        refused: _Failed | None = None
        for record, route in routes:
            status, text = self._get(route, trace_id)
            if status not in (200, 404):
                failure = _Failed("http-status", f"{record.display} {route.path} answered HTTP {status}: {text[:200]}")
                if self.found is not None or status in (401, 403):
                    raise failure
                refused = refused or failure  # a route this store may not serve: try the next
                continue
            try:
                spans = read_answer(route, status, text)
            except (NotFound, NotThisRoute):
                continue
            with self._lock:
                self.found = self.found or (record, route)
            return spans
        if refused is not None:
            raise refused
        raise NotFound(trace_id)


def read_back(url: str, trace_ids: Iterable[str], window: tuple[float, float], *, headers: Mapping[str, str],
              verify: bool | str, timeout_s: float, run: RunDeadline | None = None, wait_s: float = WAIT_S,
              into: TraceEvidence | None = None, cap: int = MAX_SPANS,
              sleep: Callable[[float], None] = time.sleep) -> tuple[TraceEvidence, list[EvidenceError]]:
    """Ask the store at ``url`` for each trace, again for those not found until ``wait_s`` has passed.

    The spans go into ``into`` (the receiver's evidence, when ``--otlp-listen`` ran too: a span it
    already holds is not added twice), else into new evidence whose ``source`` is the URL.
    """
    target = without_credentials(url)
    evidence = into if into is not None else TraceEvidence(source=target, cap=cap)
    held = {(s.trace_id, s.span_id) for s in evidence.spans}
    pending = sorted(set(trace_ids))
    total = len(pending)
    errors: list[EvidenceError] = []
    try:
        store = TraceStore(url, headers=headers, verify=verify, timeout_s=timeout_s, window=window, run=run)
    except (OSError, ssl.SSLError) as exc:
        return evidence, [EvidenceError("traces", target, "read back spans", "tls", f"cannot use the CA certificates: {exc}", fatal=True)]
    start = time.monotonic()
    bad = 0

    def ask(trace_id: str) -> list[Span] | Exception:
        try:
            return store.trace(trace_id)
        except (NotFound, BadAnswer, _Failed) as exc:
            return exc

    try:
        with ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="llm-doctor-traces") as pool:
            while pending:
                outcomes = list(zip(pending, pool.map(ask, pending), strict=True))
                pending = []
                for trace_id, outcome in outcomes:
                    if isinstance(outcome, list):
                        evidence.take([s for s in outcome if (s.trace_id, s.span_id) not in held])
                        held.update((s.trace_id, s.span_id) for s in outcome)
                        evidence.payloads += 1
                    elif isinstance(outcome, BadAnswer):
                        bad += 1
                        evidence.malformed += 1
                        if bad <= MAX_NOTES:
                            evidence.notes.append(f"trace {trace_id}: the store's answer did not decode: {outcome}")
                    elif isinstance(outcome, NotFound):
                        pending.append(trace_id)
                failed = next((o for _, o in outcomes if isinstance(o, _Failed)), None)
                if failed is not None:
                    errors.append(EvidenceError("traces", target, "read back spans", failed.kind, str(failed), fatal=not evidence.spans))
                    break
                left = wait_s - (time.monotonic() - start)
                if not pending or left < RETRY_S or (run is not None and run.left() < RETRY_S + timeout_s):
                    break
                sleep(RETRY_S)
    finally:
        store.close()
    evidence.waited_s = round(time.monotonic() - start, 3)
    if store.found is not None:
        record, route = store.found
        evidence.notes.append(f"read back from {record.display} ({route.path}): {total - len(pending)} of {total} trace(s) found")
    if pending and not errors:
        evidence.notes.append(
            f"{len(pending)} of {total} trace(s) not in the trace store after {evidence.waited_s:g} s of asking "
            f"(every {RETRY_S:g} s): the engine did not export them there, or the store had not ingested them yet"
            + ("" if store.found is not None else
               f"; no answer was a trace of {' or '.join(r.display for r in RECORDS)}: is {target} its query API?"))
    return evidence, errors


__all__ = ["MARGIN_S", "RETRY_S", "WAIT_S", "TraceStore", "probe_window", "read_back"]
