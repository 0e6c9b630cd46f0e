"""Envoy AI Gateway: Envoy Gateway's AI extension. The proxy is Envoy, so its rows are Envoy's (``shares``).
"""

from __future__ import annotations

from doctor.gateways.envoy import RECORD as ENVOY
from doctor.gateways.record import GatewayRecord, NoSwitch

RECORD = GatewayRecord(
    id="envoy-ai-gateway",
    display="Envoy AI Gateway",
    kind="envoy-ai-gateway",
    tokens=("envoy-ai", "ai-gateway"),
    shares="envoy",
    cap_queues=True,
    buffering=ENVOY.buffering,
    compression=ENVOY.compression,
    response_start=ENVOY.response_start,
    idle_timeout=NoSwitch("no row of its own recorded (the Envoy it configures is `envoy`'s row): the generic advice names the usual suspects"),
    connection_cap=ENVOY.connection_cap,
    retries=ENVOY.retries,
    connect_timeout=ENVOY.connect_timeout,
)
