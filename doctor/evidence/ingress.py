"""The Kubernetes Ingress whose rule host is the gateway URL's host, as the API server has it.

Headers cannot tell a plain nginx from F5's NGINX Ingress Controller or the community
ingress-nginx (all send nginx's ``Server``); the Ingress object can: its class's controller, and
its annotations. Only the annotations that decide how a stream is relayed are kept
(``doctor.probes.ingress.STREAMING_ANNOTATIONS``): others can hold credentials (auth URLs,
snippets), so they never enter the bundle. Optional in the bundle: a run outside a cluster, or
one from before this probe, has none, and a lookup that could not be made says why in ``note``.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class IngressInfo:
    """The Ingress found for the gateway's host: where it lives, its class and controller (which
    nginx this is) and the annotations that change how a stream is relayed."""

    namespace: str
    name: str
    ingress_class: str | None = None  # spec.ingressClassName (else the legacy kubernetes.io/ingress.class)
    controller: str | None = None  # that IngressClass's spec.controller, when it could be read
    annotations: dict[str, str] = field(default_factory=dict)  # the streaming ones only


@dataclass
class IngressEvidence:
    """The ``ingress`` kind: the lookup of the Ingress in front of ``--gateway`` (see the module
    docstring), with ``note`` saying why there is no answer when there is none."""

    host: str  # the --gateway URL's host, matched against the rules' hosts
    namespaces: list[str] = field(default_factory=list)  # the namespaces listed
    ingress: IngressInfo | None = None  # None: none found, or the lookup could not be made
    note: str | None = None  # why there is no answer (outside a cluster, a 403), or what was partial
