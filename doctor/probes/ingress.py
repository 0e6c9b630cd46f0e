"""The Ingress in front of ``--gateway``, read from the API server of the cluster the pod runs in.

Why: nginx's ``Server`` header is the same for a plain nginx, F5's NGINX Ingress Controller and
the community ingress-nginx, whose buffering defaults and settings differ (``doctor.derive.gateway``).
The Ingress whose rule host is the gateway URL's host says which: its ``ingressClassName`` and that
IngressClass's ``spec.controller``, and its streaming annotations. One bounded LIST of ingresses
per namespace (the pod's own, from the service account) and one GET of the IngressClass, each with
a whole-exchange deadline, with the pod's service account as ``doctor.probes.kubernetes`` uses it.
Everything that stops the lookup (no cluster, a 403, an API that cannot be reached) is a ``note``
in the evidence, never an error: the Ingress only sharpens how a remediation is phrased.
The pod needs ``list`` on ingresses and ``get`` on ingressclasses (deploy/kubernetes/fleet-rbac.yaml).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import httpx

from doctor.evidence import EvidenceError, IngressEvidence, IngressInfo
from doctor.foundation.wire import dig, items
from doctor.probes import kubernetes
from doctor.probes.kubernetes import KubeApi, KubeError

SOURCE = "ingress"
NETWORKING = "/apis/networking.k8s.io/v1"
LIST_LIMIT = "500"  # one page: an Ingress for the gateway's host in a larger namespace is not looked for

#: The only annotations kept: those that decide how a stream is relayed. Others can hold
#: credentials (auth URLs, configuration snippets) and never enter the bundle.
STREAMING_ANNOTATIONS = tuple(
    f"{prefix}/{key}"
    for prefix in ("nginx.ingress.kubernetes.io", "nginx.org")
    for key in ("proxy-buffering", "proxy-read-timeout", "proxy-buffer-size")
)
LEGACY_CLASS = "kubernetes.io/ingress.class"


def collect_ingress(gateway_url: str, env: Mapping[str, str] = os.environ,
                    account: Path | None = None) -> tuple[IngressEvidence, list[EvidenceError]]:
    """The Ingress whose rule host is ``gateway_url``'s host, when this runs in a pod; notes otherwise."""
    host = (urlsplit(gateway_url).hostname or "").lower()
    evidence = IngressEvidence(host=host)
    if not env.get("KUBERNETES_SERVICE_HOST"):
        evidence.note = "not in a Kubernetes pod (KUBERNETES_SERVICE_HOST is not set): no Ingress looked up"
        return evidence, []
    account = account or kubernetes.SERVICE_ACCOUNT
    try:
        api = kubernetes.in_cluster_api(env, account)
        namespace = (account / "namespace").read_text(encoding="utf-8").strip()
    except KubeError as exc:
        evidence.note = f"no Ingress looked up: {exc}"
        return evidence, []
    except OSError as exc:
        evidence.note = f"no Ingress looked up: cannot read the pod's namespace {account / 'namespace'}: {exc.strerror}"
        return evidence, []
    return lookup(host, api, [namespace]), []


def lookup(host: str, api: KubeApi, namespaces: list[str]) -> IngressEvidence:
    """The first Ingress in ``namespaces`` with a rule for ``host``, and its class's controller."""
    evidence = IngressEvidence(host=host, namespaces=list(namespaces))
    try:
        with kubernetes.api_client(api) as client:
            for namespace in namespaces:
                listed, why = _get(client, f"{api.url}{NETWORKING}/namespaces/{quote(namespace)}/ingresses",
                                   f"listing ingresses in {namespace}", "list on ingresses", {"limit": LIST_LIMIT})
                if why:
                    evidence.note = why
                    continue
                item = next((i for i in items(dig(listed, "items")) if _serves(i, host)), None)
                if item is not None:
                    evidence.ingress = _info(item, namespace)
                    break
            if evidence.ingress is None:
                evidence.note = evidence.note or f"no Ingress in {', '.join(namespaces)} has a rule for host {host}"
            elif evidence.ingress.ingress_class:
                klass = evidence.ingress.ingress_class
                doc, why = _get(client, f"{api.url}{NETWORKING}/ingressclasses/{quote(klass)}",
                                f"reading IngressClass {klass}", "get on ingressclasses")
                controller = dig(doc, "spec", "controller")
                evidence.ingress.controller = controller if isinstance(controller, str) else None
                evidence.note = why
    except (OSError, ValueError) as exc:  # a CA path that cannot be read or parsed
        evidence.note = f"cannot reach the Kubernetes API: {exc}"
    return evidence


def _get(client: httpx.Client, url: str, what: str, needs: str,
         params: Mapping[str, str] | None = None) -> tuple[Any, str | None]:
    """(parsed JSON, None), or (None, why not) for the evidence's note: a lookup that fails is no error."""
    try:
        return kubernetes.get_json(client, url, what, needs, params), None
    except KubeError as exc:
        return None, str(exc)


def _serves(item: Any, host: str) -> bool:
    """Whether one of the Ingress's rules is for ``host`` (exactly, or a ``*.`` wildcard of one label)."""
    for rule in items(dig(item, "spec", "rules")):
        ruled = dig(rule, "host")
        if not isinstance(ruled, str):
            continue
        ruled = ruled.lower()
        if ruled == host or (ruled.startswith("*.") and host.split(".", 1)[-1] == ruled[2:] and "." in host):
            return True
    return False


def _info(item: Any, namespace: str) -> IngressInfo:
    annotations = dig(item, "metadata", "annotations")
    annotations = annotations if isinstance(annotations, dict) else {}
    klass = dig(item, "spec", "ingressClassName") or annotations.get(LEGACY_CLASS)
    name = dig(item, "metadata", "name")
    return IngressInfo(
        namespace=namespace, name=name if isinstance(name, str) else "?",
        ingress_class=klass if isinstance(klass, str) else None,
        annotations={k: str(v) for k, v in annotations.items() if k in STREAMING_ANNOTATIONS})
