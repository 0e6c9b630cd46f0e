"""Read the probe's spans back from a trace store after the probe (``--traces URL``).

Where the engine exports its spans to a Jaeger or a Tempo rather than to llm-doctor's receiver,
the spans of the probe's requests are asked back by their trace ids (each request carried a
``traceparent``; the ids are in the bundle), narrowed to the probe's window, from the routes the
store records name (``doctor.tracestores``): the first trace is asked alone, each path once (two
products share ``/api/traces/{id}``: the answer's shape tells which), and the first route that
answers a trace with spans names the store; the rest of the ids are asked there only.

A store shows a span some seconds after the engine exported it (batching in the exporter and in
the store's ingestion), so the ids not found are asked again every ``RETRY_S`` until ``WAIT_S``
has passed; what is still missing then is a note, not an error. An unreachable store, or one
that answers an error status (401 without its credentials, 500), is one evidence error and the
end of the read-back: the first failure stops every request not sent yet, so a hung store costs
one timeout, not one per trace; an answer that does not decode is counted as ``malformed``. The
whole read-back has a deadline (``WAIT_S``, or one request's timeout when longer, and the run's),
and each request is given ``min(timeout_s, what is left of it)``; the spans kept are bounded by
the same cap as the receiver's (``TraceEvidence.take``), and the note says how many were found
and how many of them the cap left out. The store's credentials (userinfo in the URL, or
``--traces-header``) stay in this module: the evidence keeps the URL without them, and the
collector gives the header values to the redactor.
"""

from __future__ import annotations

import math
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


class _Stopped(Exception):
    """Not asked: the read-back had stopped (the store failed, or its time ran out) before this request."""


#: Each path the routes ask, once, with the routes that answer there (Jaeger's classic API and Tempo's
#: v1 share ``/api/traces/{id}``: one request, and the answer's shape tells which product it is).
_PATHS: tuple[tuple[str, tuple[Route, ...]], ...] = tuple(
    (path, tuple(pair for pair in ROUTES if pair[1].path == path)) for path in dict.fromkeys(route.path for _, route in ROUTES))


def probe_window(stream: StreamEvidence) -> tuple[float, float]:
    """The probe's requests' window in unix seconds, from the first send to the last read, widened by ``MARGIN_S``."""
    ends = [t for r in stream.requests for t in (r.t_end, r.t_sent, r.t_scheduled) if t is not None]
    return stream.t0_wall - MARGIN_S, stream.t0_wall + max(ends, default=0.0) + MARGIN_S


class TraceStore:
    """One trace store at ``url``, asked for traces by id until ``end`` (monotonic seconds); the route
    that answered first is kept, and ``stop`` (set at the store's first failure, or at ``end``) makes
    every later ask return without sending."""

    def __init__(self, url: str, *, headers: Mapping[str, str], verify: bool | str, timeout_s: float,
                 window: tuple[float, float], end: float, run: RunDeadline | None = None) -> None:
        self.url, self._timeout_s, self._window, self._end, self._run = url, timeout_s, window, end, run
        self._client = http_client({**headers, "Accept": "application/json"}, verify, timeout_s)
        self._lock = threading.Lock()
        self.stop = threading.Event()
        self.found: Route | None = None  # the store and route that answered a trace with spans

    def close(self) -> None:
        self._client.close()

    def _get(self, route: TraceRoute, trace_id: str, params: dict[str, str]) -> tuple[int, str]:
        """One GET, given ``min(timeout_s, what is left of the read-back, what is left of the run)``."""
        if self.stop.is_set():
            raise _Stopped(trace_id)
        deadline = min(self._timeout_s, math.floor((self._end - time.monotonic()) * 1000) / 1000)
        if deadline <= 0:
            self.stop.set()
            raise _Stopped(trace_id)
        if self._run is not None:
            deadline = self._run.grant(deadline)
            if deadline <= 0:
                raise _Failed("deadline", "the run's --deadline passed before the trace store was asked")
        url = join_url(self.url, trace_path(route, trace_id))
        try:
            response, text = bounded_get(self._client, url, deadline_s=deadline, max_bytes=MAX_ANSWER_BYTES, params=params)
        except (httpx.HTTPError, DeadlineExceeded, BodyTooLarge, OSError) as exc:
            raise _Failed(error_kind(exc), f"GET {without_credentials(url)}: {str(exc) or type(exc).__name__}") from None
        return response.status_code, text

    def _params(self, pairs: tuple[Route, ...]) -> dict[str, str]:
        """The window, when every route at a path spells it alike; else none (both products take a lookup
        without one: Jaeger's classic API counts microseconds where Tempo counts seconds)."""
        spelled = [window_params(route, *self._window) for _, route in pairs]
        return spelled[0] if all(p == spelled[0] for p in spelled) else {}

    def trace(self, trace_id: str) -> list[Span]:
        """The spans of one trace; ``NotFound`` when no route holds it, ``BadAnswer`` when the answer
        did not decode, ``_Failed`` when the store could not be asked, ``_Stopped`` when it was not asked."""
        found = self.found
        paths = [(found[1].path, (found,))] if found is not None else _PATHS
        refused: _Failed | None = None
        for path, pairs in paths:
            status, text = self._get(pairs[0][1], trace_id, self._params(pairs))
            if status not in (200, 404):
                failure = _Failed("http-status", f"{' or '.join(r.display for r, _ in pairs)} {path} answered HTTP {status}: {text[:200]}")
                if found is not None or status in (401, 403):
                    raise failure
                refused = refused or failure  # a route this store may not serve: try the next
                continue
            for record, route in pairs:
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

    def ask(self, trace_id: str) -> list[Span] | Exception:
        """``trace``, its outcome returned; a failure stops every ask after it (no request is sent)."""
        try:
            return self.trace(trace_id)
        except _Failed as exc:
            self.stop.set()
            return exc
        except (NotFound, BadAnswer, _Stopped) as exc:
            return exc


def read_back(url: str, trace_ids: Iterable[str], window: tuple[float, float], *, headers: Mapping[str, str],
              verify: bool | str, timeout_s: float, run: RunDeadline | None = None, wait_s: float = WAIT_S,
              into: TraceEvidence | None = None, cap: int = MAX_SPANS,
              sleep: Callable[[float], None] = time.sleep) -> tuple[TraceEvidence, list[EvidenceError]]:
    """Ask the store at ``url`` for each trace, again for those not found until ``wait_s`` has passed.

    The whole read-back ends by ``max(wait_s, timeout_s)`` (one round always has a request's time)
    and the run's deadline: each request is given what is left of both. The first trace is asked
    alone, to find the store's route; the rest then go to that route only, ``WORKERS`` at a time.
    The spans go into ``into`` (the receiver's evidence, when ``--otlp-listen`` ran too: a span it
    already holds is not added twice), else into new evidence whose ``source`` is the URL.
    """
    target = without_credentials(url)
    evidence = into if into is not None else TraceEvidence(source=target, cap=cap)
    held = {(s.trace_id, s.span_id) for s in evidence.spans}
    pending = sorted(set(trace_ids))
    total = len(pending)
    errors: list[EvidenceError] = []
    start = time.monotonic()
    try:
        store = TraceStore(url, headers=headers, verify=verify, timeout_s=timeout_s, window=window,
                           end=start + max(wait_s, timeout_s), run=run)
    except (OSError, ssl.SSLError) as exc:
        return evidence, [EvidenceError("traces", target, "read back spans", "tls", f"cannot use the CA certificates: {exc}", fatal=True)]
    bad = found_spans = dropped = 0
    pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="llm-doctor-traces")
    try:
        while pending:
            first = store.ask(pending[0])
            outcomes = [(pending[0], first), *zip(pending[1:], pool.map(store.ask, pending[1:]), strict=True)]
            pending = []
            for trace_id, outcome in outcomes:
                if isinstance(outcome, list):
                    new = [s for s in outcome if (s.trace_id, s.span_id) not in held]
                    held.update((s.trace_id, s.span_id) for s in new)
                    found_spans += len(new)
                    dropped += evidence.take(new)
                    evidence.payloads += 1
                elif isinstance(outcome, BadAnswer):
                    bad += 1
                    evidence.malformed += 1
                    if bad <= MAX_NOTES:
                        evidence.notes.append(f"trace {trace_id}: the store's answer did not decode: {outcome}")
                elif isinstance(outcome, (NotFound, _Stopped, _Failed)):
                    pending.append(trace_id)
            failed = next((o for _, o in outcomes if isinstance(o, _Failed)), None)
            if failed is not None:
                errors.append(EvidenceError("traces", target, "read back spans", failed.kind,
                                            f"{failed} ({len(pending)} of {total} trace(s) not read back: the read-back "
                                            "stopped at the store's first failure)", fatal=not evidence.spans))
                break
            left = _left(start + wait_s, run)  # asked again only while wait_s lasts
            if not pending or store.stop.is_set() or left < RETRY_S:
                break
            sleep(RETRY_S)
    finally:
        store.stop.set()
        pool.shutdown(wait=False, cancel_futures=True)  # Ctrl-C: the queued asks are dropped, not waited for
        store.close()
    evidence.waited_s = round(time.monotonic() - start, 3)
    if store.found is not None:
        record, route = store.found
        kept = f"; {dropped} of them not kept: the cap of {evidence.cap} span(s) was full" if dropped else ""
        evidence.notes.append(f"read back from {record.display} ({route.path}): {total - len(pending)} of {total} "
                              f"trace(s) found, {found_spans} span(s){kept}")
    if pending and not errors:
        evidence.notes.append(
            f"{len(pending)} of {total} trace(s) not in the trace store after {evidence.waited_s:g} s of asking "
            f"(every {RETRY_S:g} s): the engine did not export them there, or the store had not ingested them yet"
            + ("" if store.found is not None else
               f"; no answer was a trace of {' or '.join(r.display for r in RECORDS)}: is {target} its query API?"))
    return evidence, errors


def _left(end: float, run: RunDeadline | None) -> float:
    """Seconds left to the read-back: to its own end, or the run's deadline when that comes first."""
    return min(end - time.monotonic(), run.left() if run is not None else math.inf)


__all__ = ["MARGIN_S", "RETRY_S", "WAIT_S", "WORKERS", "TraceStore", "probe_window", "read_back"]
