"""Requests fail: probe requests errored, or vLLM finished requests with error / abort.

What it detects:
Probe requests that did not complete (connect, TLS, HTTP status, timeout, stall, cut, ...;
counted by outcome and path), and vLLM's own count of requests finished with reason `error` or
`abort` over the window (`vllm:request_success_total{finished_reason}`).

Why it matters:
A failed request is the worst latency there is, and it never shows in a percentile: the stream
statistics exclude failures. Server-side errors mean the engine is failing requests; aborts
mean clients give up (often because answers are too slow) or the gateway cut them.

Evidence:
Stream probe: outcome, HTTP status and error of each measured (non warm-up) request, by path;
requests cancelled by stopping the probe (Ctrl-C) count neither way. Metrics window: finished
requests by reason (error share, abort share; the aborts of the probe's cancelled requests are
taken out). Startup log, else /metrics or the endpoints: which engine served, for its names. The
gateway view: which gateway, for a hung gateway's connect timeout.

Remediation:
By the dominant failure: HTTP 429 / 502 / 503 that the gateway answered itself (its own error page,
`x-envoy-overloaded`) -> the gateway's limit (`gateway_limit`, LD309 names it); HTTP 429 / 503 -> capacity (`replicas`); 401 / 403 -> `api_key`;
404 -> the served model name (`served_model_name`) when the body names the model, else the route
(`route`: `--route responses` against a server without `/v1/responses`); 400 / 413 / 422 -> the request (`max_model_len`
when the body says the prompt is too long, else the payload); 5xx -> the engine log
(`vllm_server`); connect / dns / tls -> `endpoint_url` (the other scheme when the port speaks it);
a gateway with no response head within the bound its direct path sets -> the gateway hop
(`gateway_upstream`); a server that accepted and answered nothing at all (no byte to GET /version in its whole
`--timeout`, no response head to the probe's requests) -> hung: restart it and give its health check a
timeout (`restart_and_health_check`); the same silence on the gateway path is the gateway or its upstream
(`hung-gateway`: a gateway waiting to connect to an engine it cannot reach, e.g. nginx's 60 s
`proxy_connect_timeout` over a 10 s `--timeout`) -> the engine address it reaches and its connect timeout,
in its family's terms (`proxy_connect_timeout` on nginx; `checklib.CONNECT_TIMEOUTS`); a head dripped past its deadline -> the server (`endpoint_url`); cut ->
`proxy_read_timeout`; timeout / stall -> the latency findings (`replicas` when queueing); metrics
errors -> `vllm_server`; metrics aborts -> the clients' timeout (`client_timeout`). A request cut
by the user's own `--deadline` is no failure of the target (censored at that time): it counts
neither way.

Options:
max_failure_share: failed probe requests / measured ones at which it fires (vllm-doctor 0.6.0's
    default)
max_error_share: finished requests with reason error / all finished at which it fires (vllm-doctor
    0.6.0's default)
max_abort_share: finished requests with reason abort / all finished at which it fires (vllm-doctor
    0.6.0's default)

Example:
LD501 error-rate: 3 of 16 probe requests failed (gateway: http-status 503 x3); vLLM finished 4 of
40 requests with error (10 %) -> replicas: add capacity or lower offered load.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import engine_flag, gateway_identity, gateway_refusal, hung_gateway_remediation, metric_read, rerun
from doctor.derive.engine import UNIDENTIFIED, EngineIdentity
from doctor.derive.gateway import GatewayView
from doctor.derive.metrics_window import MetricsWindow
from doctor.engines.names import display, engine_part
from doctor.evidence import Bundle, ProbePath, RequestTrace
from doctor.evidence.stream import (
    CANCELLED,
    CLIENT_STALL,
    DEADLINE,
    DIRECT_BASIS,
    HEAD_TIMEOUT,
    NOT_THE_TARGETS,
    SILENT_BASIS,
)
from doctor.foundation.units import fmt_pct
from doctor.model import Cause, EvidenceValue, Remediation, Severity, SymptomClass

#: (setting, suggested, where, why) per failure key: an outcome, or "http-<status>" / "http-4xx" / "http-5xx".
#: ``{engine}`` is the serving engine's name, ``{engine_server}`` its server ("the vLLM server") and
#: ``{max_model_len}`` its flag for it (``_spelled``).
CAPACITY = (
    "replicas",
    "add capacity or lower offered load",
    "the deployment (replica count) or the clients' load",
)
ENGINE_LOG = ("vllm_server", "fix the error in the engine log", "{engine_server} (its log)")
URL = "the --engine / --gateway URL and the network to it"
FIXES: dict[str, tuple[str, str, str, str]] = {
    "http-429": (*CAPACITY, "the server or gateway rate-limits: it is saturated"),
    "http-503": (*CAPACITY, "the server is overloaded or not ready"),
    "http-401": (
        "api_key",
        "the key the server expects",
        "the client's Authorization header",
        "the server rejects the credentials sent",
    ),
    "http-403": (
        "api_key",
        "the key the server expects",
        "the client's Authorization header",
        "the server rejects the credentials sent",
    ),
    "http-404": (
        "served_model_name",
        "the model id /v1/models lists",
        "the request's model",
        "the model name does not exist",
    ),
    "http-404-route": (
        "route",
        "a route the server serves (--route chat or completions; vLLM serves responses from 0.10)",
        "the probe's --route, or the gateway's routes",
        "the server has no such route",
    ),
    "http-4xx": (
        "request_payload",
        "a request the server accepts (see the body excerpt)",
        "the request body (--payload)",
        "the server rejects the request",
    ),
    "http-too-long": (
        "max_model_len",
        "at least the prompt + max_tokens sent",
        "{max_model_len}",
        "the prompt is longer than the model accepts",
    ),
    "http-5xx": (*ENGINE_LOG, "the server failed the request"),
    "gateway-refused": (
        "gateway_limit",
        "raise the gateway's own connection / request limit (see gateway-connection-cap, LD309)",
        "the gateway in front of the engine",
        "the gateway answered itself (its own limit), so the requests never reached the engine",
    ),
    "connect": ("endpoint_url", "a reachable host and port", URL, "the connection could not be opened"),
    "dns": ("endpoint_url", "a resolvable host name", URL, "the host name does not resolve"),
    "tls": ("endpoint_url", "the right scheme and a trusted certificate", URL, "the TLS handshake failed"),
    "tls-http": ("endpoint_url", "http:// (the port speaks plain HTTP)", URL, "an https:// URL on a plain-HTTP port"),
    "tls-https": ("endpoint_url", "https:// (the port speaks TLS)", URL, "an http:// URL on a TLS port"),
    "gateway-silent": (
        "gateway_upstream",
        "a gateway that reaches the engine: its upstream address, health and error log",
        "the gateway (--gateway) hop",
        ("the gateway accepts connections but sent no response head (or no first token after it) within the "
         "bound its direct path sets (see the first error), while the engine answers directly: the gateway hop "
         "is failing, not capacity"),
    ),
    "hung": (
        "restart_and_health_check",
        "restart the server now; make its liveness check a request with a timeout (e.g. GET /version within 5 s)",
        "the server at the URL (restart) and the orchestrator's / load balancer's health check for it",
        ("the server accepts connections and answers nothing at all: not GET /version, not /metrics, not the "
         "response head of a completion. Its process is hung (a blocked event loop, a deadlock, a stopped "
         "process), which no latency setting fixes; a health check without a timeout keeps it in rotation"),
    ),
    "head-timeout": (
        "endpoint_url",
        "a server that sends its response head at once",
        "the server at the URL, or what sits in the network to it",
        "the response head did not complete within its deadline (sent a little at a time)",
    ),
    "cut": (
        "proxy_read_timeout",
        "above the longest silence (see LD305)",
        "the gateway's streaming route",
        "streams were closed mid-answer",
    ),
    "timeout": (*CAPACITY, "answers took longer than the probe's deadline (see the latency findings)"),
    "stall": (*CAPACITY, "streams went silent past the stall timeout (see the latency findings)"),
    "error": (*ENGINE_LOG, "{engine} finished requests with an internal error"),
    "abort": (
        "client_timeout",
        "above the answer times users see (or make answers faster)",
        "the clients' request timeout",
        "clients gave up on requests",
    ),
}
GENERIC = (*ENGINE_LOG, "requests failed")


def failure_key(req: RequestTrace, direct_answers: bool = False) -> str:
    """The key a failure's fix is looked up by. A refusal the gateway made itself is its own key while
    the direct path answers (with the engine down, the gateway's error page is about the engine)."""
    if req.outcome == "tls" and req.scheme_mismatch in ("http", "https"):
        return f"tls-{req.scheme_mismatch}"
    if req.outcome == HEAD_TIMEOUT and req.head_deadline_basis == SILENT_BASIS:
        return "hung-gateway" if req.path == ProbePath.GATEWAY else "hung"
    if req.path == ProbePath.GATEWAY and (
            (req.outcome == HEAD_TIMEOUT and req.head_deadline_basis == DIRECT_BASIS)
            or (req.outcome == "stall" and req.first_token_deadline_s is not None)):
        return "gateway-silent"
    if direct_answers and gateway_refusal(req) is not None:
        return "gateway-refused"
    if req.outcome == "http-status" and req.status:
        if req.status == 404 and "model" not in (req.body_excerpt or "").lower():  # {"detail": "Not Found"}
            return "http-404-route"
        if f"http-{req.status}" in FIXES:
            return f"http-{req.status}"
        if (
            req.status in (400, 413, 422)
            and "max" in (req.body_excerpt or "").lower()
            and "length" in (req.body_excerpt or "").lower()
        ):
            return "http-too-long"
        return "http-5xx" if req.status >= 500 else "http-4xx"
    return req.outcome


@dataclass(frozen=True)
class Found:
    """The failures: the probe's measured and failed requests (counted by path and failure key, in
    the order first seen) and the first error text; the engine's finished requests with error and
    abort (less the probe's own cancelled ones); and the dominant failure ``key`` its fix is looked
    up by (with, for a hung gateway, how long its GET /version went unanswered)."""

    engine: str
    measured: int
    failed: int
    by: tuple[tuple[tuple[str, str], int], ...]
    excerpt: str | None
    finished: float
    errors: float
    aborts: float
    error_share: float
    abort_share: float
    cancelled: int
    finished_metric: str
    probe_bad: bool
    key: str
    unanswered_s: float | None


@check(code="LD501", name="error-rate", symptom=SymptomClass.GENERAL, cause=Cause.ERRORS)
def error_rate(
    bundle: Bundle,
    metrics_window: MetricsWindow | None = None,
    engine: EngineIdentity = UNIDENTIFIED,
    gateway: GatewayView | None = None,
    *,
    max_failure_share: float = 0.05,
    max_error_share: float = 0.05,
    max_abort_share: float = 0.10,
) -> Result:
    requests = bundle.stream.requests if bundle.stream else []
    # A request still streaming when the user stopped the probe (Ctrl-C) or when their --deadline
    # ended it, or one the probing client froze through, neither succeeded nor failed: it is left
    # out, and so is the abort vLLM counted when its connection closed.
    void = Counter(r.outcome for r in requests if r.outcome in NOT_THE_TARGETS)
    cancelled = sum(void.values())
    measured = [r for r in requests if not r.warmup and r.outcome not in NOT_THE_TARGETS]
    reasons = dict(metrics_window.finished_by_reason) if metrics_window is not None else {}
    if cancelled and "abort" in reasons:
        reasons["abort"] = max(reasons["abort"] - cancelled, 0.0)
    finished = sum(reasons.values())
    if not measured and not finished:
        return NotApplicable(_nothing_completed(tuple(void.items())))
    failed = [r for r in measured if not r.ok]
    fail_share = len(failed) / len(measured) if measured else 0.0
    errors, aborts = reasons.get("error", 0.0), reasons.get("abort", 0.0)
    error_share = errors / finished if finished else 0.0
    abort_share = aborts / finished if finished else 0.0
    probe_bad = bool(failed) and fail_share >= max_failure_share
    key = "error" if error_share >= max_error_share else "abort"
    by: Counter[tuple[str, str]] = Counter()
    if probe_bad:
        direct_answers = any(r.ok and r.path == ProbePath.DIRECT for r in measured)
        by = Counter((str(r.path), failure_key(r, direct_answers)) for r in failed)
        key = by.most_common(1)[0][0][1]
    found = Found(
        engine=engine.id, measured=len(measured), failed=len(failed), by=tuple(by.items()),
        excerpt=next((r.body_excerpt for r in failed if r.body_excerpt), None) or next(
            (r.error for r in failed if r.error), None),
        finished=finished, errors=errors, aborts=aborts, error_share=error_share, abort_share=abort_share,
        cancelled=cancelled, finished_metric=metric_read(metrics_window, "finished_by_reason"), probe_bad=probe_bad,
        key=key, unanswered_s=_unanswered_s(bundle, "gateway") if key == "hung-gateway" else None,
    )
    if not (probe_bad or error_share >= max_error_share or abort_share >= max_abort_share):
        return Pass(_quiet(found))
    server_failing = probe_bad or error_share >= max_error_share
    return Fire(
        title="Requests fail",
        summary=_summary(found),
        remediation=_remediation(found, gateway),
        severity=Severity.CRITICAL if server_failing else Severity.WARNING,
        evidence=_evidence(found) + (gateway_identity(gateway) if key == "hung-gateway" else []),
    )


def _unanswered_s(bundle: Bundle, role: str) -> float | None:
    """The seconds the endpoints probe's GET /version waited on ``role``'s target for not a byte."""
    endpoints = bundle.endpoints.endpoints if bundle.endpoints else []
    return next((ep.unanswered_s for ep in endpoints if ep.role == role and ep.unanswered_s is not None), None)


def _spelled(text: str, engine: str) -> str:
    """A ``FIXES`` text in the serving engine's names (neutral when it is unidentified)."""
    return text.format(engine=display(engine), engine_server=engine_part(engine, "server"),
                       max_model_len=engine_flag(engine, "max_model_len"))


def _nothing_completed(void: tuple[tuple[str, int], ...]) -> str:
    said = {CANCELLED: "cancelled when the probe was stopped", CLIENT_STALL: "lost to a freeze of the client itself",
            DEADLINE: "cut by the --deadline (no failure of the target)"}
    stopped = f" ({', '.join(f'{n} {said[k]}' for k, n in void)})" if void else ""
    return f"no completed probe request{stopped} and no finished request in the metrics window"


def _quiet(found: Found) -> str:
    return (f"{found.failed} of {found.measured} probe requests failed; {display(found.engine)} errors "
            f"{fmt_pct(found.error_share)}, aborts {fmt_pct(found.abort_share)} of {found.finished:.0f} finished")


def _summary(found: Found) -> str:
    parts: list[str] = []
    if found.probe_bad:
        detail = ", ".join(f"{path}: {k} x{n}" for (path, k), n in Counter(dict(found.by)).most_common())
        parts.append(f"{found.failed} of {found.measured} probe requests failed ({detail})")
    if found.finished:
        parts.append(
            f"{display(found.engine)} finished {found.errors:.0f} of {found.finished:.0f} requests with error "
            f"({fmt_pct(found.error_share)}), {found.aborts:.0f} aborted ({fmt_pct(found.abort_share)})"
        )
    return "; ".join(parts)


def _evidence(found: Found) -> list[EvidenceValue]:
    evidence: list[EvidenceValue] = []
    if found.probe_bad:
        evidence.append(EvidenceValue("failed probe requests", found.failed, "", f"stream: n={found.measured} measured"))
        evidence += [EvidenceValue(f"{path} {k}", n, "requests", "stream: request outcomes") for (path, k), n in found.by]
        if found.excerpt:
            evidence.append(EvidenceValue("first error", found.excerpt[:200], "", "stream: error / body excerpt"))
    if found.finished:
        metric = found.finished_metric
        evidence += [
            EvidenceValue("finished with error", found.errors, "requests",
                          f"metrics: {metric}{{finished_reason=error}} delta"),
            EvidenceValue("finished with abort", found.aborts, "requests",
                          f"metrics: {metric}{{finished_reason=abort}} delta"
                          + (f", less the {found.cancelled} probe requests cancelled by stopping it"
                             if found.cancelled else "")),
            EvidenceValue("finished", found.finished, "requests", f"metrics: {metric} delta"),
        ]
    return evidence


def _remediation(found: Found, gateway: GatewayView | None) -> Remediation:
    verify = rerun("every probe request ok and no error / abort finish reasons in the window")
    key = found.key
    if key == "hung-gateway":
        remediation = hung_gateway_remediation(gateway, found.unanswered_s, verify)
        remediation.why = f"The dominant failure is {key}: {remediation.why}"
        return remediation
    setting, suggested, where, why = (_spelled(text, found.engine) for text in FIXES.get(key, GENERIC))
    return Remediation(setting=setting, suggested=suggested, where=where,
                       why=f"The dominant failure is {key}: {why}.", verify=verify)
