"""The gateway cuts streams that stay silent for a fixed time.

What it detects:
Requests through the gateway end early (the connection closes mid-stream, or the gateway
answers 504 before the first token) after the same idle time each: the gateway's read timeout
between two upstream reads (nginx `proxy_read_timeout`, 60 s by default; a load balancer's idle
timeout) fired while vLLM was still queueing, prefilling or stalled.

Why it matters:
Long prompts, deep queues and preemption stalls produce silences longer than the timeout; the
user gets a truncated answer or an error although the engine would have finished. Raising
engine capacity shortens the silences, but the timeout is what turns them into failures.

Evidence:
Stream probe, gateway path: requests with outcome `cut` / `stream-error`, or HTTP 504, with the
idle time before the cut (the moment the probe saw the close minus the last read or the headers;
for a 504, the headers minus the send). The idle times agree with each other, or with the default of a gateway in the path
(`doctor.checklib.IDLE_TIMEOUTS`: nginx and the ingress controllers 60 s, Cloudflare 100 s, AWS
ALB 60 s, Kong 60 s, Apache httpd 60 s, Varnish 60 s, a Python edge's httpx client 5 s), and the direct path was not cut. The
gateway is identified from its responses (the `gateway` view), cut ones included.

Remediation:
Raise the idle timeout of the hop that cut above the longest silence the engine produces, in
its own terms: nginx `proxy_read_timeout 300s;` in the streaming location (setting
`proxy_read_timeout`), the Ingress annotations `nginx.ingress.kubernetes.io/proxy-read-timeout`
or `nginx.org/proxy-read-timeout`, the ALB attribute `idle_timeout.timeout_seconds`, Kong's
Service `read_timeout`, Envoy's `stream_idle_timeout`, LiteLLM's `stream_timeout`, Apache httpd's
`ProxyTimeout`, HAProxy's `timeout server`, Varnish's `between_bytes_timeout`, lighttpd's
`read-timeout`, Caddy's `read_timeout`, Traefik's `respondingTimeouts`; an unidentified gateway
gets these as possibilities (setting `upstream idle timeout`); behind
Cloudflare (100 s, fixed below Enterprise) send a first event at once and keep every silence
shorter. And shorten the silences themselves (queueing / preemption findings).

Options:
min_idle_s: shorter idles are not timeouts
idle_tolerance: idle times within this relative spread count as one fixed timeout
suggested_s: the floor of the suggested timeout; the suggestion is at least twice the observed idle

Example:
LD305 proxy-read-timeout: 2 of 8 gateway requests cut after 60.0 s idle (n=2, nginx default
proxy_read_timeout 60 s); direct path: none cut, longest gap 71.2 s -> `proxy_read_timeout 300s;`.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import gateway_identity, idle_timeout_for, idle_timeout_remediation, rerun
from doctor.derive.gateway import GatewayView
from doctor.evidence import ProbePath, RequestTrace, StreamEvidence
from doctor.foundation.units import fmt_seconds
from doctor.model import Cause, EvidenceValue, Remediation, Severity, SymptomClass

CUT_OUTCOMES = ("cut", "stream-error")


def idle_before_cut(req: RequestTrace) -> float | None:
    """Seconds of silence before the gateway gave up on this request, or ``None`` if it did not.

    A cut is dated by ``t_failed`` (when the probe saw the connection close); ``t_end`` is the
    last read with data, which older bundles hold instead.
    """
    end = req.t_failed if req.t_failed is not None else req.t_end
    if req.outcome in CUT_OUTCOMES and end is not None:
        marks = [t for t in (req.t_headers, req.t_sent, *(r.t for r in req.reads)) if t is not None]
        return end - max(marks) if marks else None
    if req.outcome == "http-status" and req.status == 504:
        answered = req.t_headers if req.t_headers is not None else end
        start = req.t_sent if req.t_sent is not None else req.t_scheduled
        return answered - start if answered is not None else None
    return None


@dataclass(frozen=True)
class Found:
    """The gateway requests cut after a long silence (of those sent through it) and the median and
    longest silence before the cut, the gateway's known timeout that matches (``known``, of
    ``family``), the direct path's longest silence (of ``direct`` requests), and the timeout to set."""

    through: int
    cut: int
    idle: float
    longest: float
    family: str | None
    known: str | None
    direct: int
    direct_gap: float | None
    suggested: float


@check(code="LD305", name="proxy-read-timeout", symptom=SymptomClass.PROXY_ONLY, cause=Cause.PROXY_TIMEOUT)
def proxy_read_timeout(
    stream: StreamEvidence,
    gateway: GatewayView | None = None,
    *,
    min_idle_s: float = 5.0,
    idle_tolerance: float = 0.2,
    suggested_s: float = 300.0,
) -> Result:
    measured = [r for r in stream.requests if not r.warmup]
    through = [r for r in measured if r.path == ProbePath.GATEWAY]
    if not through:
        return NotApplicable("no request went through the gateway (pass --gateway)")
    idles = [i for i in (idle_before_cut(r) for r in through) if i is not None and i >= min_idle_s]
    if not idles:
        return Pass(_none_cut(len(through)))
    direct = [r for r in measured if r.path == ProbePath.DIRECT]
    direct_cut = [r for r in direct if idle_before_cut(r) is not None]
    if direct_cut:
        return Pass(_direct_cut_too(len(direct_cut)))
    lo, hi = min(idles), max(idles)
    family, known = idle_timeout_for(gateway, lo, hi, idle_tolerance)
    if len(idles) < 2 and known is None:
        return Pass(_one_cut(hi))
    if hi > lo * (1 + idle_tolerance) and known is None:
        return Pass(_not_fixed(lo, hi))
    found = Found(
        through=len(through), cut=len(idles), idle=sorted(idles)[len(idles) // 2], longest=hi, family=family,
        known=known, direct=len(direct), direct_gap=max((g for r in direct for g in _gaps(r)), default=None),
        suggested=max(suggested_s, math.ceil(2 * hi / 10) * 10),
    )
    return Fire(
        title="The gateway cuts streams after a fixed idle time",
        summary=_summary(found),
        remediation=_remediation(found, gateway),
        severity=Severity.CRITICAL,
        evidence=_evidence(found) + gateway_identity(gateway),
    )


def _gaps(req: RequestTrace) -> list[float]:
    """Silences of a request: send to first token, then between tokens."""
    times = [req.t_sent if req.t_sent is not None else req.t_scheduled, *(t.t for t in req.tokens)]
    return [b - a for a, b in itertools.pairwise(times)]


def _none_cut(through: int) -> str:
    return f"no gateway request was cut after a long silence (n={through})"


def _direct_cut_too(direct_cut: int) -> str:
    return f"{direct_cut} direct request(s) were cut too: the gateway is not the cause"


def _one_cut(idle: float) -> str:
    return f"one gateway request cut after {fmt_seconds(idle)} idle: too few to call it a fixed timeout"


def _not_fixed(lo: float, hi: float) -> str:
    return f"gateway cuts after {fmt_seconds(lo)} to {fmt_seconds(hi)} idle: not one fixed timeout"


def _summary(found: Found) -> str:
    summary = (f"{found.cut} of {found.through} gateway requests cut after {fmt_seconds(found.idle)} idle "
               f"(n={found.cut}" + (f", {found.known}" if found.known else "") + ")")
    if found.direct_gap is not None:
        summary += f"; direct path: none cut, longest silence {fmt_seconds(found.direct_gap)}"
    return summary


def _evidence(found: Found) -> list[EvidenceValue]:
    return [
        EvidenceValue("gateway requests cut", found.cut, "", f"stream: gateway, n={found.through}"),
        EvidenceValue("idle before cut (median)", round(found.idle, 3), "s", f"stream: gateway, n={found.cut}"),
        EvidenceValue("idle before cut (max)", round(found.longest, 3), "s", f"stream: gateway, n={found.cut}"),
        EvidenceValue("direct longest silence", found.direct_gap, "s", f"stream: direct, n={found.direct}"),
    ]


def _remediation(found: Found, gateway: GatewayView | None) -> Remediation:
    return idle_timeout_remediation(gateway, found.family, found.idle, found.suggested,
                                    rerun("no gateway request cut; the same requests complete as on the direct path"))
