"""The autoscalers behind a ``k8s://namespace/service:port`` engine, read live from the Kubernetes API.

Why: when users queue, the next question is why no replica came, and the answer is in the
HorizontalPodAutoscaler or ScaledObject next to the Deployment: its spec (floor, ceiling, signal)
and its status (desired and current replicas, ``ScalingActive``, ``ScalingLimited``), and the
pods it asked for (Pending, ``Unschedulable``: no GPU free).

How: the Service's selector names its pods; each pod's controlling owner is followed up through
the ``apps`` objects (ReplicaSet -> Deployment, or StatefulSet) while the next owner is one of
them, and the owners named on the last (a Knative Revision, a KServe InferenceService) and in the
pods' product labels (``ScalerRecord.owner_labels``) join the chain too. Then each scaler
record's ``resources`` (``doctor.scalers.RECORDS``) is listed in the namespace, and the objects
whose ``scaleTargetRef`` (or, for an object that is itself the workload's owner, as Knative's and
KServe's are, the object) is in that chain are kept, spec and status, raw, for the ``scalers`` view
to read at analysis. KEDA's generated HPA (``keda-hpa-<name>``, owned by its ScaledObject) targets
the same Deployment and is kept beside it: the view folds its status into the ScaledObject
(``doctor.scalers.keda.fold_generated``), so the rules judge the object the user wrote once.

Every GET has a deadline (``kubernetes.get_json``, within what is left of the step's time). A
refusal (403) of one resource is a ``problems`` line naming the exact permission ("list
scaledobjects.keda.sh in namespace serving") and the read goes on without it; a 404 on a list
is a resource this API server does not serve (that product is not installed), which is normal and
said only in ``absent``. The API unreachable stops the read with one problem. The pod needs what
``requests()`` lists (deploy/kubernetes/fleet-rbac.yaml grants exactly that).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from doctor.evidence import EvidenceError, PodState, ScalerObject, ScalingEvidence
from doctor.foundation.wire import dig, items
from doctor.probes import kubernetes
from doctor.probes.kubernetes import KubeApi, KubeError, KubeService
from doctor.scalers import RECORDS
from doctor.scalers.fields import group_of, target_ref

SOURCE = "scaling"
#: The whole read's time (a dozen GETs, each within ``kubernetes.DEADLINE_S``), within the run's --deadline.
BUDGET_S = 30.0
LIST_LIMIT = "500"  # one page of each list: a namespace with more autoscalers than that is not read whole
#: The owners followed from a pod up to its workload: (API group, kind) -> the resource read with ``get``.
WORKLOADS: dict[tuple[str, str], str] = {("apps", "ReplicaSet"): "replicasets", ("apps", "Deployment"): "deployments",
                                         ("apps", "StatefulSet"): "statefulsets"}
MAX_OWNER_STEPS = 4  # pod -> ReplicaSet -> Deployment is two; a loop of owners cannot keep the read going
#: Metadata the rules never read and that can be large or sensitive: dropped before the bundle.
DROPPED_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration",)

Ref = tuple[str, str, str]  # (API group, kind, name)


def requests() -> list[tuple[str, str, str]]:
    """Every (API group, resource, verb) the live read asks for: what the pod's Role must grant."""
    asked = [("", "services", "get"), ("", "pods", "list"), *(("apps", r, "get") for r in WORKLOADS.values())]
    return asked + [(group, plural, "list") for record in RECORDS for group, plural, _ in record.resources]


def collect_scalers(target: str, budget_s: float = BUDGET_S, env: Mapping[str, str] = os.environ,
                    account: Path | None = None) -> tuple[ScalingEvidence | None, list[EvidenceError]]:
    """The autoscalers of the workload behind ``target`` (``k8s://namespace/service:port``), read
    within ``budget_s``; an error only when the cluster cannot be asked at all."""
    try:
        service = kubernetes.parse_target(target)
        api = kubernetes.in_cluster_api(env, account)
    except KubeError as exc:
        return None, [EvidenceError(SOURCE, target, "read autoscalers", "unavailable", str(exc), fatal=True)]
    return read_scalers(service, api, budget_s), []


def read_scalers(target: KubeService, api: KubeApi, budget_s: float) -> ScalingEvidence:
    """The Service's pods, their workload and its autoscalers (see the module's docstring)."""
    evidence = ScalingEvidence(origin="kubernetes")
    reader = _Reader(api, target.namespace, time.monotonic() + budget_s, evidence)
    try:
        with kubernetes.api_client(api) as client:
            reader.client = client
            chain = reader.workload_chain(target.service)
            if chain is None:
                return evidence
            for group, plural, version in (r for record in RECORDS for r in record.resources):
                for obj in reader.listed(group, plural, version):
                    if scale_target(obj) in chain:
                        evidence.objects.append(ScalerObject(f"the Kubernetes API ({plural}.{group})", trimmed(obj)))
    except _Stop:
        pass
    except (OSError, ValueError) as exc:  # a CA path that cannot be read or parsed
        evidence.problems.append(f"cannot reach the Kubernetes API: {exc}")
    return evidence


class _Stop(Exception):
    """The API cannot be asked any more (unreachable, or the step's time is spent): keep what was read."""


class _Reader:
    """One live read: the client, the namespace, the step's deadline and the evidence it fills."""

    def __init__(self, api: KubeApi, namespace: str, deadline: float, evidence: ScalingEvidence) -> None:
        self.api = api
        self.namespace = namespace
        self.deadline = deadline
        self.evidence = evidence
        self.client: httpx.Client | None = None

    def get(self, path: str, verb: str, resource: str, params: Mapping[str, str] | None = None) -> Any:
        """One GET of ``path`` under the API's URL; None (and a problem) when refused or absent."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            self.evidence.problems.append(f"the autoscalers were not all read: the step's time ran out before {verb} {resource}")
            raise _Stop
        assert self.client is not None
        permission = f"{verb} {resource} in namespace {self.namespace}"
        try:
            return kubernetes.get_json(self.client, f"{self.api.url}{path}", f"for {permission}", permission, params,
                                       deadline_s=left)
        except KubeError as exc:
            if exc.status is None:  # unreachable, or an answer that is no JSON: every next GET would fail too
                self.evidence.problems.append(str(exc))
                raise _Stop from None
            if exc.status == 404 and verb == "list":
                self.evidence.absent.append(resource)  # a CRD not installed: most clusters lack most products
            elif exc.status in (401, 403):
                self.evidence.problems.append(f"forbidden ({exc.status}): {permission}; the pod's Role needs it "
                                              f"(deploy/kubernetes/fleet-rbac.yaml), read on without it")
            else:
                self.evidence.problems.append(str(exc))
            return None

    def listed(self, group: str, plural: str, version: str) -> Iterator[Any]:
        """The items of one namespaced list (``group`` "" for the core API)."""
        base = f"/apis/{group}/{version}" if group else "/api/v1"
        resource = f"{plural}.{group}" if group else plural
        answer = self.get(f"{base}/namespaces/{quote(self.namespace)}/{plural}", "list", resource, {"limit": LIST_LIMIT})
        yield from (i for i in items(dig(answer, "items")) if isinstance(i, dict))

    def workload_chain(self, name: str) -> set[Ref] | None:
        """Every object above the Service's pods (ReplicaSet, Deployment, a product's own object),
        the pods as ``PodState``s and the workload named; None when it cannot be found."""
        service = self.get(f"/api/v1/namespaces/{quote(self.namespace)}/services/{quote(name)}", "get", "services")
        selector = dig(service, "spec", "selector")
        if not isinstance(selector, dict) or not selector:
            if service is not None:
                self.evidence.problems.append(f"the Service {self.namespace}/{name} has no selector: its pods, "
                                              "their workload and its autoscalers cannot be found")
            return None
        label_selector = ",".join(f"{k}={v}" for k, v in sorted(selector.items()))
        answer = self.get(f"/api/v1/namespaces/{quote(self.namespace)}/pods", "list", "pods",
                          {"labelSelector": label_selector, "limit": LIST_LIMIT})
        pods = [p for p in items(dig(answer, "items")) if isinstance(p, dict)]
        if not pods:
            if answer is not None:
                self.evidence.problems.append(f"no pod matches the Service {self.namespace}/{name}'s selector {label_selector}")
            return None
        self.evidence.pods = [pod_state(p) for p in pods]
        chain: set[Ref] = set()
        tops: list[Ref] = []
        for pod in pods:
            chain |= labelled_owners(pod)
            ref = controller(pod)
            for _ in range(MAX_OWNER_STEPS):
                if ref is None or ref in chain:
                    break
                chain.add(ref)
                tops.append(ref)
                ref = self.owner_of(ref)
        workloads = [r for r in dict.fromkeys(tops) if (r[0], r[1]) in WORKLOADS and r[1] != "ReplicaSet"] or tops[-1:]
        self.evidence.workload = ", ".join(f"{kind}/{name}" for _, kind, name in workloads) or None
        return chain

    def owner_of(self, ref: Ref) -> Ref | None:
        """The controlling owner of an ``apps`` object; None above them (its owner is in the chain
        already, by name, as the ref it was reached by)."""
        group, kind, name = ref
        plural = WORKLOADS.get((group, kind))
        if plural is None:
            return None
        obj = self.get(f"/apis/apps/v1/namespaces/{quote(self.namespace)}/{plural}/{quote(name)}", "get", f"{plural}.apps")
        return controller(obj)


def controller(obj: Any) -> Ref | None:
    """The (group, kind, name) of an object's controlling owner (the first owner when none says so)."""
    owners = [o for o in items(dig(obj, "metadata", "ownerReferences")) if isinstance(o, dict)]
    owner = next((o for o in owners if o.get("controller") is True), owners[0] if owners else None)
    if owner is None or not isinstance(owner.get("name"), str) or not isinstance(owner.get("kind"), str):
        return None
    return group_of(owner.get("apiVersion")), owner["kind"], owner["name"]


def labelled_owners(pod: Any) -> set[Ref]:
    """The products' own objects a pod's labels name (``ScalerRecord.owner_labels``)."""
    labels = dig(pod, "metadata", "labels")
    labels = labels if isinstance(labels, dict) else {}
    return {(group, kind, labels[label]) for record in RECORDS for label, group, kind in record.owner_labels
            if isinstance(labels.get(label), str)}


def scale_target(obj: Any) -> Ref | None:
    """What an autoscaler object scales: its ``scaleTargetRef`` (the HTTP add-on's older
    ``deployment`` field too), else the object itself (a Knative Service, an InferenceService)."""
    ref = dig(obj, "spec", "scaleTargetRef")
    if isinstance(ref, dict):
        return target_ref(ref)
    name = dig(obj, "metadata", "name")
    kind = obj.get("kind") if isinstance(obj, dict) else None
    return (group_of(obj.get("apiVersion")), kind, name) if isinstance(name, str) and isinstance(kind, str) else None


def pod_state(pod: Any) -> PodState:
    """A pod's phase and, when the scheduler could not place it, why (``PodScheduled`` False)."""
    name, phase, created = dig(pod, "metadata", "name"), dig(pod, "status", "phase"), dig(pod, "metadata", "creationTimestamp")
    scheduled = next((c for c in items(dig(pod, "status", "conditions"))
                      if isinstance(c, dict) and c.get("type") == "PodScheduled"), None)
    unscheduled = scheduled is not None and scheduled.get("status") == "False"
    reason = scheduled.get("reason") if unscheduled and scheduled is not None else None
    message = scheduled.get("message") if unscheduled and scheduled is not None else None
    return PodState(name=name if isinstance(name, str) else "?", phase=phase if isinstance(phase, str) else "",
                    unscheduled_reason=reason if isinstance(reason, str) else None,
                    unscheduled_message=message if isinstance(message, str) else None,
                    created=created if isinstance(created, str) else None)


def trimmed(obj: dict[str, Any]) -> dict[str, Any]:
    """The object without what no rule reads and what may be large or secret: ``managedFields``, the
    last-applied copy of the whole object, and the literal ``value`` of containers' environment
    variables (a token set inline in a Knative or KServe pod template; their names stay)."""
    out = _without_env_values(obj)
    meta = out.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
        if isinstance(meta.get("annotations"), dict):
            meta["annotations"] = {k: v for k, v in meta["annotations"].items() if k not in DROPPED_ANNOTATIONS}
    return out


def _without_env_values(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: ([{n: v for n, v in e.items() if n != "value"} if isinstance(e, dict) else e for e in v]
                    if k == "env" and isinstance(v, list) else _without_env_values(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_env_values(v) for v in value]
    return value
