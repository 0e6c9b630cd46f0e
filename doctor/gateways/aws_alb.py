"""An AWS Application Load Balancer in front of the gateway (``edge``): ``server: awselb/2.0`` on the errors it makes
itself, ``x-amzn-trace-id``.
"""

from __future__ import annotations

from doctor.gateways.record import NOT_RECORDED, GatewayRecord, IdleTimeout, Phrasing, Suspect

RECORD = GatewayRecord(
    id="aws-alb",
    display="AWS ALB",
    kind="aws-alb",
    tokens=("awselb", "alb"),
    tell_headers=("x-amzn-trace-id",),
    edge=True,
    buffering=Phrasing(
        "target_type", "instance or ip targets (ECS/EC2), not Lambda",
        where="{name}: the target group of the streaming route",
        why='{name} delivers the stream in {burst}. An ALB relays a chunked target\'s stream, but it does not '
            'stream Lambda responses ("application load balancer does not support streaming response from '
            'Lambda", aws-lambda-web-adapter#548): serve the route from ECS/EC2 targets, or use Lambda '
            "response streaming (a function URL or API Gateway's response streaming)."),
    compression=NOT_RECORDED,
    response_start=NOT_RECORDED,
    idle_timeout=IdleTimeout("idle_timeout.timeout_seconds", "the load balancer's attributes: "
                             "`idle_timeout.timeout_seconds = {s}` (1-4000 s)", 60.0,
                             "AWS ALB default idle timeout 60 s",
                             suspect=Suspect(8, "an AWS ALB's `idle_timeout.timeout_seconds` (60 s)")),
    connection_cap=NOT_RECORDED,
    retries=NOT_RECORDED,
    connect_timeout=NOT_RECORDED,
)
