"""LD301's remediation: turn response buffering off for the streaming route, in the answering gateway's
terms (``BUFFERING``, one ``Phrasing`` per gateway family), and what an Ingress's own buffering
annotation already says. Public through ``doctor.checklib``; the shared phrasing is ``gateway_phrasing``.
"""

from __future__ import annotations

from doctor.checklib.gateway_phrasing import Phrasing, also_in_path, as_unidentified
from doctor.checklib.gateway_responses import who_answered
from doctor.derive.gateway import GatewayView
from doctor.evidence import IngressInfo
from doctor.model import Remediation

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
    "nginx `proxy_buffering off;`; HAProxy `option http-no-delay`; lighttpd `server.stream-response-body = 2`; "
    "Varnish no `beresp.do_stream = false`; Caddy no `response_buffers`; Apache httpd `flushpackets=on`; "
    "Traefik no `buffering` middleware; Envoy ext_proc body mode STREAMED; a FastAPI edge without GZipMiddleware")
GENERIC_BUFFERING = Phrasing(
    "response buffering", "off on the streaming route: " + SUSPECTS_BUFFERING,
    where="{name}: the route that proxies /v1/chat/completions and /v1/completions",
    why="{name} releases the stream in {burst} instead of per token. Turn response buffering off for the streaming "
        "route, with the switch of the product it is (the suggestion lists the usual ones; an upstream can also "
        "send `X-Accel-Buffering: no` to nginx, and Caddy before v2.7 spelled it `buffer_responses`).")


def buffering_remediation(gw: GatewayView | None, burst: str, verify: str) -> Remediation:
    """LD301: turn response buffering off for the streaming route, in the answering gateway's terms."""
    family, name = who_answered(gw)
    phrasing = BUFFERING.get(family or "", GENERIC_BUFFERING)
    rem = phrasing.remediation(verify, name=name, burst=burst)
    if family == "nginx" and gw and gw.primary and gw.primary.inferred:
        rem.why += INGRESS_NOTE
    if gw and gw.ingress and family in BUFFERING:
        _as_annotated(rem, gw.ingress, phrasing.setting)
    rem.why += also_in_path(gw)
    return as_unidentified(rem, family)


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

