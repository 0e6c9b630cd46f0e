"""The token stream is compressed on its way to the client.

What it detects:
A streamed response (`Content-Type: text/event-stream`, or the `text/plain`/NDJSON/untyped
stream of an application edge) arrives with `Content-Encoding: gzip`, `br`, `zstd` or
`deflate`: something between vLLM (which never compresses) and the client compresses the
token stream.

Why it matters:
A compressor accumulates input until its window fills or the body ends unless it is flushed per
event: nginx `gzip` behind default buffering delivered a whole answer in one read at the end,
Starlette/FastAPI `GZipMiddleware` buffers ~32 KiB at a time, Traefik's `compress` middleware
withheld streams entirely in some versions. Even when it flushes today, each event is a few
dozen bytes, so compression saves nothing and puts the stream one upgrade away from freezing.

Evidence:
Stream probe response headers (`Content-Type`, `Content-Encoding`, `Server`) per path, and the
same path's events per read p50 (bursts mean the compressor is holding events back now); the
gateway named by the `gateway` view. Bursts, or a gateway TTFT above the direct one's, are felt;
a compressor that still flushes per event with TTFT as direct is a risk (listed under a healthy
headline, never its class).

Remediation:
Disable compression on the streaming route. nginx: `gzip off;` there, or remove
`text/event-stream` from `gzip_types` (setting `gzip`). Starlette/FastAPI (`Server: uvicorn` on
the gateway path): do not wrap the streaming route in `GZipMiddleware` (mount it in a sub-app
without the middleware, or use a Starlette version that skips `text/event-stream`; setting
`GZipMiddleware`). Traefik: `excludedContentTypes: [text/event-stream]` on the `compress`
middleware (setting `compress`). Community ingress-nginx: `use-gzip: "false"` in its ConfigMap
(setting `use-gzip`). Envoy: leave `text/event-stream` out of the compressor filter's
`content_type` (setting `envoy.filters.http.compressor`). Apache httpd: `mod_deflate`; lighttpd:
`deflate.mimetypes`; HAProxy: `compression type`; Caddy: an `encode` matcher; Varnish:
`beresp.do_gzip`. A gateway no header identifies: setting `response compression`, with these as
the possibilities.

Options:
burst_events: events per read p50 at or above which the compressed path is already bursting, which
    makes the finding critical
felt_ttft_s: a compressed gateway stream still flowing per event is felt only when its TTFT p50 is
    above the direct one's by more than this (and the direct spread); otherwise it is a risk

Example:
LD302 stream-compression: gateway sends text/event-stream with Content-Encoding: gzip (Server:
nginx/1.22.1); 178.5 events per read (n=2 reads), the stream is held back -> nginx `gzip off;`.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import (
    compression_remediation,
    detect_proxy,
    gateway_headers,
    gateway_identity,
    measured_pair,
    rerun,
    stream_encoding,
)
from doctor.derive.gateway import GatewayView, identify
from doctor.derive.stream_stats import PathStats, StreamStats
from doctor.evidence import EndpointsEvidence, ProbePath
from doctor.model import Cause, EvidenceValue, Remediation, Severity, SymptomClass


@dataclass(frozen=True)
class Found:
    """The first path (direct first) whose event stream is compressed: its encoding, the ``Server``
    header naming who compresses (none when it is the engine's own, passed on), who answered on it,
    its events per read and whether they burst."""

    path: PathStats
    encoding: str
    server: str | None
    who: GatewayView | None
    events_per_read: float | None
    bursting: bool


@check(code="LD302", name="stream-compression", symptom=SymptomClass.PROXY_ONLY, cause=Cause.COMPRESSION)
def stream_compression(
    stream_stats: StreamStats,
    endpoints: EndpointsEvidence | None = None,
    gateway: GatewayView | None = None,
    *,
    burst_events: float = 2.0,
    felt_ttft_s: float = 0.05,
) -> Result:
    measured = [ps for ps in stream_stats.paths.values() if ps.n_ok > 0]
    if not measured:
        return NotApplicable("no successful streamed response to read headers from")
    # The direct path first: when the origin already compresses, the gateway only passes it on
    # and the fix belongs to the origin (vLLM never compresses, but an app in front of it may).
    measured.sort(key=lambda ps: ps.path != ProbePath.DIRECT)
    for ps in measured:
        headers = gateway_headers(ps, endpoints) if ps.path == ProbePath.GATEWAY else ps.headers
        enc = stream_encoding(headers)
        if enc is None:
            continue
        # the direct path's own headers name its origin (an app in front of vLLM), not the gateway
        who = gateway if ps.path == ProbePath.GATEWAY else identify([ps.headers], engine=())
        _, server = detect_proxy(headers)
        if who is not None and server and _header_line("server", server) in who.engine:
            server = None  # the engine's own Server header, passed on: it names no gateway
        epr = ps.events_per_read.p50
        found = Found(ps, enc, server, who, epr, epr is not None and epr >= burst_events)
        return Fire(
            title="The token stream is compressed",
            # per event with the direct TTFT users feel nothing yet; bursts or a later first token they do
            felt=found.bursting or (ps.path == ProbePath.GATEWAY and _adds_ttft(stream_stats, felt_ttft_s)),
            summary=_summary(found),
            remediation=_remediation(found),
            severity=Severity.CRITICAL if found.bursting else Severity.WARNING,
            evidence=_evidence(found),
        )
    return Pass(_uncompressed(measured))


def _adds_ttft(stream_stats: StreamStats, min_s: float) -> bool:
    """Whether the gateway's first token comes later than the engine's, beyond noise (both paths measured)."""
    try:
        return measured_pair(stream_stats).gateway_adds_ttft(min_s)
    except NotApplicable:
        return False


def _header_line(name: str, value: str) -> str:
    """A header as the gateway view lists those it passed on from the engine (``server: uvicorn``)."""
    return f"{name}: {value}"


def _uncompressed(measured: list[PathStats]) -> str:
    return f"no Content-Encoding on the event stream ({', '.join(ps.path for ps in measured)})"


def _summary(found: Found) -> str:
    ps, epr = found.path, found.events_per_read
    summary = f"{ps.path} sends text/event-stream with Content-Encoding: {found.encoding}"
    if found.server:
        summary += f" (Server: {found.server})"
    if found.bursting:
        summary += f"; {epr:.1f} events per read (n={ps.events_per_read.n} reads), the stream is held back"
    elif epr is not None:
        summary += f"; events still arrive one by one ({epr:.1f} per read), but nothing is gained"
    return summary


def _evidence(found: Found) -> list[EvidenceValue]:
    ps = found.path
    evidence = [
        EvidenceValue("content-encoding", found.encoding, "", f"stream: {ps.path} response headers"),
        EvidenceValue(f"{ps.path} events per read p50", found.events_per_read, "events",
                      f"stream: {ps.path}, n={ps.events_per_read.n} reads"),
        EvidenceValue(f"{ps.path} TTFT p50", ps.ttft.p50, "s", f"stream: {ps.path}, n={ps.ttft.n}"),
    ]
    if ps.path == ProbePath.GATEWAY:
        evidence += gateway_identity(found.who)
    elif found.server:
        evidence.append(EvidenceValue("server header", found.server, "", f"stream: {ps.path} response headers"))
    return evidence


def _remediation(found: Found) -> Remediation:
    return compression_remediation(found.who, found.encoding,
                                   rerun("no Content-Encoding on the stream and about 1 event per read"))
