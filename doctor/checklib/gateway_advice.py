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

from doctor.checklib.gateway import who_answered
from doctor.derive.gateway import GatewayView
from doctor.evidence import IngressInfo
from doctor.model import Remediation
from doctor.units import fmt_seconds


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
    "traefik": Phrasing(
        "buffering", "no buffering middleware on the streaming router",
        where="{name}: the middlewares of the router serving the streaming route",
        why="{name} releases the stream in {burst}. Traefik streams by default; its `buffering` middleware "
            "(`maxResponseBodyBytes`) holds whole responses, and its `compress` middleware has withheld event "
            "streams in several releases (exclude `text/event-stream`)."),
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
BUFFERING["envoy-ai-gateway"] = BUFFERING["envoy"]
GENERIC_BUFFERING = Phrasing(
    "proxy_buffering", "off for text/event-stream responses on the streaming route",
    where="{name}: the route that proxies /v1/chat/completions and /v1/completions",
    why="{name} releases the stream in {burst} instead of per token. Disable response buffering "
        "for the streaming route (nginx `proxy_buffering off;`, Envoy ext_proc response body mode "
        "STREAMED/NONE, a CDN cache-bypass rule); an nginx-based hop honours "
        "`X-Accel-Buffering: no` sent by the upstream.")

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
COMPRESSION["f5-nginx-ingress"] = COMPRESSION["nginx"]
COMPRESSION["envoy-ai-gateway"] = COMPRESSION["envoy"]
GENERIC_COMPRESSION = Phrasing(
    "gzip", "off for text/event-stream",
    where="{name}: response compression on the streaming route",
    why="{name} {enc}-compresses the event stream; compressors buffer until their window fills.")


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
    return rem


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
    return COMPRESSION.get(family or "", GENERIC_COMPRESSION).remediation(verify, name=name, enc=enc)


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
    "uvicorn": IdleTimeout("read timeout", "the Python edge: its upstream client's read timeout, e.g. "
                           "`httpx.AsyncClient(timeout=httpx.Timeout(10.0, read={s}))`", 5.0,
                           "httpx's default 5 s read timeout in a Python edge"),
}

#: A timeout users meet on many gateways alike, when the one that answered has no match.
COMMON_IDLE = (60.0, "a common 60 s idle timeout (nginx, AWS ALB)")


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
        return Remediation(setting="proxy_read_timeout", suggested=f"{suggested_s:.0f}s", current=current,
                           where=f"{name}: its upstream read / idle timeout", why=why, verify=verify)
    if entry.default_what:
        current += f" — {entry.default_what}"
    return Remediation(setting=entry.setting, suggested=f"{suggested_s:.0f}s", current=current,
                       where=entry.where.format(s=f"{suggested_s:.0f}"), why=why + entry.advice, verify=verify)
