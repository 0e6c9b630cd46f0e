"""What the engine and the gateway say about themselves: ``/version``, ``/v1/models``, ``/health``.

Three cheap GETs per target, each under its own deadline. ``/v1/models`` names the model and,
on vLLM, its ``max_model_len``; ``/version`` the vLLM version; ``/health`` whether the engine
loop is alive. The gateway's answer to the same calls shows what it puts on the wire
(``Server``, ``Via``, ``Content-Encoding``, ``X-Accel-Buffering``, HTTP version).

The engine (not the gateway) is then asked what it is, where it has a route for that
(``doctor.engines.server_info``: llama.cpp ``/props``, SGLang ``/get_server_info``, TGI
``/info``): one more GET when its ``Server`` header or its models' ``owned_by`` names the
engine, else those routes in a fixed order until one answers, each under a short deadline
(``INFO_DEADLINE_S``), and nothing for vLLM. A guess that finds nothing is not an error; the
named engine's route failing is one.

No completion is sent here: a streamed request costs engine work and needs a model, and the
stream probe already records the headers of every streamed answer (``RequestTrace.headers``),
which is where buffering and compression headers differ from a JSON answer. So the headers
kept here are those of the ``/v1/models`` answer (else ``/version``), as the gateway routes it.

The HTTP version is the one httpx negotiated: HTTP/1.1, as the stream probe speaks it (a
gateway that offers HTTP/2 to browsers still answers us in HTTP/1.1).

A target that cannot be reached at all (refused, DNS, TLS, timeout) is tried once, not three
times: the on-call engineer should not wait three deadlines to learn the same thing. Each GET
waits ``min(--timeout, what is left of the run's --deadline)``; with nothing left it is not sent
(kind ``deadline``). The gateway, asked after the engine, is also held to the bound the engine's
own answers set (``doctor.probes.deadlines.direct_bound``, the stream probe's rule for a hung
gateway): a gateway that accepts and never answers beside an engine answering in milliseconds
costs that bound, not the whole ``--timeout``.
"""

from __future__ import annotations

import re
import ssl
import time
from dataclasses import dataclass
from typing import Any

import httpx

from doctor.engines import server_info
from doctor.engines.names import VLLM, display, engine_of_answers
from doctor.evidence import Endpoint, EndpointsEvidence, EngineInfo, EvidenceError, ModelInfo, ProbePath
from doctor.evidence.errors import UNREACHABLE_KINDS
from doctor.evidence.stream import DIRECT_BASIS, RUN_BASIS, TIMEOUT_BASIS
from doctor.foundation import wire
from doctor.probes.client_stack import run_loop
from doctor.probes.deadlines import HeadBound, RunDeadline, direct_bound
from doctor.probes.http import (
    BodyTooLarge,
    DeadlineExceeded,
    HttpOptions,
    Unanswered,
    bounded_get,
    error_kind,
    http_client,
    join_url,
)
from doctor.probes.transport import other_scheme, scheme_line

SOURCE = "endpoints"

#: Response headers that decide how a stream travels, in the spelling the report shows.
HEADERS_THAT_MATTER = (
    "Server",
    "Content-Type",
    "Content-Encoding",
    "Transfer-Encoding",
    "X-Accel-Buffering",
    "Via",
)

#: An answer to these GETs is a few KiB; a larger one is not the API we are looking for.
MAX_BODY_BYTES = 1 << 20

#: The deadline of each GET that asks an engine what it is: a route the engine may not have.
INFO_DEADLINE_S = 3.0

#: Failure kinds after which a target is asked nothing more: not reached, or no time left.
_STOPS = UNREACHABLE_KINDS | {"deadline"}

#: The ``Endpoint.role`` of each probe path's target.
_ROLES = {ProbePath.DIRECT: "engine", ProbePath.GATEWAY: "gateway"}
_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)
#: How each failure kind reads to the user; ``{}`` is the transport's own words.
_REASONS = {
    "timeout": "no complete answer within {t:g} s",
    "dns": "the host name does not resolve ({})",
    "tls": "TLS handshake failed ({}); --ca-cert or --insecure may help",
    "connect": "cannot connect ({})",
}


@dataclass
class _Answer:
    status: int
    http_version: str
    headers: httpx.Headers
    body: str
    seconds: float  # from the send to the end of the body


@dataclass
class _Limits:
    """What each GET to one target may wait: its own timeout, less when the run's deadline leaves
    less, or (the gateway) when the bound the engine's answers set is shorter."""

    timeout_s: float
    run: RunDeadline | None = None
    bound: HeadBound | None = None
    #: (seconds, basis) of the first GET asked: what the evidence records
    first: tuple[float, str] | None = None

    def next(self) -> tuple[float, str]:
        """(seconds, basis) of the next GET; seconds <= 0: no time left to send it."""
        seconds, basis = self.timeout_s, TIMEOUT_BASIS
        if self.bound is not None and self.bound.seconds < seconds:
            seconds, basis = self.bound.seconds, DIRECT_BASIS
        left = seconds if self.run is None else self.run.grant(seconds)
        if left < seconds:
            seconds, basis = left, RUN_BASIS
        if self.first is None:
            self.first = (max(0.0, seconds), basis)
        return seconds, basis

    def why(self, basis: str) -> str:
        """What set a deadline that passed, for the error's sentence."""
        if basis == DIRECT_BASIS and self.bound is not None:
            return f" {self.bound.why}"
        if basis == RUN_BASIS and self.run is not None:
            return f" (what was left of the run's {self.run.seconds:g} s --deadline)"
        return ""


class _Failure(Exception):
    def __init__(self, kind: str, message: str, unanswered_s: float | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.unanswered_s = unanswered_s  # a GET sent on an accepted connection that got no byte back in this time


def collect_endpoints(
    targets: dict[ProbePath, str], http: HttpOptions, *, run: RunDeadline | None = None, ttft_budget_s: float | None = None,
) -> tuple[EndpointsEvidence, list[EvidenceError]]:
    """Ask each target (the direct path's engine, the gateway) for its version, models and health.

    Returns the evidence (one ``Endpoint`` per target, even one that never answered, so the
    report can say which hop was silent) and the errors met. Never raises for a failure of a
    target: each failed call is an ``EvidenceError``; the errors are ``fatal`` only when no target
    answered anything. ``run``: the run's deadline, which no GET outlives; ``ttft_budget_s``: the
    budget under which the engine's answers bound the gateway's (None: no such bound).
    """
    evidence = EndpointsEvidence()
    errors: list[EvidenceError] = []
    try:
        client = http_client(http.request_headers(), http.verify, http.timeout_s)
    except (OSError, ssl.SSLError) as exc:
        message = f"cannot use the CA certificates {http.verify}: {exc}"
        return evidence, [EvidenceError(SOURCE, url, "load CA certificates", "tls", message, fatal=True) for url in targets.values()]
    answered = False
    direct_times: list[float] = []  # the engine's answer times, which bound the gateway's
    with client:
        for name, base in targets.items():
            bound = None
            if name == ProbePath.GATEWAY and ttft_budget_s is not None:
                bound = direct_bound(direct_times, direct_times, ttft_budget_s, what="GET answer time")
            limits = _Limits(http.timeout_s, run, bound)
            endpoint, endpoint_errors, got_answer, times = _probe_target(client, _ROLES[name], base, limits)
            if name == ProbePath.DIRECT:
                direct_times = times
            evidence.endpoints.append(endpoint)
            errors.extend(endpoint_errors)
            answered = answered or got_answer
    if not answered:
        for error in errors:
            error.fatal = True
    return evidence, errors


def _probe_target(
    client: httpx.Client, role: str, base: str, limits: _Limits
) -> tuple[Endpoint, list[EvidenceError], bool, list[float]]:
    """(the endpoint, its errors, whether it answered anything, the answer times of its three GETs)."""
    endpoint = Endpoint(role=role, url=base)
    errors: list[EvidenceError] = []
    times: list[float] = []
    answered = cut_off = False
    calls = (("/version", _read_version), ("/v1/models", _read_models), ("/health", _read_health))
    for i, (path, read) in enumerate(calls):
        url = join_url(base, path)
        try:
            answer = _get(client, url, limits)
        except _Failure as failure:
            message = failure.message
            if i == 0 and failure.unanswered_s is None and (spoken := _scheme_spoken(base, failure.kind, limits)):
                endpoint.scheme_mismatch = spoken
                failure.kind, message = "tls", scheme_line(base, spoken)
            skipped = [p for p, _ in calls[i + 1 :]]
            if failure.kind in _STOPS and skipped:
                message += f" ({', '.join(skipped)} not tried)"
            errors.append(EvidenceError(SOURCE, url, f"GET {path}", failure.kind, message))
            if i == 0 and failure.unanswered_s is not None:
                # only the first GET (/version) proves a hung target: a later silent one (/v1/models, /health)
                # after an answer is a route the target passes on, e.g. a gateway waiting on its upstream
                endpoint.unanswered_s = failure.unanswered_s
            if failure.kind in _STOPS:
                cut_off = True
                break
            continue
        answered = True
        times.append(answer.seconds)
        try:
            read(endpoint, answer)
            understood = True
        except _Failure as failure:
            errors.append(EvidenceError(SOURCE, url, f"GET {path}", failure.kind, failure.message))
            understood = False
        # The first answer's headers, replaced by those of a good /v1/models answer (the API route).
        if endpoint.http_version is None or (understood and path == "/v1/models"):
            endpoint.http_version = answer.http_version
            endpoint.headers = _headers_that_matter(answer.headers)
    if limits.first is not None:
        endpoint.deadline_s, endpoint.deadline_basis = limits.first
    if role == "engine" and answered and not cut_off:
        info_limits = _Limits(min(limits.timeout_s, INFO_DEADLINE_S), limits.run)
        errors.extend(_ask_engine(client, endpoint, base, info_limits))
    return endpoint, errors, answered, times


def _scheme_spoken(base: str, kind: str, limits: _Limits) -> str | None:
    """The scheme ``base``'s port speaks when its first GET failed as a wrong scheme fails (an https://
    handshake that failed or timed out, an http:// connection closed before any answer); else None.
    Asked here, at the first failure, so the run says it in one line instead of after a timeout per step."""
    scheme = httpx.URL(base).scheme
    if not ((scheme == "https" and kind in ("tls", "timeout")) or (scheme == "http" and kind == "connect")):
        return None
    return run_loop(other_scheme(base, limits.timeout_s))


def _ask_engine(client: httpx.Client, endpoint: Endpoint, base: str, limits: _Limits) -> list[EvidenceError]:
    """Fill ``endpoint.engine_info`` from the engine's own description; the errors of a named
    engine's route (a guessed route that is absent is no error)."""
    answers = engine_of_answers(endpoint.headers, (m.owned_by for m in endpoint.models))
    named = answers[0] if answers is not None else None
    if named == VLLM:
        return []
    # the engine named, when it has a route of its own; one without is guessed at, like none
    known = named if named in server_info.PATHS else None
    tried = [known] if known is not None else list(server_info.PATHS)
    for engine in tried:
        path = server_info.PATHS[engine]
        url = join_url(base, path)
        try:
            fields = server_info.kept_fields(engine, _json(_get(client, url, limits), path))
            if fields is None:
                raise _Failure("malformed", f"GET {path} answered JSON without {display(engine)}'s fields")
        except _Failure as failure:
            if known is not None:
                return [EvidenceError(SOURCE, url, f"GET {path}", failure.kind, failure.message)]
            if failure.kind in _STOPS - {"timeout"}:
                return []
            continue
        endpoint.engine_info = EngineInfo(engine=engine, path=path, fields=fields)
        return []
    return []


def _get(client: httpx.Client, url: str, limits: _Limits) -> _Answer:
    """One GET, the whole exchange (not only each read) under ``limits``, the body size bounded."""
    timeout_s, basis = limits.next()
    if timeout_s <= 0 and limits.run is not None:
        raise _Failure("deadline", limits.run.spent(f"GET {url}"))
    start = time.monotonic()
    try:
        response, text = bounded_get(client, url, deadline_s=timeout_s, max_bytes=MAX_BODY_BYTES)
    except Unanswered:
        silent = timeout_s if basis == TIMEOUT_BASIS else None  # a bound shorter than --timeout proves less
        raise _Failure("timeout", f"GET {url}: the connection was accepted and not a byte of answer came within "
                                  f"{timeout_s:g} s" + limits.why(basis), silent) from None
    except (httpx.HTTPError, DeadlineExceeded, BodyTooLarge) as exc:
        kind = error_kind(exc)
        detail = str(exc) or type(exc).__name__
        reason = _REASONS.get(kind, "{}").format(detail, t=timeout_s)
        raise _Failure(kind, f"GET {url}: {reason}" + (limits.why(basis) if kind == "timeout" else "")) from None
    return _Answer(response.status_code, response.http_version, response.headers, text, time.monotonic() - start)


def _headers_that_matter(headers: httpx.Headers) -> dict[str, str]:
    return {name: headers[name] for name in HEADERS_THAT_MATTER if name in headers}


def _json(answer: _Answer, path: str) -> Any:
    """The answer's JSON document, or a ``_Failure`` that says what came instead."""
    content_type = answer.headers.get("content-type", "")
    if answer.status >= 400:
        raise _Failure("http-status", f"GET {path} answered HTTP {answer.status}{_what(answer)}")
    try:
        return wire.loads(answer.body)
    except wire.WireError as exc:
        described = _what(answer) or f" ({len(answer.body)} characters of {content_type or 'unknown type'})"
        raise _Failure("malformed", f"GET {path} answered HTTP {answer.status} but {exc}{described}") from None


def _what(answer: _Answer) -> str:
    """A few words about a non-JSON body: an HTML page's title, else its content type."""
    content_type = answer.headers.get("content-type", "")
    if "html" in content_type.lower() or answer.body.lstrip()[:1] == "<":
        match = _TITLE.search(answer.body[:4096])
        title = " ".join(match.group(1).split()) if match else ""
        return f": an HTML page{f' titled {title!r}' if title else ''}"
    return ""


def _read_version(endpoint: Endpoint, answer: _Answer) -> None:
    doc = _json(answer, "/version")
    version = doc.get("version") if isinstance(doc, dict) else None
    if not isinstance(version, str):
        raise _Failure("malformed", 'GET /version answered JSON without a "version" string')
    endpoint.version = version


def _read_models(endpoint: Endpoint, answer: _Answer) -> None:
    doc = _json(answer, "/v1/models")
    data = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(data, list):
        raise _Failure("malformed", 'GET /v1/models answered JSON without a "data" list')
    for item in data:
        if not isinstance(item, dict) or not isinstance(item.get("id"), str):
            continue
        root = item.get("root")
        max_len = item.get("max_model_len")
        owner = item.get("owned_by")
        endpoint.models.append(
            ModelInfo(
                id=item["id"],
                root=root if isinstance(root, str) else None,
                max_model_len=max_len if isinstance(max_len, int) and not isinstance(max_len, bool) else None,
                owned_by=owner if isinstance(owner, str) else None,
            )
        )
    if not endpoint.models:
        raise _Failure("malformed", "GET /v1/models listed no model")


def _read_health(endpoint: Endpoint, answer: _Answer) -> None:
    endpoint.health_status = answer.status
    if answer.status >= 400:
        raise _Failure("http-status", f"GET /health answered HTTP {answer.status}{_what(answer)}")
