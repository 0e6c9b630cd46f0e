"""``--engine k8s://namespace/service:port`` reads the autoscalers of the workload behind the Service:
a real HTTPS server shaped as the Kubernetes API (a core/v1 Service and PodList, discovery.k8s.io/v1
EndpointSlices, apps/v1 ReplicaSet and Deployment, an autoscaling/v2 HPA list and a keda.sh
ScaledObject list, each as the API documents it, with status), reached with a service account's
token and CA, in front of a real local engine (the SSE test server) whose /metrics is a recorded
real vLLM scrape. The specs are the project's own deploy/ examples; their status is what a
controller writes."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from typer.testing import CliRunner

from doctor.cli import app
from doctor.probes import kubernetes, scalers
from doctor.scalers import RECORDS
from tests.probes.test_endpoints_probe import json_route, send, serve
from tests.support.service_account import NEEDS_OPENSSL, TOKEN, service_account
from tests.support.sse_server import SseServer

ROOT = Path(__file__).resolve().parents[2]
NS = "inference"
UNSCHEDULABLE = "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."
REAL_SCRAPE = ROOT / "fixtures" / "real-vllm" / "lora" / "0.32.0-cpu-two-adapters-one-slot.prom"  # 2 requests waiting


def deploy_object(path: str) -> dict[str, Any]:
    return next(d for d in yaml.safe_load_all((ROOT / "deploy" / path).read_text()) if d)


def items(kind: str, api_version: str, *objects: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": f"{kind}List", "metadata": {"resourceVersion": "4711"}, "items": list(objects)}


def owned_by(kind: str, name: str, api_version: str = "apps/v1") -> list[dict[str, Any]]:
    return [{"apiVersion": api_version, "kind": kind, "name": name, "uid": f"uid-{name}", "controller": True,
             "blockOwnerDeletion": True}]


SERVICE = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "vllm", "namespace": NS},
           "spec": {"selector": {"app": "vllm"}, "ports": [{"name": "http", "port": 80, "targetPort": 8000, "protocol": "TCP"}]}}


def pod(name: str, phase: str, scheduled: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "labels": {"app": "vllm", "pod-template-hash": "7d9f"},
                         "creationTimestamp": "2026-12-06T03:59:00Z", "ownerReferences": owned_by("ReplicaSet", "vllm-7d9f")},
            "spec": {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.11.0",
                                     "env": [{"name": "HF_TOKEN", "value": "hf_secretsecretsecret"}],
                                     "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
            "status": {"phase": phase, "conditions": [{"type": "PodScheduled", "lastTransitionTime": "2026-12-06T03:59:00Z", **scheduled}]}}


PODS = items("Pod", "v1",
             pod("vllm-7d9f-a1", "Running", {"status": "True"}),
             pod("vllm-7d9f-b2", "Pending", {"status": "False", "reason": "Unschedulable", "message": UNSCHEDULABLE}))
REPLICA_SET = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
               "metadata": {"name": "vllm-7d9f", "namespace": NS, "ownerReferences": owned_by("Deployment", "vllm")},
               "spec": {"replicas": 2}, "status": {"replicas": 2, "readyReplicas": 1}}
DEPLOYMENT = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "vllm", "namespace": NS},
              "spec": {"replicas": 2}, "status": {"replicas": 2, "readyReplicas": 1, "unavailableReplicas": 1}}


def with_status(obj: dict[str, Any], status: dict[str, Any], **meta: Any) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    obj["metadata"].update(meta, managedFields=[{"manager": "kubectl", "operation": "Apply"}],
                           annotations={"kubectl.kubernetes.io/last-applied-configuration": json.dumps(obj)})
    obj["status"] = status
    return obj


def condition(kind: str, status: str, reason: str, message: str) -> dict[str, str]:
    return {"type": kind, "status": status, "reason": reason, "message": message, "lastTransitionTime": "2026-12-06T03:58:00Z"}


HPA = with_status(deploy_object("hpa/hpa.yaml"), {
    "currentReplicas": 2, "desiredReplicas": 8, "lastScaleTime": "2026-12-06T03:59:00Z",
    "currentMetrics": [{"type": "Pods", "pods": {"metric": {"name": "vllm_num_requests_waiting"}, "current": {"averageValue": "9"}}}],
    "conditions": [condition("AbleToScale", "True", "SucceededRescale", "the HPA controller was able to update the target scale to 8"),
                   condition("ScalingActive", "True", "ValidMetricFound", "the HPA was able to successfully calculate a replica count from pods metric vllm_num_requests_waiting"),
                   condition("ScalingLimited", "True", "TooManyReplicas", "the desired replica count is more than the maximum replica count")]})
SCALED_OBJECT = with_status(deploy_object("keda/scaledobject.yaml"), {
    "scaleTargetKind": "apps/v1.Deployment", "scaleTargetGVKR": {"group": "apps", "kind": "Deployment", "resource": "deployments", "version": "v1"},
    "originalReplicaCount": 1, "hpaName": "keda-hpa-vllm", "lastActiveTime": "2026-12-06T03:59:30Z",
    "conditions": [condition("Ready", "True", "ScaledObjectReady", "ScaledObject is defined correctly and is ready for scaling"),
                   condition("Active", "True", "ScalerActive", "Scaling is performed because triggers are active"),
                   condition("Fallback", "False", "NoFallbackFound", "No fallbacks are active on this scaled object")],
    "health": {"s0-prometheus": {"numberOfFailures": 0, "status": "Happy"}}})
#: The HPA KEDA generates for the ScaledObject: owned by it, targeting the same Deployment.
GENERATED = with_status({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                         "metadata": {"name": "keda-hpa-vllm", "namespace": NS},
                         "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "vllm"},
                                  "minReplicas": 1, "maxReplicas": 8,
                                  "metrics": [{"type": "External", "external": {"metric": {"name": "s0-prometheus"},
                                                                                "target": {"type": "AverageValue", "averageValue": "4"}}}]}},
                        {"currentReplicas": 2, "desiredReplicas": 3,
                         "conditions": [condition("ScalingActive", "True", "ValidMetricFound", "the HPA was able to successfully calculate a replica count from external metric s0-prometheus")]},
                        ownerReferences=owned_by("ScaledObject", "vllm", "keda.sh/v1alpha1"))
#: An HPA of another workload in the namespace: never read as this Service's.
OTHER = with_status(deploy_object("hpa/hpa.yaml"), {"currentReplicas": 4, "desiredReplicas": 4, "conditions": []})
OTHER["metadata"]["name"] = "embedder"
OTHER["spec"]["scaleTargetRef"]["name"] = "embedder"


def path(url: str, **params: str) -> str:
    return httpx.URL(f"http://x{url}", params=params).raw_path.decode()


def api_routes(engine_port: int, *, forbid: str | None = None) -> dict[str, Any]:
    """The API's answers; ``forbid``: a resource list answered 403, as RBAC refuses it."""
    slices = items("EndpointSlice", "discovery.k8s.io/v1", {
        "addressType": "IPv4", "metadata": {"name": "vllm-abc12", "labels": {"kubernetes.io/service-name": "vllm"}},
        "ports": [{"name": "http", "port": engine_port, "protocol": "TCP"}],
        "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}, "targetRef": {"kind": "Pod", "name": "vllm-7d9f-a1"}}]})
    forbidden = b'{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403}'
    routes: dict[str, Any] = {
        f"/api/v1/namespaces/{NS}/services/vllm": json_route(SERVICE),
        path(f"/apis/discovery.k8s.io/v1/namespaces/{NS}/endpointslices", labelSelector="kubernetes.io/service-name=vllm"): json_route(slices),
        path(f"/api/v1/namespaces/{NS}/pods", labelSelector="app=vllm", limit="500"): json_route(PODS),
        f"/apis/apps/v1/namespaces/{NS}/replicasets/vllm-7d9f": json_route(REPLICA_SET),
        f"/apis/apps/v1/namespaces/{NS}/deployments/vllm": json_route(DEPLOYMENT),
        path(f"/apis/autoscaling/v2/namespaces/{NS}/horizontalpodautoscalers", limit="500"):
            json_route(items("HorizontalPodAutoscaler", "autoscaling/v2", OTHER, HPA, GENERATED)),
        path(f"/apis/keda.sh/v1alpha1/namespaces/{NS}/scaledobjects", limit="500"):
            json_route(items("ScaledObject", "keda.sh/v1alpha1", SCALED_OBJECT)),
    }  # every other product's list: 404, as an API server without that CRD answers
    if forbid:
        key = next(k for k in routes if f"/{forbid}?" in k)
        routes[key] = lambda h: send(h, 403, forbidden, "application/json")
    return routes


def asked(url: str) -> tuple[str, str, str]:
    """(API group, resource, verb) of one request the API server saw: a collection is a list."""
    parts = url.split("?", 1)[0].strip("/").split("/")
    group, rest = ("", parts[2:]) if parts[0] == "api" else (parts[1], parts[3:])
    return group, rest[2], "get" if len(rest) > 3 else "list"


@pytest.fixture
def pod_account(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A service account directory and the TLS context of an API server it trusts, as in a pod."""
    account, tls = service_account(tmp_path, NS)
    monkeypatch.setattr(kubernetes, "SERVICE_ACCOUNT", account)
    return tls


def diagnose(tls: Any, tmp_path: Path, **routes_kw: Any) -> tuple[dict[str, Any], list[dict[str, str]], str]:
    """``diagnose --engine k8s://inference/vllm:80`` against the API server and a real engine;
    (the JSON report, the API requests seen, the saved bundle's text)."""
    scrape = REAL_SCRAPE.read_bytes()
    metrics_routes = {"/metrics": lambda h: send(h, 200, scrape, "text/plain; version=0.0.4")}
    with SseServer() as engine, serve(metrics_routes) as (metrics_base, _), \
            serve(api_routes(engine.port, **routes_kw), tls=tls) as (api_base, seen):
        env = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": api_base.rsplit(":", 1)[1]}
        bundle = tmp_path / "bundle.json"
        result = CliRunner().invoke(app, ["diagnose", "--engine", f"k8s://{NS}/vllm:80", "--metrics-url", f"{metrics_base}/metrics",
                                          "--requests", "2", "--warmup", "0", "--no-gpu", "--no-host", "--route", "chat",
                                          "--json", "-", "--bundle", str(bundle)], env=env)
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout), seen, bundle.read_text()


@NEEDS_OPENSSL
def test_a_k8s_diagnosis_names_the_scaler_behind_the_service_and_what_it_did(pod_account, tmp_path: Path) -> None:
    report, seen, saved = diagnose(pod_account, tmp_path)
    findings = {f["code"]: f for f in report["findings"]}
    # the HPA wanted 8 = its ceiling while 2 requests waited in the engine's queue
    stuck = findings["LD609"]
    assert "HorizontalPodAutoscaler inference/vllm" in stuck["summary"] and "TooManyReplicas" in stuck["summary"]
    assert stuck["remediation"]["setting"] == "spec.maxReplicas" and stuck["remediation"]["current"] == "8"
    assert "embedder" not in json.dumps(report["findings"])  # another workload's HPA is not this Service's
    # the replica it asked for cannot be placed: no GPU free
    pending = findings["LD610"]
    assert pending["summary"].startswith("Deployment/vllm: 1 of 2 pod(s) Pending (Unschedulable: 0/4 nodes are available")
    assert "Insufficient nvidia.com/gpu" in pending["summary"]
    view = report["views"]["scalers"]
    assert view["origin"] == "the Kubernetes API" and view["workload"] == "Deployment/vllm"
    assert sorted((s["kind"], s["name"]) for s in view["scalers"]) == [("HorizontalPodAutoscaler", "vllm"), ("ScaledObject", "vllm")]
    # KEDA's generated HPA is read as the ScaledObject's status, not judged a second time
    keda = next(s for s in view["scalers"] if s["kind"] == "ScaledObject")
    assert (keda["status"]["current"], keda["status"]["desired"]) == (2, 3)
    assert {c["type"] for c in keda["status"]["conditions"]} == {"Ready", "Active", "Fallback", "ScalingActive"}
    assert any("keda-hpa-vllm" in s and "generated by ScaledObject inference/vllm" in s for s in view["skipped"])
    assert not view["problems"]
    absent = {f"{plural}.{group}" for r in RECORDS for group, plural, _ in r.resources} - {
        "horizontalpodautoscalers.autoscaling", "scaledobjects.keda.sh"}
    assert set(view["absent"]) == absent  # CRDs not installed: no problem, no finding
    # every request carried the service account's token and is one the Role grants
    # (scalers.requests(), which tests/project/test_deploy.py holds the Role to); the owners were read once each
    assert {r["authorization"] for r in seen} == {f"Bearer {TOKEN}"}
    statefulset = ("apps", "statefulsets", "get")  # no StatefulSet in this chain
    assert {asked(r["path"]) for r in seen} | {statefulset} == {("discovery.k8s.io", "endpointslices", "list"), *scalers.requests()}
    assert [r["path"] for r in seen].count(f"/apis/apps/v1/namespaces/{NS}/replicasets/vllm-7d9f") == 1
    # what no rule reads, and a token set inline in a pod template, never reach the bundle
    assert "hf_secretsecretsecret" not in saved and "managedFields" not in saved and "last-applied-configuration" not in saved


@NEEDS_OPENSSL
def test_a_refused_list_names_the_permission_and_the_run_goes_on(pod_account, tmp_path: Path) -> None:
    report, _, _ = diagnose(pod_account, tmp_path, forbid="scaledobjects")
    view = report["views"]["scalers"]
    assert view["problems"] == [(f"forbidden (403): list scaledobjects.keda.sh in namespace {NS}; the pod's Role needs it "
                                 "(deploy/kubernetes/fleet-rbac.yaml), read on without it")]
    # without its ScaledObject, KEDA's HPA stays an HPA: its status is still evidence
    assert sorted(s["name"] for s in view["scalers"]) == ["keda-hpa-vllm", "vllm"]
    findings = {f["code"]: f for f in report["findings"]}
    assert "HorizontalPodAutoscaler inference/vllm" in findings["LD609"]["summary"] and "LD610" in findings
    assert report["verdict"] is not None


def test_an_unreachable_api_is_one_problem_and_no_objects() -> None:
    with serve({}) as (base, _):
        pass  # the server is gone: its port refuses
    evidence = scalers.read_scalers(kubernetes.KubeService(NS, "vllm", "80"), kubernetes.KubeApi(url=base, token="t"), 5.0)
    assert evidence.objects == [] and len(evidence.problems) == 1 and "cannot reach the Kubernetes API" in evidence.problems[0]


def test_a_service_without_a_selector_says_so() -> None:
    routes = {f"/api/v1/namespaces/{NS}/services/vllm": json_route({**SERVICE, "spec": {"ports": SERVICE["spec"]["ports"]}})}
    with serve(routes) as (base, seen):
        evidence = scalers.read_scalers(kubernetes.KubeService(NS, "vllm", "80"), kubernetes.KubeApi(url=base, token="t"), 5.0)
    assert evidence.problems == [f"the Service {NS}/vllm has no selector: its pods, their workload and its autoscalers cannot be found"]
    assert len(seen) == 1  # nothing else asked


def test_knative_and_kserve_objects_are_found_by_their_pods_labels() -> None:
    labelled = {"metadata": {"labels": {"serving.knative.dev/service": "llm", "serving.kserve.io/inferenceservice": "qwen"}}}
    assert scalers.labelled_owners(labelled) == {("serving.knative.dev", "Service", "llm"), ("serving.kserve.io", "InferenceService", "qwen")}
    knative = {"apiVersion": "serving.knative.dev/v1", "kind": "Service", "metadata": {"name": "llm"}, "spec": {}}
    assert scalers.scale_target(knative) == ("serving.knative.dev", "Service", "llm")
    old_http = {"kind": "HTTPScaledObject", "spec": {"scaleTargetRef": {"deployment": "vllm", "service": "vllm", "port": 8000}}}
    assert scalers.scale_target(old_http) == ("apps", "Deployment", "vllm")
