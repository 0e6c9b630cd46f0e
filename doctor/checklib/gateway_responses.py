"""What the gateway's responses say: the gateway reading of the proxy-only checks.

"Which proxy is it?" is the question every proxy-only check (LD3xx) asks before it names a
directive; answered here once, the checks name the same directive for the same proxy. Public
through ``doctor.checklib``.
"""

from __future__ import annotations

from collections.abc import Mapping

from doctor.derive.gateway import UNIDENTIFIED, GatewayView, header, server_of
from doctor.derive.stream_stats import PathStats
from doctor.evidence import EndpointsEvidence
from doctor.gateways import family_of
from doctor.model import EvidenceValue

#: Content-Encoding values that compress (``identity`` does not).
COMPRESSED = ("gzip", "br", "zstd", "deflate", "compress")


#: Content types a token stream is sent as: SSE, and the raw-text and NDJSON streams of
#: application edges (a FastAPI ``StreamingResponse`` often says ``text/plain`` or nothing).
STREAM_TYPES = ("text/event-stream", "text/plain", "ndjson", "jsonl")


def stream_encoding(headers: Mapping[str, str]) -> str | None:
    """The compression applied to a token stream, or ``None`` (not compressed, or not a stream)."""
    ctype = (header(headers, "content-type") or "").lower()
    enc = (header(headers, "content-encoding") or "").lower().strip()
    streamed = not ctype or any(t in ctype for t in STREAM_TYPES)
    return enc if streamed and enc in COMPRESSED else None


def gateway_headers(gateway: PathStats | None, endpoints: EndpointsEvidence | None) -> dict[str, str]:
    """Response headers of the gateway: the streamed response's first, else the endpoint probe's."""
    merged: dict[str, str] = {}
    if endpoints is not None:
        for ep in endpoints.endpoints:
            if ep.role == "gateway":
                merged.update({k.lower(): v for k, v in ep.headers.items()})
    if gateway is not None:
        merged.update({k.lower(): v for k, v in gateway.headers.items()})
    return merged


def detect_proxy(headers: Mapping[str, str], kind: str | None = None) -> tuple[str | None, str | None]:
    """``(family, name)`` of the edge that answered: what ``--gateway-kind`` says, else ``Server``, ``Via``, ``X-Powered-By``.

    One response's headers, for a check of its own; the built-in checks read the ``gateway`` view
    (``doctor.derive.gateway``), which weighs every response and the tells beyond ``Server``.
    """
    if kind:
        return family_of(kind) or kind.lower(), kind
    family, raw, _ = server_of(headers)
    return family, raw


def gateway_identity(gw: GatewayView | None) -> list[EvidenceValue]:
    """The evidence lines that say which gateway a remediation speaks to, and from what."""
    if gw is None:
        return []
    passed = f"; the engine's own, passed on: {', '.join(gw.engine)}" if gw.engine else ""
    if gw.primary is None:
        return [EvidenceValue("gateway identified", UNIDENTIFIED, "", f"headers: none of its own{passed}")]
    hop = gw.primary
    told = ", ".join(hop.tells) if hop.tells else "no header of its own"
    out = [EvidenceValue("gateway identified", hop.name, "", f"{hop.source}: {told}"
                         + (f"; inferred: {hop.note}" if hop.inferred and hop.note else "") + passed)]
    out += [EvidenceValue("also in the path", h.name, "", f"headers: {', '.join(h.tells)}") for h in gw.others()]
    if gw.server:
        out.append(EvidenceValue("gateway server header", gw.server, "", "stream: gateway response headers"))
    return out


def who_answered(gw: GatewayView | None) -> tuple[str | None, str]:
    """``(family, name)`` of the hop a remediation speaks to; ``(None, "an unidentified gateway")`` when
    nothing only the gateway path shows named it."""
    return (gw.family, gw.name) if gw is not None else (None, UNIDENTIFIED)
