"""nginx (and OpenResty). Its ``Server`` header is the same for a plain nginx and both Ingress controllers, so a hop
its headers name is inferred to be plain nginx (``header_note``).
"""

from __future__ import annotations

from doctor.gateways.record import START_WHERE, GatewayRecord, IdleTimeout, Phrasing, Suspect

#: What the buffering advice adds when only headers named nginx: they cannot tell an Ingress controller.
INGRESS_NOTE = (
    " If this nginx is a Kubernetes Ingress controller (its headers cannot say), the same switch is the "
    'annotation `nginx.org/proxy-buffering: "False"` on F5 NGINX Ingress (which buffers by default) or '
    '`nginx.ingress.kubernetes.io/proxy-buffering: "off"` on the community ingress-nginx.'
)

#: LD307 when nginx's answer was not compressed (no Content-Encoding): gzip holds nothing, its buffering does
#: (a stock nginx: gzip off, or on without text/event-stream in gzip_types).
UNCOMPRESSED_NGINX = Phrasing(
    "gateway_response_start", "`proxy_buffering off;` on the streaming location",
    where=START_WHERE,
    why="{name} holds the response headers until the body starts when it buffers the proxied response; its "
    "answer was not compressed, so gzip is not what holds them. Set `proxy_buffering off;` (or send "
    "`X-Accel-Buffering: no` from the upstream) in the location serving the streaming route.")

#: LD309 when nginx refused with 503/429: its request limits (``limit_conn_status`` / ``limit_req_status``).
NGINX_LIMIT = Phrasing(
    "limit_conn", "at least {c} per key, or no limit_conn / limit_req on the streaming route",
    where="nginx: the `limit_conn` (or `limit_req`) in the `location` of the streaming route",
    why="{name} answered 503 itself: `limit_conn` refuses a connection once its key (often the client "
        "address) holds that many, and `limit_req` a request over its rate (503 unless "
        "`limit_conn_status` / `limit_req_status` say otherwise). A stream holds its connection for its "
        "whole answer, so a limit sized for short calls refuses concurrent streams.")

RECORD = GatewayRecord(
    id="nginx",
    display="nginx",
    kind="nginx",
    tokens=("nginx", "openresty"),
    header_note=("headers cannot tell a plain nginx from an Ingress controller (F5 NGINX Ingress, "
                 "community ingress-nginx): pass --gateway-kind to name one"),
    inferred_buffering=INGRESS_NOTE,
    uncompressed_start=UNCOMPRESSED_NGINX,
    refusing_cap=NGINX_LIMIT,
    buffering=Phrasing(
        "proxy_buffering", "off", current="on (nginx default)",
        where="nginx: the `location` that proxies the streaming route, e.g. `location /v1/ { proxy_buffering off; }`",
        why="{name} relays the stream in {burst} (its proxy buffers) instead of per token. "
            "`proxy_buffering off;` passes each upstream chunk on as it arrives. Also set "
            '`proxy_http_version 1.1;` and `proxy_set_header Connection "";`: nginx asks upstreams in '
            "HTTP/1.0 by default, and a hop that then close-delimits its body (another proxy; vLLM stays "
            "chunked) is relayed buffer by buffer, while a chunked upstream keeps flowing. An upstream "
            "app can instead send `X-Accel-Buffering: no` per "
            "response, unless the gateway sets `proxy_ignore_headers X-Accel-Buffering`.",
        suspect=Suspect(1, "nginx `proxy_buffering off;`")),
    compression=Phrasing(
        "gzip", "off", current="on, with text/event-stream in gzip_types",
        where="nginx: the `location` (or `server`) serving the streaming route",
        why="{name} {enc}-compresses the event stream; behind default proxy buffering it "
            "delivered whole answers in one read. Set `gzip off;` for the streaming location, or "
            "remove `text/event-stream` from `gzip_types`.",
        suspect=Suspect(1, "nginx `gzip off;` (or `gzip_types` without it)")),
    response_start=Phrasing(
        "gateway_response_start", "`gzip off;` (and `proxy_buffering off;`) on the streaming location",
        where=START_WHERE,
        why="{name} holds the response headers until the body starts: its gzip filter waits for the first "
        "output, and so do buffered responses. Set `gzip off;` (or drop text/event-stream from gzip_types) "
        "and `proxy_buffering off;` in the location serving the streaming route.",
        suspect=Suspect(2, "nginx `gzip` or `proxy_buffering`")),
    idle_timeout=IdleTimeout("proxy_read_timeout", "nginx: the `location` that proxies the streaming route: "
                             "`proxy_read_timeout {s}s;`", 60.0, "nginx default proxy_read_timeout 60 s",
                             suspect=Suspect(1, "nginx `proxy_read_timeout` (60 s default)")),
    connection_cap=Phrasing(
        "max_conns", "at least {c}, up to the engine's batch size, or no max_conns on the server",
        where="nginx: the `server` line of the `upstream` block, e.g. `server 10.0.0.5:8000 max_conns=64;`",
        why="{name} counts the connections to each upstream server: once every server holds `max_conns`, "
            "open-source nginx has no queue (that is NGINX Plus's `queue` directive) and answers 502 at "
            "once (\"no live upstreams\" in its error log). A stream holds its connection for its whole "
            "answer. Raise `max_conns` to what the engine batches, or add upstream servers.",
        suspect=Suspect(2, "nginx `max_conns` or `limit_conn`")),
    retries=Phrasing(
        "proxy_next_upstream", "error (without timeout and non_idempotent) on the streaming route",
        where="nginx: the `location` of the streaming route: `proxy_next_upstream error; "
              "proxy_next_upstream_tries 1;` and a `proxy_read_timeout` above the longest first byte",
        why="{name} sent the same request to the engine again when a try did not answer within "
            "`proxy_read_timeout` (about {timeout} per try here): `proxy_next_upstream ... timeout "
            "non_idempotent` retries a POST, so the engine prefills the same prompt once per try and the "
            "earlier tries are abandoned (aborted), adding load exactly when the engine is slow. Keep "
            "`error` (a refused connection is safe to retry) and drop `timeout` and `non_idempotent` for the "
            "LLM routes."),
    connect_timeout=Phrasing(
        "proxy_connect_timeout", "a few seconds (e.g. 5s), under the clients' own timeout",
        where="nginx: the `location` that proxies the engine: `proxy_connect_timeout 5s;` (60 s by default)",
        why="{name} waits `proxy_connect_timeout` (60 s by default) to reach an upstream that does not answer "
            "the connection attempt, and its `proxy_read_timeout` (60 s) for one that accepted and says nothing",
        default="60 s",
        suspect=Suspect(1)),
)
