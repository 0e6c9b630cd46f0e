"""Envoy (and Envoy Gateway): ``x-envoy-*`` headers name it; its circuit breakers queue the requests over them.
"""

from __future__ import annotations

from doctor.gateways.record import GatewayRecord, IdleTimeout, Phrasing, Suspect

RECORD = GatewayRecord(
    id="envoy",
    display="Envoy",
    kind="envoy",
    tokens=("envoy",),
    tell_headers=("x-envoy-",),
    cap_queues=True,
    buffering=Phrasing(
        "ext_proc processing_mode.response_body_mode", "STREAMED (or NONE)",
        current="BUFFERED, or a buffer filter, on the streaming route",
        where="{name}: the ext_proc filter of the streaming route (an EnvoyExtensionPolicy's "
              "`processingMode.response.body`), and no `envoy.filters.http.buffer` on it",
        why="{name} releases the stream in {burst}: an external processor in BUFFERED body mode, or a buffer "
            "filter, holds the response until its end (the Gateway API Inference Extension's vLLM stream "
            "through a Buffered ext_proc, PR #329). STREAMED hands chunks on as they come and NONE skips the "
            "body; a processor that waits for `end_of_stream` in STREAMED mode holds it all the same.",
        suspect=Suspect(8, "Envoy ext_proc body mode STREAMED")),
    compression=Phrasing(
        "envoy.filters.http.compressor", "content_type without text/event-stream",
        where="{name}: the compressor filter of the streaming route",
        why="{name} {enc}-compresses the event stream; its compressor holds output until its window fills "
            "unless flushed per event. Leave `text/event-stream` out of the filter's `content_type` list, "
            "or disable the filter on the streaming route.",
        suspect=Suspect(8, "Envoy's compressor `content_type`")),
    response_start=Phrasing(
        "gateway_response_start", "no compressor or body-buffering filter (ext_proc `BUFFERED`) on the streaming route",
        where="{name}: the HTTP filters of the streaming route",
        why="{name} sends the response head when its filters release it: a compressor that waits to fill its "
        "window, or an ext_proc/buffer filter that takes the body `BUFFERED`, holds it until the body comes. "
        "Leave `text/event-stream` out of the compressor and use ext_proc body mode `STREAMED` or `NONE`."),
    idle_timeout=IdleTimeout("stream_idle_timeout", "Envoy: the route's `idle_timeout: {s}s` (or the connection "
                             "manager's `stream_idle_timeout`), and the route `timeout: 0s` for streams", 300.0,
                             "Envoy default stream_idle_timeout 300 s",
                             " Envoy's route `timeout` (15 s by default) also ends a whole response, silent or not."),
    connection_cap=Phrasing(
        "circuit_breakers", "max_requests / max_pending_requests above the streams in flight at peak",
        where="{name}: the engine cluster's `circuit_breakers.thresholds` (Envoy Gateway: the "
              "BackendTrafficPolicy's `circuitBreaker.maxParallelRequests` / `maxPendingRequests`)",
        why="{name}'s circuit breakers bound the requests in flight to a cluster (`max_requests`, 1024 by "
            "default), those waiting for a connection (`max_pending_requests`) and the connections "
            "(`max_connections`); over them it answers 503 with `x-envoy-overloaded: true` (envoy#11908). "
            "Streams hold a request for their whole answer, so the defaults bind sooner than for short "
            "calls. Raise the thresholds to the streams the engines batch together.",
        suspect=Suspect(3, "Envoy `circuit_breakers`")),
    retries=Phrasing(
        "retry_policy", "no retry_on 5xx / reset / gateway-error for the LLM route (or num_retries: 0)",
        where="{name}: the route's `retry_policy` (and `per_try_timeout` above the longest first token)",
        why="{name} sent the same request to the engine again (about {timeout} per try here; "
            "`x-envoy-attempt-count` counts the tries): each retry prefills the prompt again and the "
            "abandoned try keeps the engine busy."),
    connect_timeout=Phrasing(
        "connect_timeout", "a few seconds, under the clients' own timeout",
        where="{name}: the engine cluster's `connect_timeout` (5 s by default)",
        why="{name} waits the cluster's `connect_timeout` to reach an endpoint that does not answer the "
            "connection attempt, then its route `timeout` for the answer",
        suspect=Suspect(5)),
)
