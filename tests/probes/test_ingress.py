"""The Ingress in front of ``--gateway`` names the nginx controller that headers cannot: a real nginx
that buffers the stream, and a real HTTPS server shaped as the Kubernetes API (a
networking.k8s.io/v1 IngressList and IngressClass as the API documents them) reached with a
service account's token and CA, as in a pod."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from doctor import bundle as bundles
from doctor.checklib import buffering_remediation
from doctor.derive.gateway import identify
from doctor.evidence import Bundle, IngressInfo
from doctor.probes import ingress, kubernetes
from tests.derive.test_gateways import PROXY, SCHEDULE, diagnose
from tests.probes.test_endpoints_probe import json_route, send, serve
from tests.support.nginx import NEEDS_NGINX, run_nginx
from tests.support.service_account import NEEDS_OPENSSL, TOKEN, service_account
from tests.support.sse_server import SseServer

LIST = "/apis/networking.k8s.io/v1/namespaces/inference/ingresses?limit=500"
CLASSES = "/apis/networking.k8s.io/v1/ingressclasses/"
COMMUNITY = {"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass", "metadata": {"name": "nginx"},
             "spec": {"controller": "k8s.io/ingress-nginx"}}
F5 = {"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass", "metadata": {"name": "nginx-plus"},
      "spec": {"controller": "nginx.org/ingress-controller"}}


def ingress_for(host: str, klass: str, annotations: dict[str, str]) -> dict:
    return {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": "chat", "namespace": "inference", "annotations": annotations},
            "spec": {"ingressClassName": klass, "rules": [{"host": host, "http": {"paths": [
                {"path": "/", "pathType": "Prefix", "backend": {"service": {"name": "vllm", "port": {"number": 80}}}}]}}]}}


def ingress_list(*items: dict) -> dict:
    other = ingress_for("other.example.com", "nginx", {})
    other["metadata"]["name"] = "other"
    return {"apiVersion": "networking.k8s.io/v1", "kind": "IngressList", "items": [other, *items]}


@pytest.fixture
def pod(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A service account directory (token, CA, namespace) and the TLS context of an API server it trusts."""
    if not shutil.which("openssl"):
        pytest.skip("needs the openssl command to make a certificate (apt-get install openssl)")
    account, tls = service_account(tmp_path)
    monkeypatch.setattr(kubernetes, "SERVICE_ACCOUNT", account)

    def in_cluster(base: str) -> None:
        monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
        monkeypatch.setenv("KUBERNETES_SERVICE_PORT", base.rsplit(":", 1)[1])

    return tls, in_cluster


@pytest.mark.nginx
@NEEDS_NGINX
@pytest.mark.parametrize(
    ("klass", "annotations", "setting", "named", "said"),
    [
        (COMMUNITY, {}, "nginx.ingress.kubernetes.io/proxy-buffering", "community ingress-nginx", "does not buffer by default"),
        (F5, {"nginx.org/proxy-read-timeout": "300s"}, "nginx.org/proxy-buffering", "F5 NGINX Ingress", "buffers proxied responses by default"),
        # the annotation already turns buffering off, yet the stream arrives in bursts: said so
        (F5, {"nginx.org/proxy-buffering": "False"}, "nginx.org/proxy-buffering", "F5 NGINX Ingress", "something else buffers"),
    ],
)
def test_the_ingress_for_the_gateways_host_names_the_controller(pod, klass, annotations, setting, named, said):
    tls, in_cluster = pod
    secret = {"nginx.ingress.kubernetes.io/auth-url": "https://user:hunter2@auth.example.com/"}
    with SseServer() as server:
        engine = server.base(**SCHEDULE, framing="close")
        with run_nginx(PROXY, server.port) as gateway_url:
            routes = {LIST: json_route(ingress_list(ingress_for("127.0.0.1", klass["metadata"]["name"], {**annotations, **secret}))),
                      CLASSES + klass["metadata"]["name"]: json_route(klass)}
            with serve(routes, tls=tls) as (base, seen):
                in_cluster(base)
                _, findings, gateway = diagnose(engine, gateway_url + engine[len(server.url):])
    assert [r["authorization"] for r in seen] == [f"Bearer {TOKEN}"] * 2  # one LIST, one GET of the class
    rem = findings["LD301"].remediation
    assert rem.setting == setting and said in rem.why
    assert named in gateway.name and "Ingress inference/chat" in gateway.name
    assert not gateway.primary.inferred and gateway.primary.source == "Ingress inference/chat"
    identified = next(e for e in findings["LD301"].evidence if e.name == "gateway identified")
    assert identified.source.startswith("Ingress inference/chat") and "server: nginx" in identified.source
    if "nginx.org/proxy-buffering" in annotations:
        assert rem.current == '"False" on Ingress inference/chat'


@NEEDS_OPENSSL
def test_only_the_streaming_annotations_are_kept_and_old_bundles_load(pod) -> None:
    tls, in_cluster = pod
    annotations = {"nginx.org/proxy-buffering": "True", "nginx.org/server-snippets": "auth_basic_user_file /secret;",
                   "nginx.ingress.kubernetes.io/auth-url": "https://user:hunter2@auth.example.com/"}
    routes = {LIST: json_route(ingress_list(ingress_for("llm.example.com", "nginx-plus", annotations))),
              CLASSES + "nginx-plus": json_route(F5)}
    with serve(routes, tls=tls) as (base, _):
        in_cluster(base)
        evidence, errors = ingress.collect_ingress("https://LLM.example.com/v1")
    assert errors == [] and evidence.note is None and evidence.namespaces == ["inference"]
    assert evidence.ingress == IngressInfo("inference", "chat", "nginx-plus", "nginx.org/ingress-controller",
                                           {"nginx.org/proxy-buffering": "True"})
    assert "hunter2" not in bundles.dumps(Bundle(ingress=evidence))
    old = json.loads(bundles.dumps(Bundle()))
    old.pop("ingress")
    assert bundles.from_dict(old).ingress is None  # a bundle from before this probe loads
    assert bundles.from_dict(json.loads(bundles.dumps(Bundle(ingress=evidence)))).ingress == evidence


def test_a_forbidden_list_is_a_note_and_the_nginx_stays_inferred() -> None:
    routes = {LIST: lambda h: send(h, 403, b'{"kind":"Status","reason":"Forbidden"}', "application/json")}
    with serve(routes) as (base, _):
        evidence = ingress.lookup("llm.example.com", kubernetes.KubeApi(url=base, token="t"), ["inference"])
    assert evidence.ingress is None
    assert evidence.note is not None and "403" in evidence.note and "list on ingresses" in evidence.note
    view = identify([{"server": "nginx/1.25.3"}], None, evidence.ingress)
    assert view.primary is not None and view.primary.inferred and view.family == "nginx"


def test_outside_a_cluster_nothing_is_asked() -> None:
    evidence, errors = ingress.collect_ingress("https://llm.example.com", env={})
    assert errors == [] and evidence.ingress is None and "not in a Kubernetes pod" in (evidence.note or "")


def test_an_unreadable_class_falls_back_to_the_annotations_prefix_and_never_renames_another_gateway() -> None:
    community = IngressInfo("inference", "chat", "nginx", None, {"nginx.ingress.kubernetes.io/proxy-buffering": "off"})
    view = identify([{"server": "nginx"}], None, community)
    assert view.family == "ingress-nginx"
    rem = buffering_remediation(view, "bursts", "verify")
    assert rem.current == '"off" on Ingress inference/chat' and "something else buffers" in rem.why
    # an Envoy that answered is not an nginx controller, whatever Ingress holds the host
    assert identify([{"server": "envoy"}], None, community).family == "envoy"
    # --gateway-kind still wins
    assert identify([{"server": "nginx"}], "f5-nginx-ingress", community).family == "f5-nginx-ingress"
