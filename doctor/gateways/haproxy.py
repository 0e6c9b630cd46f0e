"""HAProxy: it adds no header of its own by default (``--gateway-kind`` names it); its ``maxconn`` queues streams.
"""

from __future__ import annotations

from doctor.gateways.record import START_WHERE, GatewayRecord, IdleTimeout, Phrasing, Suspect

RECORD = GatewayRecord(
    id="haproxy",
    display="HAProxy",
    kind="haproxy",
    tokens=("haproxy",),
    cap_queues=True,
    buffering=Phrasing(
        "option http-no-delay", "set in the streaming route's backend (or frontend)",
        current="not set (HAProxy default: wait for full packets)",
        where="{name}: the `backend` (or `frontend`) serving the streaming route",
        why="{name} releases the stream in {burst}: by default HAProxy asks the kernel to wait for enough "
            "data to send full packets (about 200 ms per round trip, its configuration manual says), so "
            "small token events leave together. `option http-no-delay` sends each at once, at some cost in "
            "bandwidth and CPU: set it only where tokens stream.",
        suspect=Suspect(2, "HAProxy `option http-no-delay`")),
    compression=Phrasing(
        "compression type", "without text/event-stream",
        where="{name}: the `compression type` line of the frontend or backend serving the streaming route",
        why="{name} {enc}-compresses the event stream (`compression algo` with `text/event-stream` in "
            "`compression type`); a compressor holds small events until its window fills. Leave the "
            "type out of `compression type`.",
        suspect=Suspect(3, "HAProxy `compression type` without it")),
    response_start=Phrasing(
        "gateway_response_start", "`option http-no-delay` in the streaming route's backend",
        where=START_WHERE,
        why="{name} waits for full packets before it sends (HAProxy's default network optimisation, about 200 ms "
        "per round trip), so the small response head leaves with the first events. `option http-no-delay` "
        "sends each part at once.",
        suspect=Suspect(4, "HAProxy without `option http-no-delay`")),
    idle_timeout=IdleTimeout("timeout server", "HAProxy: `timeout server {s}s` in the streaming route's backend "
                             "(HAProxy has no default: the configuration's value decides)",
                             suspect=Suspect(3, "HAProxy `timeout server`")),
    connection_cap=Phrasing(
        "maxconn", "at least {c}, up to the engine's batch size (vLLM --max-num-seqs), on the server line",
        where="{name}: the `server` line of the backend that proxies the engine, e.g. "
              "`server vllm1 10.0.0.5:8000 maxconn 64`",
        why="{name} lets at most `maxconn` streams through to each server and holds the rest in its backend "
            "queue (503 once `timeout queue` runs out). A stream holds its slot for its whole answer, so each "
            "request behind the cap waits whole answers while the engine, which batches, has room. Raise "
            "`maxconn` to what the engine batches, so that any queue is the engine's own and shows in its "
            "metrics; `timeout queue` only decides how soon the waiting ones get a 503.",
        suspect=Suspect(1, "HAProxy `maxconn` on the server line")),
    retries=Phrasing(
        "retry-on", "conn-failure only, and no `option redispatch` for the engine's backend",
        where="{name}: the engine's backend: `retries 1`, `retry-on conn-failure`, and `timeout server` above "
              "the longest answer",
        why="{name} sent the same request to the engine again (about {timeout} per try here): `retry-on` "
            "with response timeouts or 5xx, or `option redispatch`, replays a POST whose prompt the engine "
            "already started to prefill, and the earlier try is abandoned."),
    connect_timeout=Phrasing(
        "timeout connect", "a few seconds (e.g. 5s), under the clients' own timeout",
        where="{name}: `timeout connect 5s` in the engine's backend (or `defaults`)",
        why="{name} waits `timeout connect` to reach a server that does not answer the connection attempt "
            "(no default: the configuration's value decides), and `timeout server` for one that says nothing",
        suspect=Suspect(4)),
)
