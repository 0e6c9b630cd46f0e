"""LD302's remediation: stop compressing the token stream, in the answering gateway's terms
(``COMPRESSION``, one ``Phrasing`` per gateway family, and the usual suspects for an unidentified one).
Public through ``doctor.checklib``; the shared phrasing is ``gateway_phrasing``.
"""

from __future__ import annotations

from doctor.checklib.gateway_phrasing import Phrasing, as_unidentified
from doctor.checklib.gateway_responses import who_answered
from doctor.derive.gateway import GatewayView
from doctor.model import Remediation

#: family -> how LD302 (the stream is compressed) is fixed there.
COMPRESSION: dict[str, Phrasing] = {
    "nginx": Phrasing(
        "gzip", "off", current="on, with text/event-stream in gzip_types",
        where="nginx: the `location` (or `server`) serving the streaming route",
        why="{name} {enc}-compresses the event stream; behind default proxy buffering it "
            "delivered whole answers in one read. Set `gzip off;` for the streaming location, or "
            "remove `text/event-stream` from `gzip_types`."),
    "ingress-nginx": Phrasing(
        "use-gzip", '"false" (or `gzip-types` without text/event-stream)', current='"true"',
        where="{name}: the controller's ConfigMap",
        why="{name} {enc}-compresses the event stream: `use-gzip` is on in its ConfigMap with a `gzip-types` "
            "that covers the stream (the default list does not; `*` does). Turn it off, or list the types "
            "to compress without `text/event-stream`."),
    "uvicorn": Phrasing(
        "GZipMiddleware", "not applied to the streaming route",
        where="{name}: its middleware stack",
        why="A Starlette/FastAPI `GZipMiddleware` compresses the event stream and buffers ~32 KiB at a "
            "time in older releases (and withholds headers until the first token in newer ones). Mount "
            "the streaming route in a sub-application without the middleware, or use a Starlette that "
            "skips `text/event-stream`."),
    "traefik": Phrasing(
        "compress", "excludedContentTypes: [text/event-stream]",
        where="{name}: the `compress` middleware on the streaming router",
        why="Traefik's compress middleware has withheld event streams in several releases (v1, v2.2, v3.3)."),
    "envoy": Phrasing(
        "envoy.filters.http.compressor", "content_type without text/event-stream",
        where="{name}: the compressor filter of the streaming route",
        why="{name} {enc}-compresses the event stream; its compressor holds output until its window fills "
            "unless flushed per event. Leave `text/event-stream` out of the filter's `content_type` list, "
            "or disable the filter on the streaming route."),
}
COMPRESSION.update({
    "apache": Phrasing(
        "mod_deflate", "no DEFLATE (or BROTLI_COMPRESS) filter on text/event-stream",
        where="{name}: the streaming route: `AddOutputFilterByType DEFLATE` without `text/event-stream`, or "
              "`SetEnvIf Request_URI ^/v1/ no-gzip` (and `no-brotli`)",
        why="{name} {enc}-compresses the event stream with mod_deflate. It flushes per event while the proxy "
            "flushes, so today tokens may still flow, but each event saves nothing and one buffering filter "
            "more holds the stream: take `text/event-stream` out of the filter, or set the `no-gzip` "
            "environment variable for the streaming route."),
    "lighttpd": Phrasing(
        "deflate.mimetypes", "without text/event-stream (nor a `text/` prefix)",
        where="{name}: mod_deflate's `deflate.mimetypes` for the streaming route",
        why="{name} {enc}-compresses the event stream (mod_deflate, `deflate.mimetypes` matches it by "
            "prefix). List only the types to compress, or set `deflate.mimetypes = ()` in the streaming "
            "route's block."),
    "haproxy": Phrasing(
        "compression type", "without text/event-stream",
        where="{name}: the `compression type` line of the frontend or backend serving the streaming route",
        why="{name} {enc}-compresses the event stream (`compression algo` with `text/event-stream` in "
            "`compression type`); a compressor holds small events until its window fills. Leave the "
            "type out of `compression type`."),
    "caddy": Phrasing(
        "encode", "a matcher that leaves out text/event-stream",
        where="{name}: the `encode` directive of the site: `encode { gzip\n match { header Content-Type "
              "text/html* } }` or a named matcher that excludes the streaming route",
        why="{name} {enc}-compresses the event stream: an `encode` directive without a `match` that leaves "
            "out `text/event-stream`. Compression saves nothing on events of a few dozen bytes."),
    "varnish": Phrasing(
        "beresp.do_gzip", "false for the streaming route", current="true",
        where="{name}: `vcl_backend_response`: no `set beresp.do_gzip = true;` for `text/event-stream`",
        why="{name} {enc}-compresses the event stream with `beresp.do_gzip`, and its gzip filter holds "
            "the stream until the end of the fetch: tokens arrive in one piece. Set it only for "
            "cacheable text, never for the streaming route."),
})
COMPRESSION["f5-nginx-ingress"] = COMPRESSION["nginx"]
COMPRESSION["envoy-ai-gateway"] = COMPRESSION["envoy"]
SUSPECTS_COMPRESSION = (
    "nginx `gzip off;` (or `gzip_types` without it); Apache httpd no `DEFLATE` filter on it (`no-gzip`); "
    "HAProxy `compression type` without it; lighttpd `deflate.mimetypes` without it; Caddy an `encode` "
    "matcher that leaves it out; Varnish no `beresp.do_gzip`; Traefik `compress` with "
    "`excludedContentTypes: [text/event-stream]`; Envoy's compressor `content_type`; a Starlette/FastAPI "
    "edge's GZipMiddleware")
GENERIC_COMPRESSION = Phrasing(
    "response compression", "off for text/event-stream: " + SUSPECTS_COMPRESSION,
    where="{name}: response compression on the streaming route",
    why="{name} {enc}-compresses the event stream; compressors buffer until their window fills. Leave "
        "text/event-stream out, with the switch of the product it is (the suggestion lists the usual ones).")


def compression_remediation(gw: GatewayView | None, enc: str, verify: str) -> Remediation:
    """LD302: stop compressing the token stream, in the answering gateway's terms."""
    family, name = who_answered(gw)
    return as_unidentified(COMPRESSION.get(family or "", GENERIC_COMPRESSION).remediation(verify, name=name, enc=enc), family)

