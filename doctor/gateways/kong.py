"""Kong, the API gateway built on nginx: ``Via: 1.1 kong/3.6.0`` and its ``x-kong-*`` headers name it.
"""

from __future__ import annotations

from doctor.gateways.record import NOT_RECORDED, GatewayRecord, IdleTimeout, Phrasing, Suspect

RECORD = GatewayRecord(
    id="kong",
    display="Kong",
    kind="kong",
    tokens=("kong",),
    tell_headers=("x-kong-",),
    buffering=Phrasing(
        "response_buffering", "false", current="true (Kong's Route default)",
        where="{name}: the Route of the streaming path",
        why="{name} releases the stream in {burst}: Kong, built on nginx, buffers proxied responses per Route "
            "by default. `response_buffering: false` on the streaming Route passes chunks on as they come; "
            "the upstream can instead send `X-Accel-Buffering: no` (Kong's SSE guide)."),
    compression=NOT_RECORDED,
    response_start=Phrasing(
        "gateway_response_start", "`response_buffering: false` on the streaming route",
        where="{name}: the Route (or Service) of the streaming path",
        why="{name} buffers the upstream's response by default (`response_buffering: true`), its head "
        "included; turn it off on the streaming route."),
    idle_timeout=IdleTimeout("read_timeout", "Kong: the Service of the streaming route: `read_timeout: {s}000` "
                             "(milliseconds)", 60.0, "Kong default Service read_timeout 60 s"),
    connection_cap=NOT_RECORDED,
    retries=NOT_RECORDED,
    connect_timeout=Phrasing(
        "connect_timeout", "a few seconds (e.g. 5000 ms), under the clients' own timeout",
        where="{name}: the Service of the engine route: `connect_timeout: 5000` (milliseconds; 60000 by default)",
        why="{name} waits the Service's `connect_timeout` to reach an upstream that does not answer the "
            "connection attempt",
        suspect=Suspect(10)),
)
