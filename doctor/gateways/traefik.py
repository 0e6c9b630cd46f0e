"""Traefik: its ``Server`` header, when it sets one, names it.
"""

from __future__ import annotations

from doctor.gateways.record import NOT_RECORDED, START_WHERE, GatewayRecord, IdleTimeout, Phrasing, Suspect

RECORD = GatewayRecord(
    id="traefik",
    display="Traefik",
    kind="traefik",
    tokens=("traefik",),
    buffering=Phrasing(
    "buffering", "no buffering middleware on the streaming router",
    where="{name}: the middlewares of the router serving the streaming route",
    why="{name} releases the stream in {burst}. Traefik streams by default; its `buffering` middleware "
        "(`maxResponseBodyBytes`) holds whole responses, a positive `flushInterval` on the service's "
        "`responseForwarding` flushes only that often (`-1` flushes at once; event streams are flushed "
        "at once whatever it says), and its `compress` middleware has withheld event streams in several "
        "releases (exclude `text/event-stream`).",
        suspect=Suspect(7, "Traefik no `buffering` middleware")),
    compression=Phrasing(
        "compress", "excludedContentTypes: [text/event-stream]",
        where="{name}: the `compress` middleware on the streaming router",
        why="Traefik's compress middleware has withheld event streams in several releases (v1, v2.2, v3.3).",
        suspect=Suspect(7, "Traefik `compress` with `excludedContentTypes: [text/event-stream]`")),
    response_start=Phrasing(
        "gateway_response_start", "no `buffering` middleware on the streaming router",
        where=START_WHERE,
        why="{name} streams the response head at once unless a middleware holds the response (`buffering`, or "
        "`compress` in the releases that withheld event streams).",
        suspect=Suspect(7, "Traefik's `buffering` middleware")),
    idle_timeout=IdleTimeout("respondingTimeouts", "Traefik: the entry point's `transport.respondingTimeouts` "
                             "(`writeTimeout`, `idleTimeout`) and the serversTransport's `forwardingTimeouts."
                             "responseHeaderTimeout`: at least {s}s, or 0 for none",
                             suspect=Suspect(7, "Traefik `respondingTimeouts`")),
    connection_cap=Phrasing(
        "inFlightReq.amount", "at least {c}, or no inFlightReq middleware on the streaming router",
        where="{name}: the `inFlightReq` middleware of the streaming router",
        why="{name}'s `inFlightReq` middleware answers 429 over `amount` requests in flight; a stream "
            "counts for its whole answer.",
        suspect=Suspect(5, "Traefik `inFlightReq`")),
    retries=NOT_RECORDED,
    connect_timeout=Phrasing(
        "forwardingTimeouts.dialTimeout", "a few seconds, under the clients' own timeout",
        where="{name}: the serversTransport's `forwardingTimeouts.dialTimeout` (30 s by default)",
        why="{name} waits `dialTimeout` to reach a server that does not answer the connection attempt, then "
            "`responseHeaderTimeout` for its head",
        suspect=Suspect(9)),
)
