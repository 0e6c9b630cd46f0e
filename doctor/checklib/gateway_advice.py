"""The gateway settings a proxy-only remediation names, phrased for the gateway that answered.

A check measures the behaviour (bursts, a compressed stream, a cut after a fixed silence); which
gateway it is (the ``gateway`` view, ``doctor.derive.gateway``) only decides which setting the
remediation names and how. One table per behaviour, keyed by gateway family, so LD301, LD302 and
LD305 name the same setting for the same gateway; a family without an entry gets the generic
advice under its own name. The phrasings follow the public reports the tests quote
(``fixtures/gateway-reports/``). Public through ``doctor.checklib``.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.checklib.gateway_responses import who_answered
from doctor.derive.gateway import GatewayView
from doctor.evidence import IngressInfo
from doctor.foundation.units import fmt_seconds
from doctor.model import Remediation


@dataclass(frozen=True)
class Phrasing:
    """One gateway's remediation for one behaviour. ``where`` and ``why`` are templates:
    ``{name}`` the gateway as identified, ``{burst}`` (buffering) or ``{enc}`` (compression)."""

    setting: str
    suggested: str
    where: str
    why: str
    current: str | None = None

    def remediation(self, verify: str, **fill: str) -> Remediation:
        def filled(template: str) -> str:
            # str.replace, not str.format: the phrasings quote nginx blocks and YAML with braces
            for key, value in fill.items():
                template = template.replace("{" + key + "}", value)
            return template

        return Remediation(setting=self.setting, suggested=self.suggested, current=self.current,
                           where=filled(self.where), why=filled(self.why), verify=verify)


#: What a remediation adds when nothing only the gateway path shows named the gateway.
UNIDENTIFIED_NOTE = (" No header of its own says which software it is (what it passed on is the engine's): "
                     "pass `--gateway-kind` to name it.")


def _as_unidentified(rem: Remediation, family: str | None) -> Remediation:
    """An unidentified gateway's remediation: its sentence capitalised, and how to name it."""
    if family is None:
        rem.why = rem.why[:1].upper() + rem.why[1:] + UNIDENTIFIED_NOTE
    return rem


INGRESS_NOTE = (
    " If this nginx is a Kubernetes Ingress controller (its headers cannot say), the same switch is the "
    'annotation `nginx.org/proxy-buffering: "False"` on F5 NGINX Ingress (which buffers by default) or '
    '`nginx.ingress.kubernetes.io/proxy-buffering: "off"` on the community ingress-nginx.'
)

#: family -> how LD301 (the gateway buffers the stream) is fixed there.
BUFFERING: dict[str, Phrasing] = {
    "nginx": Phrasing(
        "proxy_buffering", "off", current="on (nginx default)",
        where="nginx: the `location` that proxies the streaming route, e.g. `location /v1/ { proxy_buffering off; }`",
        why="{name} relays the stream in {burst} (its proxy buffers) instead of per token. "
            "`proxy_buffering off;` passes each upstream chunk on as it arrives. Also set "
            '`proxy_http_version 1.1;` and `proxy_set_header Connection "";`: nginx asks upstreams in '
            "HTTP/1.0 by default, and a hop that then close-delimits its body (another proxy; vLLM stays "
            "chunked) is relayed buffer by buffer, while a chunked upstream keeps flowing. An upstream "
            "app can instead send `X-Accel-Buffering: no` per "
            "response, unless the gateway sets `proxy_ignore_headers X-Accel-Buffering`."),
    "f5-nginx-ingress": Phrasing(
        "nginx.org/proxy-buffering", '"False"', current='"True" (the F5 controller\'s default)',
        where='{name}: the annotation on the streaming route\'s Ingress (or `proxy-buffering: "False"` in '
              "the controller's ConfigMap for every Ingress)",
        why="{name} relays the stream in {burst}: F5's NGINX Ingress Controller buffers proxied responses by "
            'default (ConfigMap `proxy-buffering: True`). `nginx.org/proxy-buffering: "False"` passes each '
            "upstream chunk on as it arrives; an upstream can instead send `X-Accel-Buffering: no` per response."),
    "ingress-nginx": Phrasing(
        "nginx.ingress.kubernetes.io/proxy-buffering", '"off"',
        current='"on", set somewhere: the community controller does not buffer by default',
        where="{name}: the annotation on the streaming route's Ingress, and `proxy-buffering` in the "
              "controller's ConfigMap",
        why="{name} relays the stream in {burst}, although the community ingress-nginx does not buffer by "
            'default (ConfigMap `proxy-buffering: "off"`): an annotation `nginx.ingress.kubernetes.io/'
            'proxy-buffering: "on"`, the ConfigMap key or a configuration snippet turned it on (rate limiting '
            'needs it). Set the annotation to "off" on the streaming route\'s Ingress.'),
    "envoy": Phrasing(
        "ext_proc processing_mode.response_body_mode", "STREAMED (or NONE)",
        current="BUFFERED, or a buffer filter, on the streaming route",
        where="{name}: the ext_proc filter of the streaming route (an EnvoyExtensionPolicy's "
              "`processingMode.response.body`), and no `envoy.filters.http.buffer` on it",
        why="{name} releases the stream in {burst}: an external processor in BUFFERED body mode, or a buffer "
            "filter, holds the response until its end (the Gateway API Inference Extension's vLLM stream "
            "through a Buffered ext_proc, PR #329). STREAMED hands chunks on as they come and NONE skips the "
            "body; a processor that waits for `end_of_stream` in STREAMED mode holds it all the same."),
    "kong": Phrasing(
        "response_buffering", "false", current="true (Kong's Route default)",
        where="{name}: the Route of the streaming path",
        why="{name} releases the stream in {burst}: Kong, built on nginx, buffers proxied responses per Route "
            "by default. `response_buffering: false` on the streaming Route passes chunks on as they come; "
            "the upstream can instead send `X-Accel-Buffering: no` (Kong's SSE guide)."),
    "cloudflare": Phrasing(
        "Content-Type", "text/event-stream (POST, no caching)",
        where="{name}: the origin's streaming response, and the tunnel or cache rule in front of it",
        why="{name} releases the stream in {burst}. Cloudflare's tunnels flush `text/event-stream` but buffer "
            "other content types (cloudflared#1095), Quick Tunnels buffer SSE sent to a GET (#1449), and a "
            "cached route is held whole: serve the stream as `text/event-stream` with `Cache-Control: no-cache`, "
            "by POST, through a named tunnel, with a cache-bypass rule on the route."),
    "aws-alb": Phrasing(
        "target_type", "instance or ip targets (ECS/EC2), not Lambda",
        where="{name}: the target group of the streaming route",
        why='{name} delivers the stream in {burst}. An ALB relays a chunked target\'s stream, but it does not '
            'stream Lambda responses ("application load balancer does not support streaming response from '
            'Lambda", aws-lambda-web-adapter#548): serve the route from ECS/EC2 targets, or use Lambda '
            "response streaming (a function URL or API Gateway's response streaming)."),
    "uvicorn": Phrasing(
        "StreamingResponse", "relay each upstream chunk as it arrives",
        where="{name}: the streaming route's handler and its middleware stack",
        why="{name} releases the stream in {burst}. In a Starlette/FastAPI edge: yield each upstream chunk "
            "from the StreamingResponse's generator (never read the whole upstream body first), keep the "
            "route out of `GZipMiddleware` (it holds ~32 KiB before it flushes: starlette PR #2753) and out of "
            "`BaseHTTPMiddleware` in old Starlette releases, which loaded a StreamingResponse entirely into "
            "memory (PR #1028)."),
}
BUFFERING.update({
    "apache": Phrasing(
        "flushpackets", "on (on the streaming route's ProxyPass)",
        where="{name}: the `ProxyPass` of the streaming route, e.g. `ProxyPass /v1/ http://engine:8000/v1/ "
              "flushpackets=on`, and the output filters on it",
        why="{name} relays the stream in {burst}. mod_proxy_http passes a chunked upstream's data on as it "
            "comes; `flushpackets=on` makes it flush after every chunk even when more is pending, and an "
            "output filter on the route (mod_deflate, mod_substitute, mod_sed, a mod_buffer `BUFFER`) must "
            "pass each flush on."),
    "lighttpd": Phrasing(
        "server.stream-response-body", "2", current="0 (lighttpd default: the whole response is buffered)",
        where='{name}: the streaming route\'s block, e.g. `$HTTP["url"] =~ "^/v1/" { server.stream-response-body = 2 }`',
        why="{name} releases the stream in {burst}: by default (`server.stream-response-body = 0`) lighttpd "
            "collects a proxied response whole before it sends it, headers included. 1 streams while the "
            "client keeps up; 2 streams with minimal buffering."),
    "haproxy": Phrasing(
        "option http-no-delay", "set in the streaming route's backend (or frontend)",
        current="not set (HAProxy default: wait for full packets)",
        where="{name}: the `backend` (or `frontend`) serving the streaming route",
        why="{name} releases the stream in {burst}: by default HAProxy asks the kernel to wait for enough "
            "data to send full packets (about 200 ms per round trip, its configuration manual says), so "
            "small token events leave together. `option http-no-delay` sends each at once, at some cost in "
            "bandwidth and CPU: set it only where tokens stream."),
    "caddy": Phrasing(
        "buffer_responses", "removed (`response_buffers` since v2.7); `flush_interval -1`",
        where="{name}: the `reverse_proxy` of the streaming route: `reverse_proxy engine:8000 { flush_interval -1 }`, "
              "without `buffer_responses` / `response_buffers`",
        why="{name} releases the stream in {burst}. Caddy flushes `text/event-stream` responses at once, "
            "unless the proxy buffers whole responses (`buffer_responses` before v2.7, `response_buffers` "
            "since): remove it from the streaming route; `flush_interval -1` flushes after every write "
            "whatever the content type."),
    "varnish": Phrasing(
        "beresp.do_stream", "true (Varnish's default)", current="false on the streaming route",
        where="{name}: `vcl_backend_response`: no `set beresp.do_stream = false;` (nor `beresp.do_esi`) for "
              "the streaming route; `return (pass);` it in `vcl_recv`",
        why="{name} releases the stream in {burst}: with `beresp.do_stream = false` (or ESI processing) "
            "Varnish fetches the whole object before it delivers it, headers included. Streaming is the "
            "default since Varnish 4; `beresp.do_gzip` also holds it (see compression)."),
})
BUFFERING["traefik"] = Phrasing(
    "buffering", "no buffering middleware on the streaming router",
    where="{name}: the middlewares of the router serving the streaming route",
    why="{name} releases the stream in {burst}. Traefik streams by default; its `buffering` middleware "
        "(`maxResponseBodyBytes`) holds whole responses, a positive `flushInterval` on the service's "
        "`responseForwarding` flushes only that often (`-1` flushes at once; event streams are flushed "
        "at once whatever it says), and its `compress` middleware has withheld event streams in several "
        "releases (exclude `text/event-stream`).")
BUFFERING["envoy-ai-gateway"] = BUFFERING["envoy"]

#: The usual suspects' switches, for a gateway nothing identified: possibilities, never one product's knob.
SUSPECTS_BUFFERING = (
    "nginx `proxy_buffering off;` (or `X-Accel-Buffering: no` from the upstream); HAProxy `option "
    "http-no-delay`; lighttpd `server.stream-response-body = 2`; Varnish no `beresp.do_stream = false`; "
    "Caddy no `buffer_responses`/`response_buffers`; Apache httpd `flushpackets=on` on the ProxyPass; "
    "Traefik no `buffering` middleware; Envoy ext_proc body mode STREAMED; a Starlette/FastAPI edge that "
    "relays each chunk, without GZipMiddleware")
GENERIC_BUFFERING = Phrasing(
    "response buffering", "off for text/event-stream responses on the streaming route",
    where="{name}: the route that proxies /v1/chat/completions and /v1/completions",
    why="{name} releases the stream in {burst} instead of per token. Turn response buffering off for the streaming "
        "route; the switch is one of: " + SUSPECTS_BUFFERING + ".")

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
    "response compression", "off for text/event-stream",
    where="{name}: response compression on the streaming route",
    why="{name} {enc}-compresses the event stream; compressors buffer until their window fills. "
        "text/event-stream is left out by one of: " + SUSPECTS_COMPRESSION + ".")


def _also(gw: GatewayView | None) -> str:
    """The other hops seen in front of or behind the named one, for the remediation's last words."""
    others = gw.others() if gw else []
    return f" Also in the path: {', '.join(h.name for h in others)}." if others else ""


def buffering_remediation(gw: GatewayView | None, burst: str, verify: str) -> Remediation:
    """LD301: turn response buffering off for the streaming route, in the answering gateway's terms."""
    family, name = who_answered(gw)
    phrasing = BUFFERING.get(family or "", GENERIC_BUFFERING)
    rem = phrasing.remediation(verify, name=name, burst=burst)
    if family == "nginx" and gw and gw.primary and gw.primary.inferred:
        rem.why += INGRESS_NOTE
    if gw and gw.ingress and family in BUFFERING:
        _as_annotated(rem, gw.ingress, phrasing.setting)
    rem.why += _also(gw)
    return _as_unidentified(rem, family)


#: Annotation values that turn an Ingress controller's proxy buffering off (community "off", F5 "False").
BUFFERING_OFF = ("off", "false")


def _as_annotated(rem: Remediation, ingress: IngressInfo, annotation: str) -> None:
    """What the Ingress already says about buffering: its value is the current one, and a value that
    already turns buffering off means something else buffers."""
    value = ingress.annotations.get(annotation)
    if value is None:
        return
    where = f"Ingress {ingress.namespace}/{ingress.name}"
    rem.current = f'"{value}" on {where}'
    if value.strip().lower() in BUFFERING_OFF:
        rem.why += (f' The {where} already has `{annotation}: "{value}"`, yet the stream arrived in bursts: '
                    "something else buffers. Look at the controller's ConfigMap or a configuration snippet "
                    "that overrides the annotation, another hop in the path, and the application's own server.")


def compression_remediation(gw: GatewayView | None, enc: str, verify: str) -> Remediation:
    """LD302: stop compressing the token stream, in the answering gateway's terms."""
    family, name = who_answered(gw)
    return _as_unidentified(COMPRESSION.get(family or "", GENERIC_COMPRESSION).remediation(verify, name=name, enc=enc), family)


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
SUSPECTS_RESPONSE_START = (
    "a Starlette/FastAPI edge's GZipMiddleware or a handler that awaits the first token; nginx `gzip` or "
    "`proxy_buffering`; lighttpd `server.stream-response-body = 0` (its default); HAProxy without `option "
    "http-no-delay`; Caddy `buffer_responses`/`response_buffers`; Varnish `beresp.do_stream = false`; "
    "Traefik's `buffering` middleware")
GENERIC_RESPONSE_START = Phrasing(
    "gateway_response_start", "send the response headers as soon as the upstream's arrive", where=START_WHERE,
    why="{name} holds the response start until the first token; what holds it is one of: " + SUSPECTS_RESPONSE_START + ".",
)


def response_start_remediation(gw: GatewayView | None, verify: str) -> Remediation:
    """LD307: send the response start at once, in the answering gateway's terms."""
    family, name = who_answered(gw)
    return _as_unidentified(RESPONSE_START.get(family or "", GENERIC_RESPONSE_START).remediation(verify, name=name), family)


@dataclass(frozen=True)
class IdleTimeout:
    """A gateway's idle (read) timeout: its default when users meet it unset, and how it is set."""

    setting: str
    where: str  # ``{s}`` is the suggested timeout in seconds
    default_s: float | None = None
    default_what: str | None = None  # "nginx default proxy_read_timeout 60 s"
    advice: str = ""  # gateway-specific words after the common explanation


#: family -> its idle timeout. LD305 matches an observed cut against ``default_s``.
IDLE_TIMEOUTS: dict[str, IdleTimeout] = {
    "nginx": IdleTimeout("proxy_read_timeout", "nginx: the `location` that proxies the streaming route: "
                         "`proxy_read_timeout {s}s;`", 60.0, "nginx default proxy_read_timeout 60 s"),
    "ingress-nginx": IdleTimeout("nginx.ingress.kubernetes.io/proxy-read-timeout",
                                 'the streaming route\'s Ingress: `nginx.ingress.kubernetes.io/proxy-read-timeout: "{s}"` '
                                 "(seconds; `proxy-read-timeout` in the ConfigMap for all)", 60.0,
                                 "ingress-nginx default proxy-read-timeout 60 s"),
    "f5-nginx-ingress": IdleTimeout("nginx.org/proxy-read-timeout",
                                    'the streaming route\'s Ingress: `nginx.org/proxy-read-timeout: "{s}s"`', 60.0,
                                    "F5 NGINX Ingress default proxy-read-timeout 60 s"),
    "cloudflare": IdleTimeout("Cloudflare proxy read timeout", "the origin behind Cloudflare: its headers and a "
                              "first event at once, then an event well within every 100 s (Enterprise: raise "
                              "its Proxy Read Timeout to {s} s)", 100.0,
                              "Cloudflare proxy read timeout 100 s",
                              " Below Enterprise the 100 s cannot be raised (a 524 until the first byte): send "
                              "the headers and a first event at once, then a real event (not an SSE comment, "
                              "which some hops drop) well within every 100 s."),
    "aws-alb": IdleTimeout("idle_timeout.timeout_seconds", "the load balancer's attributes: "
                           "`idle_timeout.timeout_seconds = {s}` (1-4000 s)", 60.0,
                           "AWS ALB default idle timeout 60 s"),
    "kong": IdleTimeout("read_timeout", "Kong: the Service of the streaming route: `read_timeout: {s}000` "
                        "(milliseconds)", 60.0, "Kong default Service read_timeout 60 s"),
    "envoy": IdleTimeout("stream_idle_timeout", "Envoy: the route's `idle_timeout: {s}s` (or the connection "
                         "manager's `stream_idle_timeout`), and the route `timeout: 0s` for streams", 300.0,
                         "Envoy default stream_idle_timeout 300 s",
                         " Envoy's route `timeout` (15 s by default) also ends a whole response, silent or not."),
    "litellm": IdleTimeout("stream_timeout", "LiteLLM: the model's `litellm_params.stream_timeout: {s}` "
                           "(and `request_timeout` in `litellm_settings`)"),
    "apache": IdleTimeout("ProxyTimeout", "Apache httpd: `ProxyTimeout {s}` (or `timeout={s}` on the streaming "
                          "route's ProxyPass)", 60.0, "Apache httpd default ProxyTimeout: Timeout, 60 s"),
    "lighttpd": IdleTimeout("read-timeout", 'lighttpd: the backend\'s `"read-timeout" => {s}` in `proxy.server`'),
    "haproxy": IdleTimeout("timeout server", "HAProxy: `timeout server {s}s` in the streaming route's backend "
                           "(HAProxy has no default: the configuration's value decides)"),
    "caddy": IdleTimeout("read_timeout", "Caddy: the streaming reverse_proxy's `transport http {{ read_timeout {s}s }}`"),
    "varnish": IdleTimeout("between_bytes_timeout", "Varnish: the backend's `.between_bytes_timeout = {s}s;` (and "
                           "`.first_byte_timeout` for the wait before the first token)", 60.0,
                           "Varnish default between_bytes_timeout 60 s"),
    "traefik": IdleTimeout("respondingTimeouts", "Traefik: the entry point's `transport.respondingTimeouts` "
                           "(`writeTimeout`, `idleTimeout`) and the serversTransport's `forwardingTimeouts."
                           "responseHeaderTimeout`: at least {s}s, or 0 for none"),
    "uvicorn": IdleTimeout("read timeout", "the Python edge: its upstream client's read timeout, e.g. "
                           "`httpx.AsyncClient(timeout=httpx.Timeout(10.0, read={s}))`", 5.0,
                           "httpx's default 5 s read timeout in a Python edge"),
}

#: The usual suspects' idle timeouts, for a gateway nothing identified.
GENERIC_IDLE = (" The timeout is one of: "
                "nginx `proxy_read_timeout` (60 s default); Apache httpd `ProxyTimeout` (60 s); HAProxy "
                "`timeout server`; Varnish `between_bytes_timeout` (60 s); lighttpd `read-timeout` in "
                "`proxy.server`; Caddy `transport http { read_timeout }`; Traefik `respondingTimeouts`; an "
                "AWS ALB's `idle_timeout.timeout_seconds` (60 s); a Python edge's client read timeout.")

#: A timeout users meet on many gateways alike, when the one that answered has no match.
COMMON_IDLE = (60.0, "a common 60 s idle timeout (nginx, Apache httpd, Varnish, AWS ALB)")


def idle_timeout_for(gw: GatewayView | None, idle_lo: float, idle_hi: float,
                     tolerance: float) -> tuple[str | None, str | None]:
    """``(family, what)``: the hop whose default idle timeout the observed cuts match, outermost
    first (a CDN cuts before the proxy behind it), else the primary hop with the common 60 s or none."""
    def matches(secs: float) -> bool:
        return abs(idle_hi - secs) <= tolerance * secs and abs(idle_lo - secs) <= tolerance * secs

    for hop in gw.hops if gw else []:
        entry = IDLE_TIMEOUTS.get(hop.family)
        if entry and entry.default_s is not None and matches(entry.default_s):
            return hop.family, entry.default_what
    family = gw.family if gw else None
    return family, COMMON_IDLE[1] if matches(COMMON_IDLE[0]) else None


def idle_timeout_remediation(gw: GatewayView | None, family: str | None, idle_s: float, suggested_s: float,
                             verify: str) -> Remediation:
    """LD305: raise the idle timeout of the hop that cut the stream (``family``), in its own terms."""
    hop = gw.hop(family) if gw and family else None
    name = hop.name if hop else who_answered(gw)[1]
    entry = IDLE_TIMEOUTS.get(family or "")
    why = (f"{name} closes a stream after {fmt_seconds(idle_s)} without upstream data; the engine produces silences that "
           "long (queueing, long prefills, preemption stalls), so those answers are cut. Raise the timeout above "
           "the longest silence, and shorten the silences with the engine findings.")
    current = f"{idle_s:.0f}s (observed)"
    if entry is None:
        return _as_unidentified(Remediation(setting="upstream idle timeout", suggested=f"{suggested_s:.0f}s", current=current,
                                            where=f"{name}: its upstream read / idle timeout", why=why + GENERIC_IDLE,
                                            verify=verify), hop.family if hop else gw.family if gw else None)
    if entry.default_what:
        current += f" — {entry.default_what}"
    return Remediation(setting=entry.setting, suggested=f"{suggested_s:.0f}s", current=current,
                       where=entry.where.format(s=f"{suggested_s:.0f}"), why=why + entry.advice, verify=verify)


#: family -> how LD309 (the gateway caps the streams it lets through to the engine) is fixed there.
#: ``{name}`` the gateway, ``{c}`` the probe's concurrency.
CONNECTION_CAPS: dict[str, Phrasing] = {
    "haproxy": Phrasing(
        "maxconn", "at least {c}, up to the engine's batch size (vLLM --max-num-seqs), on the server line",
        where="{name}: the `server` line of the backend that proxies the engine, e.g. "
              "`server vllm1 10.0.0.5:8000 maxconn 64`",
        why="{name} lets at most `maxconn` streams through to each server and holds the rest in its backend "
            "queue (503 once `timeout queue` runs out). A stream holds its slot for its whole answer, so each "
            "request behind the cap waits whole answers while the engine, which batches, has room. Raise "
            "`maxconn` to what the engine batches, so that any queue is the engine's own and shows in its "
            "metrics; `timeout queue` only decides how soon the waiting ones get a 503."),
    "nginx": Phrasing(
        "max_conns", "at least {c}, up to the engine's batch size, or no max_conns on the server",
        where="nginx: the `server` line of the `upstream` block, e.g. `server 10.0.0.5:8000 max_conns=64;`",
        why="{name} counts the connections to each upstream server: once every server holds `max_conns`, "
            "open-source nginx has no queue (that is NGINX Plus's `queue` directive) and answers 502 at "
            "once (\"no live upstreams\" in its error log). A stream holds its connection for its whole "
            "answer. Raise `max_conns` to what the engine batches, or add upstream servers."),
    "envoy": Phrasing(
        "circuit_breakers", "max_requests / max_pending_requests above the streams in flight at peak",
        where="{name}: the engine cluster's `circuit_breakers.thresholds` (Envoy Gateway: the "
              "BackendTrafficPolicy's `circuitBreaker.maxParallelRequests` / `maxPendingRequests`)",
        why="{name}'s circuit breakers bound the requests in flight to a cluster (`max_requests`, 1024 by "
            "default), those waiting for a connection (`max_pending_requests`) and the connections "
            "(`max_connections`); over them it answers 503 with `x-envoy-overloaded: true` (envoy#11908). "
            "Streams hold a request for their whole answer, so the defaults bind sooner than for short "
            "calls. Raise the thresholds to the streams the engines batch together."),
    "litellm": Phrasing(
        "max_parallel_requests", "at least {c}, or unset for the deployment",
        where="{name}: the model's `litellm_params.max_parallel_requests` (and the key's or team's "
              "`max_parallel_requests`)",
        why="{name} answers 429 once a deployment, key or team has `max_parallel_requests` in flight; a "
            "stream counts for its whole answer. Raise it to what the engine batches."),
    "traefik": Phrasing(
        "inFlightReq.amount", "at least {c}, or no inFlightReq middleware on the streaming router",
        where="{name}: the `inFlightReq` middleware of the streaming router",
        why="{name}'s `inFlightReq` middleware answers 429 over `amount` requests in flight; a stream "
            "counts for its whole answer."),
}
CONNECTION_CAPS["envoy-ai-gateway"] = CONNECTION_CAPS["envoy"]
#: nginx's request limits, which refuse with 503 (``limit_conn_status`` / ``limit_req_status``).
NGINX_LIMIT = Phrasing(
    "limit_conn", "at least {c} per key, or no limit_conn / limit_req on the streaming route",
    where="nginx: the `limit_conn` (or `limit_req`) in the `location` of the streaming route",
    why="{name} answered 503 itself: `limit_conn` refuses a connection once its key (often the client "
        "address) holds that many, and `limit_req` a request over its rate (503 unless "
        "`limit_conn_status` / `limit_req_status` say otherwise). A stream holds its connection for its "
        "whole answer, so a limit sized for short calls refuses concurrent streams.")
GENERIC_CAP = Phrasing(
    "gateway connection limit", "at least {c} streams to the engine at once",
    where="{name}: its per-upstream connection or request limit",
    why="{name} lets fewer streams through to the engine than were sent and queues or refuses the rest "
        "(HAProxy `maxconn` on a server line, nginx `max_conns` or `limit_conn`, Envoy circuit breakers, "
        "LiteLLM `max_parallel_requests`). Raise it to what the engine batches.")
#: Families whose cap queues the requests over it (a staircase of TTFTs) instead of refusing them.
QUEUEING_CAPS = ("haproxy", "envoy", "envoy-ai-gateway")


def cap_remediation(gw: GatewayView | None, refused_status: int | None, concurrency: int, verify: str) -> Remediation:
    """LD309: raise the gateway's own limit on streams to the engine, in its terms; nginx's 503/429
    comes from ``limit_conn`` / ``limit_req``, its 502 from ``max_conns``."""
    family, name = who_answered(gw)
    phrasing = CONNECTION_CAPS.get(family or "", GENERIC_CAP)
    if family == "nginx" and refused_status in (429, 503):
        phrasing = NGINX_LIMIT
    rem = phrasing.remediation(verify, name=name)
    rem.suggested = rem.suggested.replace("{c}", str(concurrency))
    rem.why += _also(gw)
    return rem


#: family -> how LD310 (the gateway sends a request to the engine again) is fixed there.
#: ``{name}`` the gateway, ``{timeout}`` the time each try lasted.
RETRIES: dict[str, Phrasing] = {
    "nginx": Phrasing(
        "proxy_next_upstream", "error (without timeout and non_idempotent) on the streaming route",
        where="nginx: the `location` of the streaming route: `proxy_next_upstream error; "
              "proxy_next_upstream_tries 1;` and a `proxy_read_timeout` above the longest first byte",
        why="{name} sent the same request to the engine again when a try did not answer within "
            "`proxy_read_timeout` (about {timeout} per try here): `proxy_next_upstream ... timeout "
            "non_idempotent` retries a POST, so the engine prefills the same prompt once per try and the "
            "earlier tries are abandoned (aborted), adding load exactly when the engine is slow. Keep "
            "`error` (a refused connection is safe to retry) and drop `timeout` and `non_idempotent` for the "
            "LLM routes."),
    "ingress-nginx": Phrasing(
        "nginx.ingress.kubernetes.io/proxy-next-upstream", '"error"',
        where="{name}: the streaming route's Ingress, with `nginx.ingress.kubernetes.io/proxy-next-upstream-tries: "
              '"1"` and a `proxy-read-timeout` above the longest first byte',
        why="{name} sent the same request to the engine again when a try timed out (about {timeout} per try "
            "here); the engine prefills the prompt once per try and the earlier tries are abandoned."),
    "haproxy": Phrasing(
        "retry-on", "conn-failure only, and no `option redispatch` for the engine's backend",
        where="{name}: the engine's backend: `retries 1`, `retry-on conn-failure`, and `timeout server` above "
              "the longest answer",
        why="{name} sent the same request to the engine again (about {timeout} per try here): `retry-on` "
            "with response timeouts or 5xx, or `option redispatch`, replays a POST whose prompt the engine "
            "already started to prefill, and the earlier try is abandoned."),
    "envoy": Phrasing(
        "retry_policy", "no retry_on 5xx / reset / gateway-error for the LLM route (or num_retries: 0)",
        where="{name}: the route's `retry_policy` (and `per_try_timeout` above the longest first token)",
        why="{name} sent the same request to the engine again (about {timeout} per try here; "
            "`x-envoy-attempt-count` counts the tries): each retry prefills the prompt again and the "
            "abandoned try keeps the engine busy."),
    "litellm": Phrasing(
        "num_retries", "0 for the streaming models (or a timeout above the longest answer)",
        where="{name}: `router_settings.num_retries` and the model's `litellm_params.num_retries`, with "
              "`timeout` / `stream_timeout` above the longest answer",
        why="{name} sent the same request to the engine again (about {timeout} per try here): each retry "
            "prefills the prompt again while the engine still works on the abandoned try."),
}
RETRIES["envoy-ai-gateway"] = RETRIES["envoy"]
GENERIC_RETRIES = Phrasing(
    "retries", "none on timeout for the LLM routes",
    where="{name}: its retry policy, and the clients' (the OpenAI SDKs retry twice by default: `max_retries`)",
    why="The engine took in more requests than were sent (about {timeout} per try here): something between "
        "the client and the engine sends a request again when it times out, so the engine prefills the same "
        "prompt once per try and keeps working on the abandoned ones.")


def retry_remediation(gw: GatewayView | None, timeout: str, verify: str) -> Remediation:
    """LD310: stop the gateway from retrying requests the engine already took, in its terms."""
    family, name = who_answered(gw)
    rem = RETRIES.get(family or "", GENERIC_RETRIES).remediation(verify, name=name, timeout=timeout)
    rem.why += _also(gw)
    return rem
