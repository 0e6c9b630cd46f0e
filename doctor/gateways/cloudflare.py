"""Cloudflare, a CDN in front of the operator's gateway (``edge``): ``cf-ray`` names it.
"""

from __future__ import annotations

from doctor.gateways.record import NOT_RECORDED, GatewayRecord, IdleTimeout, Phrasing

RECORD = GatewayRecord(
    id="cloudflare",
    display="Cloudflare",
    kind="cloudflare",
    tokens=("cloudflare",),
    tell_headers=("cf-ray",),
    edge=True,
    buffering=Phrasing(
        "Content-Type", "text/event-stream (POST, no caching)",
        where="{name}: the origin's streaming response, and the tunnel or cache rule in front of it",
        why="{name} releases the stream in {burst}. Cloudflare's tunnels flush `text/event-stream` but buffer "
            "other content types (cloudflared#1095), Quick Tunnels buffer SSE sent to a GET (#1449), and a "
            "cached route is held whole: serve the stream as `text/event-stream` with `Cache-Control: no-cache`, "
            "by POST, through a named tunnel, with a cache-bypass rule on the route."),
    compression=NOT_RECORDED,
    response_start=NOT_RECORDED,
    idle_timeout=IdleTimeout("Cloudflare proxy read timeout", "the origin behind Cloudflare: its headers and a "
                             "first event at once, then an event well within every 100 s (Enterprise: raise "
                             "its Proxy Read Timeout to {s} s)", 100.0,
                             "Cloudflare proxy read timeout 100 s",
                             " Below Enterprise the 100 s cannot be raised (a 524 until the first byte): send "
                             "the headers and a first event at once, then a real event (not an SSE comment, "
                             "which some hops drop) well within every 100 s."),
    connection_cap=NOT_RECORDED,
    retries=NOT_RECORDED,
    connect_timeout=NOT_RECORDED,
)
