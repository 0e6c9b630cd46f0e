"""What a gateway does to requests on their way to the engine, and how to undo it in its terms: a cap on
the streams it lets through (LD309, ``CONNECTION_CAPS``, with ``QUEUEING_CAPS`` for the families that
queue rather than refuse), retries of requests the engine already took (LD310, ``RETRIES``) and the
wait to connect to an engine it cannot reach (LD501's hung gateway, ``CONNECT_TIMEOUTS``).
Public through ``doctor.checklib``; the shared phrasing is ``gateway_phrasing``.
"""

from __future__ import annotations

from doctor.checklib.gateway_phrasing import Phrasing, also_in_path, as_unidentified, each_family
from doctor.checklib.gateway_responses import who_answered
from doctor.derive.gateway import GatewayView
from doctor.model import Remediation

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
    "gateway connection limit",
    "at least {c} streams to the engine at once: HAProxy `maxconn` on the server line; nginx `max_conns` or "
    "`limit_conn`; Envoy `circuit_breakers`; LiteLLM `max_parallel_requests`; Traefik `inFlightReq`",
    where="{name}: its per-upstream connection or request limit",
    why="{name} lets fewer streams through to the engine than were sent and queues or refuses the rest "
        "(HAProxy `maxconn` on a server line, nginx `max_conns` or `limit_conn`, Envoy circuit breakers, "
        "LiteLLM `max_parallel_requests`). Raise it to what the engine batches.")
#: Families whose cap queues the requests over it (a staircase of TTFTs) instead of refusing them.
QUEUEING_CAPS = ("haproxy", "envoy", "envoy-ai-gateway")


def cap_remediation(gw: GatewayView | None, refused_status: int | None, concurrency: int, verify: str,
                    measured: int | None = None, *, held: bool = False) -> Remediation:
    """LD309: raise the gateway's own limit on streams to the engine, in its terms; nginx's 503/429
    comes from ``limit_conn`` / ``limit_req``, its 502 from ``max_conns``. ``measured``: the most
    streams the probe saw it let through at once, its limit as measured. ``held``: the gateway held
    requests rather than refused them (LD315), so a family whose cap refuses instead (not in
    ``QUEUEING_CAPS``) gets the generic phrasing under its own name."""
    family, name = who_answered(gw)
    phrasing = CONNECTION_CAPS.get(family or "", GENERIC_CAP)
    if held and family not in QUEUEING_CAPS:
        phrasing = GENERIC_CAP
    if family == "nginx" and refused_status in (429, 503):
        phrasing = NGINX_LIMIT
    rem = phrasing.remediation(verify, name=name)
    rem.suggested = rem.suggested.replace("{c}", str(concurrency))
    if measured is not None:
        rem.current = f"{measured} streams at once (measured)"
    rem.why += also_in_path(gw)
    return as_unidentified(rem, family)


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
    rem.why += also_in_path(gw)
    return rem


#: family -> the timeout a gateway waits to connect to the engine (LD501 ``hung-gateway``): a gateway whose
#: upstream drops the connection attempt (a blackholed address, a dead node) answers nothing until it
#: runs out, which from the client looks like a hung server. ``{name}`` the gateway.
CONNECT_TIMEOUTS: dict[str, Phrasing] = {
    "nginx": Phrasing(
        "proxy_connect_timeout", "a few seconds (e.g. 5s), under the clients' own timeout",
        where="nginx: the `location` that proxies the engine: `proxy_connect_timeout 5s;` (60 s by default)",
        why="{name} waits `proxy_connect_timeout` (60 s by default) to reach an upstream that does not answer "
            "the connection attempt, and its `proxy_read_timeout` (60 s) for one that accepted and says nothing",
        default="60 s"),
    "ingress-nginx": Phrasing(
        "nginx.ingress.kubernetes.io/proxy-connect-timeout", '"5" (seconds), under the clients\' own timeout',
        where="{name}: the route's Ingress annotation `nginx.ingress.kubernetes.io/proxy-connect-timeout` "
              "(`proxy-connect-timeout` in the ConfigMap for all; 5 s by default)",
        why="{name} waits `proxy-connect-timeout` to reach an upstream pod that does not answer the connection "
            "attempt, and `proxy-read-timeout` (60 s) for one that accepted and says nothing"),
    "f5-nginx-ingress": Phrasing(
        "nginx.org/proxy-connect-timeout", '"5s", under the clients\' own timeout',
        where="{name}: the route's Ingress annotation `nginx.org/proxy-connect-timeout` (60 s by default)",
        why="{name} waits `proxy-connect-timeout` (60 s by default) to reach an upstream that does not answer "
            "the connection attempt"),
    "haproxy": Phrasing(
        "timeout connect", "a few seconds (e.g. 5s), under the clients' own timeout",
        where="{name}: `timeout connect 5s` in the engine's backend (or `defaults`)",
        why="{name} waits `timeout connect` to reach a server that does not answer the connection attempt "
            "(no default: the configuration's value decides), and `timeout server` for one that says nothing"),
    "envoy": Phrasing(
        "connect_timeout", "a few seconds, under the clients' own timeout",
        where="{name}: the engine cluster's `connect_timeout` (5 s by default)",
        why="{name} waits the cluster's `connect_timeout` to reach an endpoint that does not answer the "
            "connection attempt, then its route `timeout` for the answer"),
    "apache": Phrasing(
        "connectiontimeout", "a few seconds (e.g. 5), under the clients' own timeout",
        where="{name}: `connectiontimeout=5` on the engine's `ProxyPass` line (the `ProxyTimeout`, 60 s, by default)",
        why="{name} waits `connectiontimeout` to reach a backend that does not answer the connection attempt"),
    "caddy": Phrasing(
        "dial_timeout", "a few seconds, under the clients' own timeout",
        where="{name}: the reverse_proxy's `transport http { dial_timeout 5s }` (3 s by default)",
        why="{name} waits `dial_timeout` to reach an upstream that does not answer the connection attempt"),
    "varnish": Phrasing(
        ".connect_timeout", "a few seconds, under the clients' own timeout",
        where="{name}: the engine backend's `.connect_timeout = 5s;` (3.5 s by default), and `.first_byte_timeout`",
        why="{name} waits `.connect_timeout` to reach a backend that does not answer the connection attempt, "
            "then `.first_byte_timeout` (60 s) for its first byte"),
    "traefik": Phrasing(
        "forwardingTimeouts.dialTimeout", "a few seconds, under the clients' own timeout",
        where="{name}: the serversTransport's `forwardingTimeouts.dialTimeout` (30 s by default)",
        why="{name} waits `dialTimeout` to reach a server that does not answer the connection attempt, then "
            "`responseHeaderTimeout` for its head"),
    "kong": Phrasing(
        "connect_timeout", "a few seconds (e.g. 5000 ms), under the clients' own timeout",
        where="{name}: the Service of the engine route: `connect_timeout: 5000` (milliseconds; 60000 by default)",
        why="{name} waits the Service's `connect_timeout` to reach an upstream that does not answer the "
            "connection attempt"),
}
CONNECT_TIMEOUTS["envoy-ai-gateway"] = CONNECT_TIMEOUTS["envoy"]
GENERIC_CONNECT = Phrasing(
    "gateway upstream connect timeout",
    f"a few seconds, under the clients' own timeout: {each_family(CONNECT_TIMEOUTS)}",
    where="{name}: its timeout for connecting to the engine, and the engine address it connects to",
    why="a gateway waits its connect timeout to reach an upstream that does not answer the connection "
        "attempt (nginx `proxy_connect_timeout`, 60 s by default) and its read timeout for one that accepted "
        "and says nothing")


def hung_gateway_remediation(gw: GatewayView | None, timeout_s: float | None, verify: str) -> Remediation:
    """LD501 ``hung-gateway``: a gateway that accepted and answered nothing in the whole ``--timeout``
    (``timeout_s``) is the gateway or its upstream, not a server to restart: the engine address it
    reaches and its connect timeout, in its family's terms."""
    family, name = who_answered(gw)
    rem = CONNECT_TIMEOUTS.get(family or "", GENERIC_CONNECT).remediation(verify, name=name)
    waited = f"the {timeout_s:g} s --timeout" if timeout_s is not None else "the whole --timeout"
    rem.why = (f"the gateway or its upstream: it accepted the probe's connections and sent not a byte in {waited}, "
               f"not even to GET /version. {rem.why[:1].upper()}{rem.why[1:]}, so an "
               "engine it cannot reach (a wrong or blackholed address, a node gone) reads as a hung server. "
               "Check the upstream address and the engine behind it, and lower the connect timeout so an "
               "unreachable engine is a quick 502/504; restart the gateway only if it answers nothing "
               "even when its upstream does." + also_in_path(gw))
    return as_unidentified(rem, family)
