"""The gateway holds the response headers until the first token.

What it detects:
On the direct path the response headers arrive well before the first token (vLLM answers
`200 OK` as soon as it accepts the request), while through the gateway they arrive together
with the first token: the edge withholds the response start until it has a body to send.

Why it matters:
Until the headers arrive the client cannot tell a queued request from a dead server: client and
CDN header timeouts (Cloudflare's 524 until the first byte, load balancers' response-header
timeouts) fire on long prefills, retries pile onto a busy engine, and a "connected" indicator
never shows. Starlette's `GZipMiddleware` does this (it waits for the first body to decide on
compression), and so does an edge that awaits the upstream's first token before returning its
response.

Evidence:
Stream probe on both paths: headers-to-first-token p50 per path against that path's TTFT p50
(the share of the wait spent after the headers), and the gateway's time to headers. Every
measured gateway request must hold its headers (a client whose event loop stalls stamps headers
and first token together only in some requests). Felt only when the gateway's TTFT p50 is also
above the direct one's by more than `min_held_s` and the direct path's spread (p90 - p50);
otherwise a risk: listed under a healthy headline, never its class.

Remediation:
Send the response start as soon as the upstream's arrives (setting `gateway_response_start`), in
the identified gateway's terms (`doctor.checklib.response_start_remediation`): Starlette/FastAPI:
no `GZipMiddleware` on the streaming route, and return the `StreamingResponse` before awaiting the
first token; nginx `gzip off;` and `proxy_buffering off;` (only the latter when its answer was not
compressed: gzip then holds nothing); lighttpd `server.stream-response-body
= 2`; HAProxy `option http-no-delay`; Varnish `beresp.do_stream` left true; Caddy no
`buffer_responses`; an unidentified gateway: the usual suspects' settings, as possibilities.

Options:
direct_share: on the direct path at least this share of TTFT comes after the headers
held_share: through the gateway at most this share does, in every request
min_held_s: the gateway's wait for headers below this is too short to matter

Example:
LD307 headers-held: the gateway (uvicorn) sends its headers with the first token (0 ms before it,
TTFT p50 212 ms, n=3) while vLLM sends them 198 ms before it -> do not wrap the streaming route
in GZipMiddleware.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import PathPair, gateway_identity, measured_pair, rerun, response_start_remediation, who_answered
from doctor.derive.gateway import GatewayView
from doctor.derive.stream_stats import PathStats, StreamStats
from doctor.foundation.units import fmt_seconds
from doctor.model import Cause, EvidenceValue, Remediation, Severity, SymptomClass


def _after_headers(ps: PathStats) -> float | None:
    """The share of TTFT p50 that came after the response headers, or None without both."""
    h2t, ttft = ps.headers_to_first_token.p50, ps.ttft.p50
    return None if h2t is None or not ttft else h2t / ttft


def _request_shares(ps: PathStats) -> list[float]:
    """Per measured request, the share of its TTFT that came after its headers."""
    return [r.headers_to_first_token / r.ttft for r in ps.requests
            if not r.warmup and r.outcome == "ok" and r.headers_to_first_token is not None and r.ttft]


@dataclass(frozen=True)
class Found:
    """Both paths' share of TTFT after the headers, the gateway's largest share in one request, who
    answered, and whether users felt it (the gateway's TTFT above the direct one beyond noise)."""

    pair: PathPair
    direct_share: float
    gateway_share: float
    latest: float
    gateway: str
    felt: bool


@check(code="LD307", name="headers-held", symptom=SymptomClass.PROXY_ONLY, cause=Cause.BUFFERING)
def headers_held(
    stream_stats: StreamStats, gateway: GatewayView | None = None,
    *,
    direct_share: float = 0.5,
    held_share: float = 0.1,
    min_held_s: float = 0.02,
) -> Result:
    pair = measured_pair(stream_stats)  # raises NotApplicable unless both paths were measured
    d, g = pair.direct, pair.gateway
    d_share, g_share = _after_headers(d), _after_headers(g)
    if d_share is None or g_share is None:
        return NotApplicable("no response-header time on one of the paths")
    if d_share < direct_share:
        return NotApplicable(_engine_late(d_share))
    held = (g.ttft.p50 or 0.0) - (g.headers_to_first_token.p50 or 0.0)
    # every request, not the median: an edge that holds the response start holds it each time,
    # while a client whose event loop stalled stamps headers and first token together only now and then
    found = Found(pair, d_share, g_share, max(_request_shares(g), default=1.0), who_answered(gateway)[1],
                  pair.gateway_adds_ttft(min_held_s))
    if found.latest > held_share or held < min_held_s:
        return Pass(_headers_early(found))
    return Fire(
        title="The gateway holds the response headers until the first token",
        summary=_summary(found),
        remediation=_remediation(found, gateway),
        severity=Severity.WARNING,
        felt=found.felt,
        evidence=_evidence(found) + gateway_identity(gateway),
    )


def _engine_late(direct_share: float) -> str:
    return f"the engine itself sends its headers late ({direct_share:.0%} of TTFT after them): nothing to compare"


def _headers_early(found: Found) -> str:
    g_h2t = found.pair.gateway.headers_to_first_token.p50 or 0.0
    return (f"the gateway's headers arrive {fmt_seconds(g_h2t)} before its first token at p50 "
            f"({found.gateway_share:.0%} of TTFT; up to {found.latest:.0%} in one request)")


def _summary(found: Found) -> str:
    d, g = found.pair.direct, found.pair.gateway
    summary = (f"{found.gateway} sends its headers with the first token ({fmt_seconds(g.headers_to_first_token.p50 or 0.0)} "
               f"before it, TTFT p50 {fmt_seconds(g.ttft.p50 or 0.0)}, n={g.ttft.n}) while the engine sends them "
               f"{fmt_seconds(d.headers_to_first_token.p50 or 0.0)} before it")
    if not found.felt:
        summary += (f"; its TTFT p50 is not above the direct {fmt_seconds(d.ttft.p50 or 0.0)} beyond noise: a risk "
                    "users do not feel yet (a client that waits for the headers, or a slower first token, would)")
    return summary


def _remediation(found: Found, gateway: GatewayView | None) -> Remediation:
    return response_start_remediation(
        gateway, rerun("the gateway's headers well before its first token, as on the direct path"),
        compressed=any(k.lower() == "content-encoding" for k in found.pair.gateway.headers))


def _evidence(found: Found) -> list[EvidenceValue]:
    d, g = found.pair.direct, found.pair.gateway
    return [
        EvidenceValue("gateway headers to first token p50", g.headers_to_first_token.p50 or 0.0, "s",
                      f"stream: gateway, n={g.headers_to_first_token.n}"),
        EvidenceValue("gateway TTFT p50", g.ttft.p50 or 0.0, "s", f"stream: gateway, n={g.ttft.n}"),
        EvidenceValue("gateway share of TTFT after the headers", round(found.gateway_share, 4), "", "stream: gateway"),
        EvidenceValue("direct headers to first token p50", d.headers_to_first_token.p50 or 0.0, "s",
                      f"stream: direct, n={d.headers_to_first_token.n}"),
        EvidenceValue("direct share of TTFT after the headers", round(found.direct_share, 4), "", "stream: direct"),
    ]
