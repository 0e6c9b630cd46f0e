"""Apache httpd (mod_proxy_http): its ``Server`` header when it sends one, else its own ``Keep-Alive`` answer's shape.
"""

from __future__ import annotations

import re

from doctor.gateways.record import NOT_RECORDED, START_WHERE, GatewayRecord, IdleTimeout, Phrasing, Suspect, TellShape

#: Apache httpd's own keep-alive answer (``Keep-Alive: timeout=5, max=100``; nginx writes no ``max``, the others no header).
KEEP_ALIVE = TellShape(
    "keep-alive", re.compile(r"^\s*timeout=\d+,\s*max=\d+\s*$", re.IGNORECASE),
    "Apache httpd writes its Keep-Alive header in this shape; no header of its own named it")

RECORD = GatewayRecord(
    id="apache",
    display="Apache httpd",
    kind="apache",
    tokens=("apache", "httpd"),
    tell_shapes=(KEEP_ALIVE,),
    buffering=Phrasing(
        "flushpackets", "on (on the streaming route's ProxyPass)",
        where="{name}: the `ProxyPass` of the streaming route, e.g. `ProxyPass /v1/ http://engine:8000/v1/ "
              "flushpackets=on`, and the output filters on it",
        why="{name} relays the stream in {burst}. mod_proxy_http passes a chunked upstream's data on as it "
            "comes; `flushpackets=on` makes it flush after every chunk even when more is pending, and an "
            "output filter on the route (mod_deflate, mod_substitute, mod_sed, a mod_buffer `BUFFER`) must "
            "pass each flush on.",
        suspect=Suspect(6, "Apache httpd `flushpackets=on`")),
    compression=Phrasing(
        "mod_deflate", "no DEFLATE (or BROTLI_COMPRESS) filter on text/event-stream",
        where="{name}: the streaming route: `AddOutputFilterByType DEFLATE` without `text/event-stream`, or "
              "`SetEnvIf Request_URI ^/v1/ no-gzip` (and `no-brotli`)",
        why="{name} {enc}-compresses the event stream with mod_deflate. It flushes per event while the proxy "
            "flushes, so today tokens may still flow, but each event saves nothing and one buffering filter "
            "more holds the stream: take `text/event-stream` out of the filter, or set the `no-gzip` "
            "environment variable for the streaming route.",
        suspect=Suspect(2, "Apache httpd no `DEFLATE` filter on it (`no-gzip`)")),
    response_start=Phrasing(
        "gateway_response_start", "`flushpackets=on` on the ProxyPass, and no buffering output filter on the route",
        where=START_WHERE,
        why="{name} passes the response head on when its output filters do: a filter that waits for the body "
        "(a `BUFFER`, mod_substitute or mod_sed over whole responses) holds it. `flushpackets=on` flushes "
        "after every chunk."),
    idle_timeout=IdleTimeout("ProxyTimeout", "Apache httpd: `ProxyTimeout {s}` (or `timeout={s}` on the streaming "
                             "route's ProxyPass)", 60.0, "Apache httpd default ProxyTimeout: Timeout, 60 s",
                             suspect=Suspect(2, "Apache httpd `ProxyTimeout` (60 s)")),
    connection_cap=NOT_RECORDED,
    retries=NOT_RECORDED,
    connect_timeout=Phrasing(
        "connectiontimeout", "a few seconds (e.g. 5), under the clients' own timeout",
        where="{name}: `connectiontimeout=5` on the engine's `ProxyPass` line (the `ProxyTimeout`, 60 s, by default)",
        why="{name} waits `connectiontimeout` to reach a backend that does not answer the connection attempt",
        suspect=Suspect(6)),
)
