"""What went wrong with a stream request, in one outcome and one sentence, and per path in the evidence errors.

A failure is evidence, never a crash: ``failure`` turns whatever a request raised into its
``RequestTrace.outcome`` and the sentence a report shows, and ``summarise`` turns a run's failed
requests into one ``EvidenceError`` per kind of failure per path. Kept apart from the request
that raises and the run that collects, so the wording of a failure is read in one place, and
changing it never means reading how a stream is read.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Mapping, Sequence

import httpx

from doctor.evidence import EvidenceError, ProbePath, RequestTrace
from doctor.evidence.stream import CLIENT_STALL, DEADLINE, HEAD_TIMEOUT, NOT_THE_TARGETS, WEDGED
from doctor.foundation.units import fmt_seconds
from doctor.probes import payload as payloads
from doctor.probes.deadlines import HeadBound, stall_head_bound
from doctor.probes.plan import CollectConfig
from doctor.probes.selfcheck import SelfCheck
from doctor.probes.sse import InvalidUtf8, TooLong
from doctor.probes.transport import ReadLog, other_scheme, scheme_line

#: RequestTrace.outcome -> EvidenceError.kind
_ERROR_KIND = {
    "connect": "connect", "dns": "dns", "tls": "tls", "timeout": "timeout", "stall": "timeout",
    HEAD_TIMEOUT: "timeout", "http-status": "http-status", "cut": "cut", "not-a-stream": "malformed",
    "stream-error": "malformed", "no-token": "malformed", "invalid-utf8": "malformed", WEDGED: "timeout",
}


class BoundPassed(Exception):
    """A gateway's response head, or its first token after the head, did not come within the
    ``bound`` its direct path sets (``doctor.probes.deadlines.gateway_head_bound``)."""

    def __init__(self, bound: HeadBound) -> None:
        super().__init__(bound.why)
        self.bound = bound


def failure(exc: Exception, trace: RequestTrace, log: ReadLog, config: CollectConfig,
            check: SelfCheck) -> tuple[str, str]:
    """(outcome, sentence) for an exception raised while sending or reading."""
    if isinstance(exc, BoundPassed):
        came = sum(r.nbytes for r in log.reads)
        if trace.status is not None:  # the head came: it is the first token that did not
            trace.first_token_deadline_s = exc.bound.seconds
            return "stall", (f"no first token in {fmt_seconds(exc.bound.seconds)} of the send {exc.bound.why}; "
                             f"the response head came ({came} byte(s) in all)")
        trace.head_deadline_s, trace.head_deadline_basis = exc.bound.seconds, exc.bound.basis
        return HEAD_TIMEOUT, (f"no response head in {fmt_seconds(exc.bound.seconds)} {exc.bound.why}"
                              + (f"; {came} byte(s) of it came" if came else "; not a byte came"))
    if isinstance(exc, InvalidUtf8):
        return "invalid-utf8", str(exc)
    if isinstance(exc, TooLong):
        trace.truncated = str(exc)
        return "stream-error", str(exc)
    if isinstance(exc, httpx.ConnectTimeout):
        what = "TLS handshake" if "TLS" in str(exc) else "connection"  # the transport's words
        return "timeout", f"no {what} within {config.http.timeout_s:g} s"
    if isinstance(exc, httpx.ReadTimeout):
        return _read_timeout(trace, log, config, check)
    if isinstance(exc, httpx.ConnectError):
        for cause in _causes(exc):
            if isinstance(cause, socket.gaierror):
                return "dns", f"cannot resolve the host: {cause.strerror or cause}"
            if isinstance(cause, ssl.SSLError):
                return "tls", f"TLS handshake failed: {getattr(cause, 'verify_message', None) or cause.reason or cause}"
        return "connect", f"cannot connect: {exc}"
    if isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)):
        where = "before the response headers" if trace.status is None else "mid-stream"
        return "cut", f"the connection was closed {where}: {exc}"
    if isinstance(exc, httpx.TimeoutException):
        return "timeout", f"{type(exc).__name__}: {exc}"
    if isinstance(exc, httpx.DecodingError):
        return "stream-error", f"cannot decode the body: {exc}"
    if isinstance(exc, (httpx.UnsupportedProtocol, httpx.InvalidURL)):
        return "connect", f"bad URL: {exc}"
    return "stream-error", f"{type(exc).__name__}: {exc}"


def _read_timeout(trace: RequestTrace, log: ReadLog, config: CollectConfig, check: SelfCheck) -> tuple[str, str]:
    """(outcome, sentence) of a read that waited out its phase's deadline (``doctor.probes.deadlines``)."""
    stall = config.stall_timeout_s
    head = trace.status is None
    where = "for the response headers" if head else "inside the stream"
    # A read timeout measures the client's wait, not the server's silence: a client that
    # froze past the stall timeout wakes up to a timeout even with the answer in its
    # socket buffer (the timer and the data are handled in the same loop turn).
    last = trace.tokens[-1].t if trace.tokens else trace.t_headers or trace.t_sent or trace.t_scheduled
    now = check.clock.now()
    frozen = check.frozen_within(last, now)
    if now - last - frozen < stall:
        return CLIENT_STALL, (f"the client itself froze for {frozen:.1f} s of the {now - last:.1f} s it waited "
                              f"{where}: the server may well have answered (not counted as the server's)")
    since = sum(r.nbytes for r in log.reads if r.t > last)
    if head:
        bound = stall_head_bound(stall)
        trace.head_deadline_s, trace.head_deadline_basis = bound.seconds, bound.basis
        if since:  # bytes came, the head never completed: a server dripping its head
            return HEAD_TIMEOUT, (f"no complete response head in {fmt_seconds(stall)} ({bound.why}); "
                                  f"{since} byte(s) of it came")
    elif since:  # bytes kept coming, no token among them
        what = "first token" if not trace.tokens else "token"
        return "stall", f"no {what} for {stall:g} s inside the stream, though {since} byte(s) came"
    return "stall", f"no byte for {stall:g} s {where}"



async def check_scheme(config: CollectConfig, schemes: dict[ProbePath, str | None], path: ProbePath,
                       trace: RequestTrace) -> None:
    """Once per path (``schemes`` remembers the answer): when an https:// URL's handshake failed or
    timed out, whether its port speaks plain HTTP; when an http:// URL's connection closed before
    any answer, whether it speaks TLS (``transport.other_scheme``). Either makes the failure the one
    line that says so (``scheme_mismatch``)."""
    base = config.targets()[path]
    scheme = httpx.URL(base).scheme
    handshake = trace.outcome == "tls" or (trace.outcome == "timeout" and "TLS" in (trace.error or ""))
    wrong = {"https": handshake, "http": trace.outcome == "cut" and trace.status is None}.get(scheme, False)
    if not wrong:
        return
    if path not in schemes:
        schemes[path] = await other_scheme(base, config.http.timeout_s)
    spoken = schemes[path]
    if spoken is None:
        return
    trace.outcome, trace.scheme_mismatch = "tls", spoken
    trace.error = scheme_line(base, spoken)


def _causes(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and len(out) < 10:
        out.append(seen)
        seen = seen.__cause__ or seen.__context__
    return out


def route_spec(config: CollectConfig, path: ProbePath) -> str:
    """``POST /v1/chat/completions``, or the gateway's own route as given."""
    route = config.gateway_route
    return route.spec if path == ProbePath.GATEWAY and route is not None else f"POST {payloads.ROUTES[config.route]}"


def summarise(traces: Sequence[RequestTrace], urls: Mapping[ProbePath, str], config: CollectConfig,
              kept: int, cap: int) -> list[EvidenceError]:
    """One error per kind of failure per path (fatal when no request of the path succeeded), and one
    for each way the run measured less than it meant to; ``kept`` over ``cap``: the probe-wide cap cut it."""
    errors: list[EvidenceError] = []
    for path, url in urls.items():
        reqs = [t for t in traces if t.path == path]
        where = f"{route_spec(config, path)} ({path})"
        warm = sum(1 for t in reqs if t.warmup)
        # the warm-ups named, so that the count agrees with the verdict's n, which leaves them out
        sent = f"{len(reqs)} request(s)" + (f" ({warm} of them warm-up)" if warm else "")
        failed: dict[str, list[RequestTrace]] = {}
        for t in reqs:
            if not t.ok and t.outcome not in NOT_THE_TARGETS:  # Ctrl-C (``Bundle.interrupted``), a frozen client
                failed.setdefault(t.outcome, []).append(t)
        no_success = not any(t.ok for t in reqs)
        frozen = [t for t in reqs if t.outcome == CLIENT_STALL]
        if frozen:  # not the target's failure, but the run measured less than it meant to: say so
            errors.append(EvidenceError(
                "stream", url, where, "client",
                f"{len(frozen)} of {sent} not measured: {frozen[0].error}", fatal=False,
            ))
        cut = [t for t in reqs if t.outcome == DEADLINE]
        if cut:  # the user's own deadline, not the target: said, never as the target's failure
            errors.append(EvidenceError(
                "stream", url, where, "timeout",
                f"{len(cut)} of {sent} {cut[0].error}: censored at that time, "
                "not failed by the server (a longer --deadline measures them)", fatal=False,
            ))
        for outcome, group in failed.items():
            first = group[0]
            detail = first.error or outcome
            if first.body_excerpt:
                detail += f": {first.body_excerpt[:200]}"
            errors.append(EvidenceError(
                "stream", url, where, _ERROR_KIND.get(outcome, "internal"),
                f"{len(group)} of {sent} {outcome}: {detail}", fatal=no_success,
            ))
        cut_short = [t for t in reqs if t.ok and t.truncated]
        if cut_short:  # kept as measured, but the rest of each stream was not: say so
            errors.append(EvidenceError(
                "stream", url, where, "malformed",
                f"{len(cut_short)} of {sent} truncated: {cut_short[0].truncated}", fatal=False,
            ))
    if kept > cap:  # the requests cut by it may be of any path: said once
        errors.append(EvidenceError(
            "stream", ", ".join(urls.values()), "read the streams", "malformed",
            f"truncated: the probe kept {cap:,} events and reads over all requests (its cap), "
            f"then stopped reading and sending; {len(traces)} request(s) sent", fatal=False,
        ))
    return errors
