"""F5's NGINX Ingress Controller (``nginx.org/*`` annotations). Its ``Server`` header is nginx's; compression and the
response start are nginx's own directives, so those rows are nginx's.
"""

from __future__ import annotations

from doctor.gateways.nginx import RECORD as NGINX
from doctor.gateways.record import NOT_RECORDED, GatewayRecord, IdleTimeout, Phrasing, Suspect

RECORD = GatewayRecord(
    id="f5-nginx-ingress",
    display="F5 NGINX Ingress Controller",
    kind="f5-nginx-ingress",
    tokens=("f5", "nginx-ingress", "nginx.org"),
    answers_as="nginx",
    ingress_controller="nginx.org/ingress-controller",
    annotation_prefix="nginx.org",
    uncompressed_start=NGINX.uncompressed_start,
    buffering=Phrasing(
        "nginx.org/proxy-buffering", '"False"', current='"True" (the F5 controller\'s default)',
        where='{name}: the annotation on the streaming route\'s Ingress (or `proxy-buffering: "False"` in '
              "the controller's ConfigMap for every Ingress)",
        why="{name} relays the stream in {burst}: F5's NGINX Ingress Controller buffers proxied responses by "
            'default (ConfigMap `proxy-buffering: True`). `nginx.org/proxy-buffering: "False"` passes each '
            "upstream chunk on as it arrives; an upstream can instead send `X-Accel-Buffering: no` per response."),
    compression=NGINX.compression,
    response_start=NGINX.response_start,
    idle_timeout=IdleTimeout("nginx.org/proxy-read-timeout",
                             'the streaming route\'s Ingress: `nginx.org/proxy-read-timeout: "{s}s"`', 60.0,
                             "F5 NGINX Ingress default proxy-read-timeout 60 s"),
    connection_cap=NOT_RECORDED,
    retries=NOT_RECORDED,
    connect_timeout=Phrasing(
        "nginx.org/proxy-connect-timeout", '"5s", under the clients\' own timeout',
        where="{name}: the route's Ingress annotation `nginx.org/proxy-connect-timeout` (60 s by default)",
        why="{name} waits `proxy-connect-timeout` (60 s by default) to reach an upstream that does not answer "
            "the connection attempt",
        suspect=Suspect(3)),
)
