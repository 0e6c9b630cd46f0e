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
