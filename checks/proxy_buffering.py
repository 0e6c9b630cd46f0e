"""Gateway buffers the token stream.

What it detects:
The gateway (reverse proxy, API gateway, middleware) holds streamed tokens back and releases
them in bursts: each socket read on the gateway path carries many SSE events where the direct
path carries one, the first token arrives far later than on the direct path, and the gaps
between tokens collapse to ~0 with a few large gaps between bursts (a short answer arrives in
one piece at the end).

Why it matters:
Users see nothing, then a block of text: TTFT through the gateway is the time to fill the
proxy's buffer (4 or 8 KiB with nginx defaults, 16 KiB or the whole answer in other setups)
instead of the engine's TTFT, and the "streaming" feel is gone. The engine is healthy; tuning
it changes nothing.

Evidence:
Stream probe on both paths (`--engine` and `--gateway`): events per read (p50 over reads that
completed an event), bytes per read, TTFT p50, inter-token gap p50, first-to-last-token p50,
each gateway vs direct. The gateway is named by the `gateway` view (its `Server` / `Via` headers
and tells such as `x-envoy-*`, `x-kong-*`, `cf-ray`, over every response, or `--gateway-kind`).

Remediation:
nginx: `proxy_buffering off;` in the location that proxies the streaming route. Also set
`proxy_http_version 1.1;` and `proxy_set_header Connection "";`: nginx asks its upstream in
HTTP/1.0 by default, and an upstream hop that then close-delimits the body (another nginx, a
relay; vLLM itself stays chunked) is relayed in buffer-sized bursts, while a chunked upstream
keeps flowing. An upstream app can instead send `X-Accel-Buffering: no` per response, unless
the gateway sets `proxy_ignore_headers X-Accel-Buffering`. F5 NGINX Ingress (buffers by
default): `nginx.org/proxy-buffering: "False"`; community ingress-nginx (does not, unless told):
`nginx.ingress.kubernetes.io/proxy-buffering: "off"`; Envoy: ext_proc response body mode
STREAMED or NONE, no buffer filter; Kong: the Route's `response_buffering: false`; Traefik: no
`buffering` middleware; Cloudflare: `Content-Type: text/event-stream`, POST, no caching; AWS ALB:
not a Lambda target; a Starlette/FastAPI edge: relay each chunk, no GZipMiddleware or old
BaseHTTPMiddleware; lighttpd: `server.stream-response-body = 2`; HAProxy: `option
http-no-delay`; Varnish: `beresp.do_stream` left true; Caddy: no `buffer_responses`; Apache httpd:
`flushpackets=on` (`doctor.checklib.buffering_remediation`). A gateway no header identifies:
setting `response buffering`, with these switches as the possibilities.

Options:
burst_factor: gateway events per read p50 / direct's; the signature, since events read together
    share one arrival time, so bursts collapse the gaps by themselves
collapse_share: a gateway first-to-last-token time below this share of direct's means answers arrive
    in one piece
critical_ttft_factor: gateway TTFT p50 / direct at which, like one-piece answers, the finding is
    critical; a warning instead when the stream is also compressed, since stream-compression (LD302)
    then names the more specific cause

Example:
LD301 proxy-buffering: gateway delivers 16.0 events per read (4104 B) vs 1.0 direct; TTFT p50
694 ms (n=2) vs 89 ms direct (7.8x); gap p50 0 ms vs 30 ms -> nginx: `proxy_buffering off;`.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import (
    PathPair,
    buffering_remediation,
    gateway_headers,
    gateway_identity,
    measured_pair,
    rerun,
    stream_encoding,
)
from doctor.derive.gateway import GatewayView
from doctor.derive.stream_stats import StreamStats
from doctor.evidence import EndpointsEvidence
from doctor.foundation.units import fmt_seconds
from doctor.model import Cause, EvidenceValue, Remediation, Severity, SymptomClass


@dataclass(frozen=True)
class Found:
    """The gateway's reads against the direct path's: events per read (p50), the TTFT ratio
    (``inf`` without a direct TTFT), whether short answers arrived in one piece, and the
    compression the stream also carries, if any."""

    pair: PathPair
    direct_epr: float
    gateway_epr: float
    ttft_ratio: float
    one_piece: bool
    compressed: str | None


@check(code="LD301", name="proxy-buffering", symptom=SymptomClass.PROXY_ONLY, cause=Cause.BUFFERING)
def proxy_buffering(
    stream_stats: StreamStats,
    endpoints: EndpointsEvidence | None = None,
    gateway: GatewayView | None = None,
    *,
    burst_factor: float = 4.0,
    collapse_share: float = 0.1,
    critical_ttft_factor: float = 5.0,
) -> Result:
    pair = measured_pair(stream_stats)  # raises NotApplicable unless both paths were measured
    d, g = pair.direct, pair.gateway
    d_epr, g_epr = d.events_per_read.p50, g.events_per_read.p50
    if d_epr is None or g_epr is None:
        return NotApplicable("the stream probe recorded no socket reads to compare")
    burst_ratio = g_epr / max(d_epr, 1.0)
    d_ttft, g_ttft = d.ttft.p50 or 0.0, g.ttft.p50 or 0.0
    ttft_ratio = g_ttft / d_ttft if d_ttft > 0 else float("inf")
    if burst_ratio < burst_factor:
        return Pass(_no_bursts(g_epr, d_epr))

    d_f2l, g_f2l = d.first_to_last_token.p50, g.first_to_last_token.p50
    one_piece = bool(d_f2l and g_f2l is not None and g_f2l <= collapse_share * d_f2l)
    severity = Severity.CRITICAL if ttft_ratio >= critical_ttft_factor or one_piece else Severity.WARNING
    compressed = stream_encoding(gateway_headers(g, endpoints))
    if compressed:
        # A compressor holds events back by itself: stream-compression (LD302) names that cause,
        # so this finding steps down to let it lead.
        severity = Severity.WARNING
    found = Found(pair, d_epr, g_epr, ttft_ratio, one_piece, compressed)
    return Fire(
        title="The gateway buffers the token stream",
        summary=_summary(found),
        remediation=_remediation(found, gateway),
        severity=severity,
        evidence=_evidence(found) + gateway_identity(gateway),
    )


def _no_bursts(gateway_epr: float, direct_epr: float) -> str:
    return f"the gateway delivers {gateway_epr:.1f} events per read vs {direct_epr:.1f} direct: no bursts"


def _summary(found: Found) -> str:
    d, g = found.pair.direct, found.pair.gateway
    ttft_txt = f"{found.ttft_ratio:.1f}x" if found.ttft_ratio != float("inf") else "n/a"
    summary = (
        f"gateway delivers {found.gateway_epr:.1f} events per read ({g.bytes_per_read.p50 or 0.0:.0f} B, "
        f"n={g.events_per_read.n} reads) vs {found.direct_epr:.1f} direct; TTFT p50 {fmt_seconds(g.ttft.p50 or 0.0)} "
        f"(n={g.ttft.n}) vs {fmt_seconds(d.ttft.p50 or 0.0)} direct ({ttft_txt}); gap p50 "
        f"{fmt_seconds(g.itl.p50 or 0.0)} vs {fmt_seconds(d.itl.p50 or 0.0)} direct"
        + ("; short answers arrive in one piece" if found.one_piece else "")
    )
    if found.compressed:
        summary += f"; the stream is also {found.compressed}-compressed, which buffers by itself (LD302)"
    return summary


def _evidence(found: Found) -> list[EvidenceValue]:
    d, g = found.pair.direct, found.pair.gateway
    return [
        EvidenceValue("gateway events per read p50", found.gateway_epr, "events",
                      f"stream: gateway, n={g.events_per_read.n} reads"),
        EvidenceValue("direct events per read p50", found.direct_epr, "events",
                      f"stream: direct, n={d.events_per_read.n} reads"),
        EvidenceValue("gateway bytes per read p50", g.bytes_per_read.p50 or 0.0, "B",
                      f"stream: gateway, n={g.bytes_per_read.n} reads"),
        EvidenceValue("gateway TTFT p50", g.ttft.p50 or 0.0, "s", f"stream: gateway, n={g.ttft.n}"),
        EvidenceValue("direct TTFT p50", d.ttft.p50 or 0.0, "s", f"stream: direct, n={d.ttft.n}"),
        EvidenceValue("gateway inter-token gap p50", g.itl.p50, "s", f"stream: gateway, n={g.itl.n} gaps"),
        EvidenceValue("direct inter-token gap p50", d.itl.p50, "s", f"stream: direct, n={d.itl.n} gaps"),
        EvidenceValue("gateway largest gap", g.itl.max, "s", f"stream: gateway, n={g.itl.n} gaps"),
        EvidenceValue("gateway first-to-last token p50", g.first_to_last_token.p50, "s",
                      f"stream: gateway, n={g.first_to_last_token.n}"),
        EvidenceValue("direct first-to-last token p50", d.first_to_last_token.p50, "s",
                      f"stream: direct, n={d.first_to_last_token.n}"),
        # Headers held back with the first burst are part of the signature.
        EvidenceValue("gateway headers-to-first-token p50", g.headers_to_first_token.p50, "s",
                      f"stream: gateway, n={g.headers_to_first_token.n}"),
        EvidenceValue("direct headers-to-first-token p50", d.headers_to_first_token.p50, "s",
                      f"stream: direct, n={d.headers_to_first_token.n}"),
    ]


def _remediation(found: Found, gateway: GatewayView | None) -> Remediation:
    bytes_per_read = found.pair.gateway.bytes_per_read.p50 or 0.0
    burst = f"bursts of ~{bytes_per_read / 1024:.0f} KiB" if bytes_per_read >= 1024 else "bursts"
    verify = rerun("about 1 event per read on the gateway path and gateway TTFT within a few ms of direct")
    return buffering_remediation(gateway, burst, verify)
