"""lighttpd: it passes the engine's ``Server`` on and adds no header of its own by default.
"""

from __future__ import annotations

from doctor.gateways.record import NOT_RECORDED, START_WHERE, GatewayRecord, IdleTimeout, Phrasing, Suspect

RECORD = GatewayRecord(
    id="lighttpd",
    display="lighttpd",
    kind="lighttpd",
    tokens=("lighttpd",),
    buffering=Phrasing(
        "server.stream-response-body", "2", current="0 (lighttpd default: the whole response is buffered)",
        where='{name}: the streaming route\'s block, e.g. `$HTTP["url"] =~ "^/v1/" { server.stream-response-body = 2 }`',
        why="{name} releases the stream in {burst}: by default (`server.stream-response-body = 0`) lighttpd "
            "collects a proxied response whole before it sends it, headers included. 1 streams while the "
            "client keeps up; 2 streams with minimal buffering.",
        suspect=Suspect(3, "lighttpd `server.stream-response-body = 2`")),
    compression=Phrasing(
        "deflate.mimetypes", "without text/event-stream (nor a `text/` prefix)",
        where="{name}: mod_deflate's `deflate.mimetypes` for the streaming route",
        why="{name} {enc}-compresses the event stream (mod_deflate, `deflate.mimetypes` matches it by "
            "prefix). List only the types to compress, or set `deflate.mimetypes = ()` in the streaming "
            "route's block.",
        suspect=Suspect(4, "lighttpd `deflate.mimetypes` without it")),
    response_start=Phrasing(
        "gateway_response_start", "`server.stream-response-body = 2` on the streaming route",
        where=START_WHERE,
        why="{name} sends nothing, headers included, until the proxied response is complete: lighttpd's default "
        "`server.stream-response-body = 0` buffers it whole. 2 (or 1) passes the headers and each chunk on.",
        suspect=Suspect(3, "lighttpd `server.stream-response-body = 0` (its default)")),
    idle_timeout=IdleTimeout("read-timeout", 'lighttpd: the backend\'s `"read-timeout" => {s}` in `proxy.server`',
                             suspect=Suspect(5, "lighttpd `read-timeout` in `proxy.server`")),
    connection_cap=NOT_RECORDED,
    retries=NOT_RECORDED,
    connect_timeout=NOT_RECORDED,
)
