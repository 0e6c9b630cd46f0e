"""A Node edge (``X-Powered-By: Express``): named in the advice, with no switch of its own recorded.
"""

from __future__ import annotations

from doctor.gateways.record import NOT_RECORDED, GatewayRecord

RECORD = GatewayRecord(
    id="node",
    display="the Node edge",
    kind="node",
    tokens=("express", "node"),
    buffering=NOT_RECORDED,
    compression=NOT_RECORDED,
    response_start=NOT_RECORDED,
    idle_timeout=NOT_RECORDED,
    connection_cap=NOT_RECORDED,
    retries=NOT_RECORDED,
    connect_timeout=NOT_RECORDED,
)
