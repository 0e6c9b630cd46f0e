"""Varnish: ``Via: 1.1 varnish (Varnish/7.1)`` and ``X-Varnish`` (the request's transaction ids, on every response it delivers).
"""

from __future__ import annotations

from doctor.gateways.record import NOT_RECORDED, START_WHERE, GatewayRecord, IdleTimeout, Phrasing, Suspect

RECORD = GatewayRecord(
    id="varnish",
    display="Varnish",
    kind="varnish",
    tokens=("varnish",),
    tell_headers=("x-varnish",),
    buffering=Phrasing(
        "beresp.do_stream", "true (Varnish's default)", current="false on the streaming route",
        where="{name}: `vcl_backend_response`: no `set beresp.do_stream = false;` (nor `beresp.do_esi`) for "
              "the streaming route; `return (pass);` it in `vcl_recv`",
        why="{name} releases the stream in {burst}: with `beresp.do_stream = false` (or ESI processing) "
            "Varnish fetches the whole object before it delivers it, headers included. Streaming is the "
            "default since Varnish 4; `beresp.do_gzip` also holds it (see compression).",
        suspect=Suspect(4, "Varnish no `beresp.do_stream = false`")),
    compression=Phrasing(
        "beresp.do_gzip", "false for the streaming route", current="true",
        where="{name}: `vcl_backend_response`: no `set beresp.do_gzip = true;` for `text/event-stream`",
        why="{name} {enc}-compresses the event stream with `beresp.do_gzip`, and its gzip filter holds "
            "the stream until the end of the fetch: tokens arrive in one piece. Set it only for "
            "cacheable text, never for the streaming route.",
        suspect=Suspect(6, "Varnish no `beresp.do_gzip`")),
    response_start=Phrasing(
        "gateway_response_start", "`beresp.do_stream` left true (no `set beresp.do_stream = false;`) for the streaming route",
        where=START_WHERE,
        why="{name} delivers nothing until the fetch is complete when `beresp.do_stream` is false (or ESI is "
        "processed): headers and tokens arrive together at the end.",
        suspect=Suspect(6, "Varnish `beresp.do_stream = false`")),
    idle_timeout=IdleTimeout("between_bytes_timeout", "Varnish: the backend's `.between_bytes_timeout = {s}s;` (and "
                             "`.first_byte_timeout` for the wait before the first token)", 60.0,
                             "Varnish default between_bytes_timeout 60 s",
                             suspect=Suspect(4, "Varnish `between_bytes_timeout` (60 s)")),
    connection_cap=NOT_RECORDED,
    retries=NOT_RECORDED,
    connect_timeout=Phrasing(
        ".connect_timeout", "a few seconds, under the clients' own timeout",
        where="{name}: the engine backend's `.connect_timeout = 5s;` (3.5 s by default), and `.first_byte_timeout`",
        why="{name} waits `.connect_timeout` to reach a backend that does not answer the connection attempt, "
            "then `.first_byte_timeout` (60 s) for its first byte",
        suspect=Suspect(8)),
)
