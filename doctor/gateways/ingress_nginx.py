"""The community ingress-nginx controller (``k8s.io/ingress-nginx``): nginx as a Kubernetes Ingress, set through
annotations and its ConfigMap. Its ``Server`` header is nginx's, so only ``--gateway-kind``, its IngressClass
or its annotations' prefix name it.
"""

from __future__ import annotations

from doctor.gateways.record import NOT_RECORDED, GatewayRecord, IdleTimeout, Phrasing, Suspect

RECORD = GatewayRecord(
    id="ingress-nginx",
    display="the community ingress-nginx controller",
    kind="ingress-nginx",
    tokens=("ingress-nginx",),
    answers_as="nginx",
    ingress_controller="k8s.io/ingress-nginx",
    annotation_prefix="nginx.ingress.kubernetes.io",
    buffering=Phrasing(
        "nginx.ingress.kubernetes.io/proxy-buffering", '"off"',
        current='"on", set somewhere: the community controller does not buffer by default',
        where="{name}: the annotation on the streaming route's Ingress, and `proxy-buffering` in the "
              "controller's ConfigMap",
        why="{name} relays the stream in {burst}, although the community ingress-nginx does not buffer by "
            'default (ConfigMap `proxy-buffering: "off"`): an annotation `nginx.ingress.kubernetes.io/'
            'proxy-buffering: "on"`, the ConfigMap key or a configuration snippet turned it on (rate limiting '
            'needs it). Set the annotation to "off" on the streaming route\'s Ingress.'),
    compression=Phrasing(
        "use-gzip", '"false" (or `gzip-types` without text/event-stream)', current='"true"',
        where="{name}: the controller's ConfigMap",
        why="{name} {enc}-compresses the event stream: `use-gzip` is on in its ConfigMap with a `gzip-types` "
            "that covers the stream (the default list does not; `*` does). Turn it off, or list the types "
            "to compress without `text/event-stream`."),
    response_start=Phrasing(
        "gateway_response_start",
        '`use-gzip: "false"` (or `gzip-types` without text/event-stream), and `nginx.ingress.kubernetes.io/'
        'proxy-buffering: "off"` on the Ingress',
        where="{name}: the controller's ConfigMap and the Ingress of the streaming route",
        why="{name} holds the response headers until the body starts when its gzip filter covers the event "
        "stream (`use-gzip` with a `gzip-types` that lists it, or `*`) or the Ingress turns buffering on. Leave "
        "`text/event-stream` out of `gzip-types` and keep `proxy-buffering` off for the streaming route."),
    idle_timeout=IdleTimeout("nginx.ingress.kubernetes.io/proxy-read-timeout",
                             'the streaming route\'s Ingress: `nginx.ingress.kubernetes.io/proxy-read-timeout: "{s}"` '
                             "(seconds; `proxy-read-timeout` in the ConfigMap for all)", 60.0,
                             "ingress-nginx default proxy-read-timeout 60 s"),
    connection_cap=NOT_RECORDED,
    retries=Phrasing(
        "nginx.ingress.kubernetes.io/proxy-next-upstream", '"error"',
        where="{name}: the streaming route's Ingress, with `nginx.ingress.kubernetes.io/proxy-next-upstream-tries: "
              '"1"` and a `proxy-read-timeout` above the longest first byte',
        why="{name} sent the same request to the engine again when a try timed out (about {timeout} per try "
            "here); the engine prefills the prompt once per try and the earlier tries are abandoned."),
    connect_timeout=Phrasing(
        "nginx.ingress.kubernetes.io/proxy-connect-timeout", '"5" (seconds), under the clients\' own timeout',
        where="{name}: the route's Ingress annotation `nginx.ingress.kubernetes.io/proxy-connect-timeout` "
              "(`proxy-connect-timeout` in the ConfigMap for all; 5 s by default)",
        why="{name} waits `proxy-connect-timeout` to reach an upstream pod that does not answer the connection "
            "attempt, and `proxy-read-timeout` (60 s) for one that accepted and says nothing",
        suspect=Suspect(2)),
)
