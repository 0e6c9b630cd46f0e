"""``--engine k8s://namespace/service:port``: a Service's ready endpoints read from a real HTTPS
server shaped as the Kubernetes API (its answers as the API documents them: a core/v1 Service and
a discovery.k8s.io/v1 EndpointSliceList), with a service account's token and CA."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from doctor.cli import app
from doctor.probes import kubernetes
from tests.probes.test_endpoints_probe import json_route, send, serve
from tests.support.service_account import NEEDS_OPENSSL, service_account

SERVICE = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "vllm", "namespace": "inference"},
           "spec": {"ports": [{"name": "metrics", "port": 9090, "targetPort": 9090, "protocol": "TCP"},
                              {"name": "http", "port": 80, "targetPort": 8000, "protocol": "TCP"}]}}


def endpoint(address: str, ready: bool) -> dict:
    return {"addresses": [address], "conditions": {"ready": ready, "serving": ready, "terminating": False},
            "targetRef": {"kind": "Pod", "name": f"vllm-{address}"}}


SLICES = {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSliceList", "items": [
    {"addressType": "IPv4", "metadata": {"name": "vllm-abc12", "labels": {"kubernetes.io/service-name": "vllm"}},
     "ports": [{"name": "http", "port": 8000, "protocol": "TCP"}, {"name": "metrics", "port": 9090, "protocol": "TCP"}],
     "endpoints": [endpoint("10.1.0.5", True), endpoint("10.1.0.6", False)]},
    {"addressType": "IPv6", "metadata": {"name": "vllm-def34", "labels": {"kubernetes.io/service-name": "vllm"}},
     "ports": [{"name": "http", "port": 8000, "protocol": "TCP"}],
     "endpoints": [endpoint("fd00::7", True)]},
]}
SLICES_PATH = httpx.URL("http://x/apis/discovery.k8s.io/v1/namespaces/inference/endpointslices",
                        params={"labelSelector": "kubernetes.io/service-name=vllm"}).raw_path.decode()


@pytest.mark.parametrize("port", ["80", "http"])
def test_the_ready_endpoints_of_the_named_service_port(port: str) -> None:
    urls = kubernetes.ready_endpoints(SERVICE, SLICES, kubernetes.KubeService("inference", "vllm", port))
    assert urls == ["http://10.1.0.5:8000", "http://[fd00::7]:8000"]  # the pods' own port; the unready pod left out


@pytest.mark.parametrize("url", ["k8s://inference/vllm", "k8s://Inference/vllm:80", "k8s://inference/vllm:80/x"])
def test_a_malformed_target_is_refused(url: str) -> None:
    with pytest.raises(kubernetes.KubeError, match="namespace/service:port"):
        kubernetes.parse_target(url)


@NEEDS_OPENSSL
def test_the_api_is_asked_with_the_service_accounts_token_over_its_ca(tmp_path: Path) -> None:
    account, tls = service_account(tmp_path)
    routes = {"/api/v1/namespaces/inference/services/vllm": json_route(SERVICE), SLICES_PATH: json_route(SLICES)}
    with serve(routes, tls=tls) as (base, seen):
        api = kubernetes.in_cluster_api({"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": base.rsplit(":", 1)[1]}, account)
        urls = kubernetes.resolve(kubernetes.KubeService("inference", "vllm", "http"), api)
    assert urls == ["http://10.1.0.5:8000", "http://[fd00::7]:8000"]
    assert [r["authorization"] for r in seen] == ["Bearer sa-token-123"] * 2


def test_a_forbidden_answer_names_the_role_it_needs() -> None:
    routes = {"/api/v1/namespaces/inference/services/vllm": lambda h: send(h, 403, b'{"kind":"Status"}', "application/json")}
    with serve(routes) as (base, _), pytest.raises(kubernetes.KubeError, match=r"403 .*list on endpointslices"):
        kubernetes.resolve(kubernetes.KubeService("inference", "vllm", "80"), kubernetes.KubeApi(url=base, token="t"))


def test_outside_a_cluster_a_k8s_target_is_a_usage_error() -> None:
    result = CliRunner().invoke(app, ["diagnose", "--engine", "k8s://inference/vllm:80", "--no-gpu", "--no-host"],
                                env={"KUBERNETES_SERVICE_HOST": ""})
    assert result.exit_code == 2
    assert "--engine k8s://inference/vllm:80: k8s:// targets are resolved from inside a Kubernetes pod" in result.stderr
