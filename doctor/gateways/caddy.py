"""Caddy: ``Server: Caddy`` (it appends the upstream's: ``Caddy, uvicorn``).
"""

from __future__ import annotations

from doctor.gateways.record import NOT_RECORDED, START_WHERE, GatewayRecord, IdleTimeout, Phrasing, Suspect

RECORD = GatewayRecord(
    id="caddy",
    display="Caddy",
    kind="caddy",
    tokens=("caddy",),
    buffering=Phrasing(
        "buffer_responses", "removed (`response_buffers` since v2.7); `flush_interval -1`",
        where="{name}: the `reverse_proxy` of the streaming route: `reverse_proxy engine:8000 { flush_interval -1 }`, "
              "without `buffer_responses` / `response_buffers`",
        why="{name} releases the stream in {burst}. Caddy flushes `text/event-stream` responses at once, "
            "unless the proxy buffers whole responses (`buffer_responses` before v2.7, `response_buffers` "
            "since): remove it from the streaming route; `flush_interval -1` flushes after every write "
            "whatever the content type.",
        suspect=Suspect(5, "Caddy no `response_buffers`")),
    compression=Phrasing(
        "encode", "a matcher that leaves out text/event-stream",
        where="{name}: the `encode` directive of the site: `encode { gzip\n match { header Content-Type "
              "text/html* } }` or a named matcher that excludes the streaming route",
        why="{name} {enc}-compresses the event stream: an `encode` directive without a `match` that leaves "
            "out `text/event-stream`. Compression saves nothing on events of a few dozen bytes.",
        suspect=Suspect(5, "Caddy an `encode` matcher that leaves it out")),
    response_start=Phrasing(
        "gateway_response_start", "no `buffer_responses` / `response_buffers` on the streaming reverse_proxy",
        where=START_WHERE,
        why="{name} holds the response until its buffer is done with it: a `reverse_proxy` that buffers "
        "responses (`buffer_responses`, `response_buffers`) sends headers and body together. Remove it from "
        "the streaming route.",
        suspect=Suspect(5, "Caddy `buffer_responses`/`response_buffers`")),
    idle_timeout=IdleTimeout("read_timeout", "Caddy: the streaming reverse_proxy's `transport http {{ read_timeout {s}s }}`",
                             suspect=Suspect(6, "Caddy `transport http { read_timeout }`")),
    connection_cap=NOT_RECORDED,
    retries=NOT_RECORDED,
    connect_timeout=Phrasing(
        "dial_timeout", "a few seconds, under the clients' own timeout",
        where="{name}: the reverse_proxy's `transport http { dial_timeout 5s }` (3 s by default)",
        why="{name} waits `dial_timeout` to reach an upstream that does not answer the connection attempt",
        suspect=Suspect(7)),
)
