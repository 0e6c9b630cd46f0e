"""Which proxy answered, and what its responses say: the gateway reading of the proxy-only checks.

"Which proxy is it?" is the question every proxy-only check (LD3xx) asks before it names a
directive; answered here once, the checks name the same directive for the same proxy. Public
through ``doctor.checklib``.
"""

from __future__ import annotations

from collections.abc import Mapping

from doctor.derive.stream_stats import PathStats
from doctor.evidence import EndpointsEvidence

#: ``Server`` / ``Via`` substrings -> the proxy family whose directives the checks name.
KNOWN_PROXIES: tuple[tuple[str, str], ...] = (
    ("nginx", "nginx"),
    ("openresty", "nginx"),
    ("envoy", "envoy"),
    ("traefik", "traefik"),
    ("cloudflare", "cloudflare"),
    ("caddy", "caddy"),
    ("haproxy", "haproxy"),
    ("apache", "apache"),
    ("uvicorn", "uvicorn"),  # a Python (ASGI) edge in front of the engine
    ("hypercorn", "uvicorn"),
    ("gunicorn", "uvicorn"),
    ("fastapi", "uvicorn"),
    ("starlette", "uvicorn"),
    ("litellm", "litellm"),
    ("express", "node"),  # X-Powered-By: Express
    ("node", "node"),
)


#: Content-Encoding values that compress (``identity`` does not).
COMPRESSED = ("gzip", "br", "zstd", "deflate", "compress")


def header(headers: Mapping[str, str], name: str) -> str | None:
    """A response header by name, case-insensitively (HTTP header names are)."""
    wanted = name.lower()
    for key, value in headers.items():
        if key.lower() == wanted:
            return value
    return None


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

    ``server: uvicorn`` on the gateway path means the edge is itself a Python app (or a proxy
    that passes vLLM's own header through unchanged, which nginx does not: it replaces it).
    The user's word wins: an edge behind a CDN answers with the CDN's ``Server``.
    """
    if kind:
        low = kind.lower()
        return next((family for needle, family in KNOWN_PROXIES if needle in low), low), kind
    for name in ("server", "via", "x-powered-by"):
        raw = header(headers, name)
        if not raw:
            continue
        low = raw.lower()
        for needle, family in KNOWN_PROXIES:
            if needle in low:
                return family, raw
        return None, raw
    return None, None


def gateway_name(server: str | None) -> str:
    """How a remediation names the gateway: by its Server header when it sent one."""
    return f"the gateway ({server})" if server else "the gateway"
