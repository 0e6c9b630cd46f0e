"""LD307's remediation: send the response start at once instead of holding it until the first token,
in the answering gateway's terms (``RESPONSE_START``, one ``Phrasing`` per gateway family).
Public through ``doctor.checklib``; the shared phrasing is ``gateway_phrasing``.
"""

from __future__ import annotations

from doctor.checklib.gateway_phrasing import Phrasing, as_unidentified
from doctor.checklib.gateway_responses import who_answered
from doctor.derive.gateway import GatewayView
from doctor.model import Remediation

#: family -> how LD307 (the response start held until the first token) is fixed there.
START_WHERE = "{name}: the streaming route"
RESPONSE_START: dict[str, Phrasing] = {
    "uvicorn": Phrasing(
        "gateway_response_start", "send the response start at once: no GZipMiddleware on the streaming route",
        where=START_WHERE,
        why="{name} withholds the response start until its first body: Starlette's GZipMiddleware waits for the "
        "first body to decide on compression, and a handler that awaits the upstream's first token before "
        "returning its StreamingResponse does the same. Exclude the streaming route's content type from "
        "GZipMiddleware (or mount it without) and return the StreamingResponse at once."),
    "nginx": Phrasing(
        "gateway_response_start", "`gzip off;` (and `proxy_buffering off;`) on the streaming location",
        where=START_WHERE,
        why="{name} holds the response headers until the body starts: its gzip filter waits for the first "
        "output, and so do buffered responses. Set `gzip off;` (or drop text/event-stream from gzip_types) "
        "and `proxy_buffering off;` in the location serving the streaming route."),
    "lighttpd": Phrasing(
        "gateway_response_start", "`server.stream-response-body = 2` on the streaming route",
        where=START_WHERE,
        why="{name} sends nothing, headers included, until the proxied response is complete: lighttpd's default "
        "`server.stream-response-body = 0` buffers it whole. 2 (or 1) passes the headers and each chunk on."),
    "haproxy": Phrasing(
        "gateway_response_start", "`option http-no-delay` in the streaming route's backend",
        where=START_WHERE,
        why="{name} waits for full packets before it sends (HAProxy's default network optimisation, about 200 ms "
        "per round trip), so the small response head leaves with the first events. `option http-no-delay` "
        "sends each part at once."),
    "caddy": Phrasing(
        "gateway_response_start", "no `buffer_responses` / `response_buffers` on the streaming reverse_proxy",
        where=START_WHERE,
        why="{name} holds the response until its buffer is done with it: a `reverse_proxy` that buffers "
        "responses (`buffer_responses`, `response_buffers`) sends headers and body together. Remove it from "
        "the streaming route."),
    "varnish": Phrasing(
        "gateway_response_start", "`beresp.do_stream` left true (no `set beresp.do_stream = false;`) for the streaming route",
        where=START_WHERE,
        why="{name} delivers nothing until the fetch is complete when `beresp.do_stream` is false (or ESI is "
        "processed): headers and tokens arrive together at the end."),
    "apache": Phrasing(
        "gateway_response_start", "`flushpackets=on` on the ProxyPass, and no buffering output filter on the route",
        where=START_WHERE,
        why="{name} passes the response head on when its output filters do: a filter that waits for the body "
        "(a `BUFFER`, mod_substitute or mod_sed over whole responses) holds it. `flushpackets=on` flushes "
        "after every chunk."),
    "traefik": Phrasing(
        "gateway_response_start", "no `buffering` middleware on the streaming router",
        where=START_WHERE,
        why="{name} streams the response head at once unless a middleware holds the response (`buffering`, or "
        "`compress` in the releases that withheld event streams)."),
}
RESPONSE_START.update({
    "f5-nginx-ingress": RESPONSE_START["nginx"],
    "ingress-nginx": Phrasing(
        "gateway_response_start",
        '`use-gzip: "false"` (or `gzip-types` without text/event-stream), and `nginx.ingress.kubernetes.io/'
        'proxy-buffering: "off"` on the Ingress',
        where="{name}: the controller's ConfigMap and the Ingress of the streaming route",
        why="{name} holds the response headers until the body starts when its gzip filter covers the event "
        "stream (`use-gzip` with a `gzip-types` that lists it, or `*`) or the Ingress turns buffering on. Leave "
        "`text/event-stream` out of `gzip-types` and keep `proxy-buffering` off for the streaming route."),
    "envoy": Phrasing(
        "gateway_response_start", "no compressor or body-buffering filter (ext_proc `BUFFERED`) on the streaming route",
        where="{name}: the HTTP filters of the streaming route",
        why="{name} sends the response head when its filters release it: a compressor that waits to fill its "
        "window, or an ext_proc/buffer filter that takes the body `BUFFERED`, holds it until the body comes. "
        "Leave `text/event-stream` out of the compressor and use ext_proc body mode `STREAMED` or `NONE`."),
    "kong": Phrasing(
        "gateway_response_start", "`response_buffering: false` on the streaming route",
        where="{name}: the Route (or Service) of the streaming path",
        why="{name} buffers the upstream's response by default (`response_buffering: true`), its head "
        "included; turn it off on the streaming route."),
})
RESPONSE_START["envoy-ai-gateway"] = RESPONSE_START["envoy"]
#: nginx when its answer was not compressed (no Content-Encoding): gzip holds nothing, its buffering does
#: (a stock nginx: gzip off, or on without text/event-stream in gzip_types).
UNCOMPRESSED_NGINX = Phrasing(
    "gateway_response_start", "`proxy_buffering off;` on the streaming location",
    where=START_WHERE,
    why="{name} holds the response headers until the body starts when it buffers the proxied response; its "
    "answer was not compressed, so gzip is not what holds them. Set `proxy_buffering off;` (or send "
    "`X-Accel-Buffering: no` from the upstream) in the location serving the streaming route.")
SUSPECTS_RESPONSE_START = (
    "a Starlette/FastAPI edge's GZipMiddleware or a handler that awaits the first token; nginx `gzip` or "
    "`proxy_buffering`; lighttpd `server.stream-response-body = 0` (its default); HAProxy without `option "
    "http-no-delay`; Caddy `buffer_responses`/`response_buffers`; Varnish `beresp.do_stream = false`; "
    "Traefik's `buffering` middleware")
GENERIC_RESPONSE_START = Phrasing(
    "gateway_response_start", "send the response headers as soon as the upstream's arrive", where=START_WHERE,
    why="{name} holds the response start until the first token; what holds it is one of: " + SUSPECTS_RESPONSE_START + ".",
)


def response_start_remediation(gw: GatewayView | None, verify: str, *, compressed: bool = True) -> Remediation:
    """LD307: send the response start at once, in the answering gateway's terms; ``compressed``: whether
    the gateway's answer carried a Content-Encoding (nginx's gzip is then a suspect, else only its buffering)."""
    family, name = who_answered(gw)
    phrasing = RESPONSE_START.get(family or "", GENERIC_RESPONSE_START)
    if not compressed and phrasing is RESPONSE_START["nginx"]:
        phrasing = UNCOMPRESSED_NGINX
    return as_unidentified(phrasing.remediation(verify, name=name), family)

