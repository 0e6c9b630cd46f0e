"""A fleet named as a Kubernetes Service, ``k8s://namespace/service:port``: its ready endpoints.

Read from the API server of the cluster the pod runs in, with the pod's service account (its
token and CA under ``SERVICE_ACCOUNT``, the server from ``KUBERNETES_SERVICE_HOST``/``_PORT``),
as every in-cluster client does. Two GETs, each with a whole-exchange deadline: the Service, to
find which of its ports ``port`` names (by number or by name), and its EndpointSlices
(``discovery.k8s.io/v1``, labelled ``kubernetes.io/service-name``), whose ports carry the Service
port's name and the pod's own port number. Endpoints that are not ready are left out: a pod
still loading its weights is not a replica users reach. Hand-written over httpx rather than
taking the ``kubernetes`` client, a large dependency for two GETs. The pod needs ``get`` on
services and ``list`` on endpointslices in that namespace (deploy/kubernetes/watch.yaml's Role).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from doctor.foundation import wire
from doctor.foundation.wire import dig, items
from doctor.probes.http import bounded_get, http_client

SCHEME = "k8s://"
SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
DEADLINE_S = 10.0
_TARGET = re.compile(r"k8s://(?P<namespace>[a-z0-9]([-a-z0-9]*[a-z0-9])?)/(?P<service>[a-z0-9]([-a-z0-9]*[a-z0-9])?)"
                     r":(?P<port>[0-9]{1,5}|[a-z0-9]([-a-z0-9]*[a-z0-9])?)")


class KubeError(Exception):
    """The Service could not be resolved; the message says why, for a usage error. ``status``: the
    API's HTTP status when it answered with one (403: the Role lacks a verb; 404: no such object,
    or a resource this API server does not serve), None when it could not be asked."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class KubeService:
    """A ``k8s://namespace/service:port`` target, parsed; ``port`` stays a string because a Service port
    may be named by its number or by its name.
    """

    namespace: str
    service: str
    port: str  # a Service port's number or name


@dataclass(frozen=True)
class KubeApi:
    """Where the Kubernetes API is and how to authenticate: its URL, the bearer token (None: no
    ``Authorization`` header) and ``verify``, httpx's (a CA file path, or a bool).
    """

    url: str
    token: str | None = None
    verify: bool | str = True


def parse_target(url: str) -> KubeService:
    """``k8s://namespace/service:port`` (DNS-1123 labels; the port a number or a name)."""
    match = _TARGET.fullmatch(url)
    if match is None:
        raise KubeError(f"{url!r} is not k8s://namespace/service:port")
    return KubeService(match["namespace"], match["service"], match["port"])


def in_cluster_api(env: Mapping[str, str] = os.environ, account: Path | None = None) -> KubeApi:
    """The API server and credentials of the pod this runs in (``account``: the service account's
    directory, ``SERVICE_ACCOUNT`` as read when called); ``KubeError`` outside a cluster."""
    account = account or SERVICE_ACCOUNT
    host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT", "443")
    if not host:
        raise KubeError("k8s:// targets are resolved from inside a Kubernetes pod (KUBERNETES_SERVICE_HOST is not set)")
    try:
        token = (account / "token").read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise KubeError(f"cannot read the service account token {account / 'token'}: {exc.strerror}") from None
    ca = account / "ca.crt"
    return KubeApi(url=f"https://{f'[{host}]' if ':' in host else host}:{port}", token=token,
                   verify=str(ca) if ca.is_file() else True)


def resolve(target: KubeService, api: KubeApi) -> list[str]:
    """``http://address:port`` of every ready endpoint of the Service's port, sorted."""
    ns, svc = quote(target.namespace), quote(target.service)
    where = f"for {target.namespace}/{target.service}"
    needs = "get on services and list on endpointslices"
    try:
        with api_client(api) as client:
            service = get_json(client, f"{api.url}/api/v1/namespaces/{ns}/services/{svc}", where, needs)
            slices = get_json(client, f"{api.url}/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices", where, needs,
                              params={"labelSelector": f"kubernetes.io/service-name={target.service}"})
    except (OSError, ValueError) as exc:  # a CA path that cannot be read or parsed
        raise KubeError(f"cannot reach the Kubernetes API {where}: {exc}") from None
    return ready_endpoints(service, slices, target)


def api_client(api: KubeApi) -> httpx.Client:
    """The one client of an exchange with the API: the service account's token and CA, ``DEADLINE_S``."""
    headers = {"Authorization": f"Bearer {api.token}"} if api.token else {}
    return http_client(headers, api.verify, DEADLINE_S)


def get_json(client: httpx.Client, url: str, what: str, needs: str, params: Mapping[str, str] | None = None,
             deadline_s: float = DEADLINE_S) -> Any:
    """One GET of the API within ``deadline_s`` (at most ``DEADLINE_S``), parsed; ``KubeError``
    saying ``what`` failed and, on a refusal, the verbs the pod's Role ``needs``."""
    try:
        response, text = bounded_get(client, url, deadline_s=min(deadline_s, DEADLINE_S), params=params)
    except Exception as exc:  # noqa: BLE001 - every transport failure is one reason
        raise KubeError(f"cannot reach the Kubernetes API {what}: {exc}") from None
    if response.status_code != 200:
        raise KubeError(f"the Kubernetes API answered {response.status_code} {what} (the pod's Role needs {needs})",
                        status=response.status_code)
    try:
        return wire.loads(text)
    except wire.WireError as exc:
        raise KubeError(f"the Kubernetes API's answer {what} is not JSON: {exc}") from None


def ready_endpoints(service: Any, slices: Any, target: KubeService) -> list[str]:
    """The ready endpoints' URLs from a Service and its EndpointSliceList (parsed JSON, any shape)."""
    ports = [p for p in items(dig(service, "spec", "ports")) if isinstance(p, dict)]
    chosen = next((p for p in ports if str(p.get("port")) == target.port or p.get("name") == target.port), None)
    if chosen is None:
        raise KubeError(f"the Service {target.namespace}/{target.service} has no port {target.port}")
    name = chosen.get("name") or ""
    urls = set()
    for item in items(dig(slices, "items")):
        numbers = [p.get("port") for p in items(dig(item, "ports")) if isinstance(p, dict) and (p.get("name") or "") == name]
        number = next((n for n in numbers if isinstance(n, int) and 0 < n < 65536), None)
        if number is None:
            continue
        for endpoint in items(dig(item, "endpoints")):
            if dig(endpoint, "conditions", "ready") is False:
                continue
            for address in items(dig(endpoint, "addresses"))[:1]:  # the addresses of one endpoint are one pod
                if isinstance(address, str) and address:
                    urls.add(f"http://{f'[{address}]' if ':' in address else address}:{number}")
    if not urls:
        raise KubeError(f"the Service {target.namespace}/{target.service} has no ready endpoint on port {target.port}")
    return sorted(urls)
