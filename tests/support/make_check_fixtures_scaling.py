"""Write the fixture bundles of the scaling checks (LD601-LD610).

Run ``.venv/bin/python -m tests.support.make_check_fixtures_scaling``. Each case holds autoscaler
objects as ``kubectl get ... -o yaml`` prints them (the ``scaling`` evidence kind); the real
objects collected from public deployments are judged in ``tests/checks/test_scaling_real.py``.
"""

from __future__ import annotations

import sys
from typing import Any

from doctor.evidence import PodState, ScalerObject, ScalingEvidence
from tests.support.bundles import bundle, log, metrics
from tests.support.write_fixture import write_all, write_case

#: The lines of the real vLLM 0.32.0 startup log (fixtures/logs/startup-0.32.0-cpu-default.log) the rules read,
#: with max_num_seqs set as a user would set it.
STARTUP_LOG = ["(APIServer pid=1) INFO 11-30 05:37:29 [api_server.py:1] vLLM API server version 0.32.0",
               "(APIServer pid=1) INFO 11-30 05:37:29 [utils.py:1] non-default args: {'max_num_seqs': 8}",
               "(EngineCore pid=1) INFO 11-30 05:38:54 [core.py:402] init engine (profile, create kv cache, warmup model) took 61.54 s"]


def hpa(metrics_: list[dict[str, Any]], *, min_replicas: int | None = 1, behavior: dict[str, Any] | None = None,
        status: dict[str, Any] | None = None, name: str = "vllm") -> dict[str, Any]:
    spec: dict[str, Any] = {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name}, "maxReplicas": 4,
                            "metrics": metrics_}
    if min_replicas is not None:
        spec["minReplicas"] = min_replicas
    if behavior is not None:
        spec["behavior"] = behavior
    obj = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": name, "namespace": "serving"},
           "spec": spec}
    if status is not None:
        obj["status"] = status
    return obj


def pods(name: str, value: str, kind: str = "AverageValue") -> dict[str, Any]:
    return {"type": "Pods", "pods": {"metric": {"name": name}, "target": {"type": kind, "averageValue": value}}}


QUEUE = pods("vllm_num_requests_waiting", "4")
CPU = {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}


def scaled_object(triggers: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "metadata": {"name": "vllm", "namespace": "serving"},
            "spec": {"scaleTargetRef": {"name": "vllm"}, **spec, "triggers": triggers}}


def prometheus(query: str, threshold: str = "4", metric_type: str | None = None, **meta: str) -> dict[str, Any]:
    trigger: dict[str, Any] = {"type": "prometheus", "metadata": {"serverAddress": "http://prometheus:9090", "query": query,
                                                                  "threshold": threshold, **meta}}
    if metric_type:
        trigger["metricType"] = metric_type
    return trigger


def objects(*objs: dict[str, Any], pods_: list[PodState] | None = None) -> ScalingEvidence:
    return ScalingEvidence(origin="files" if pods_ is None else "kubernetes",
                           objects=[ScalerObject(f"case.yaml#{i}", o) for i, o in enumerate(objs, start=1)],
                           workload="Deployment/vllm" if pods_ is not None else None, pods=pods_ or [])


def _missing(name: str) -> None:
    write_case(name, "missing-no-scaler", bundle(), why="No autoscaler was read: the check needs one.")


def cases_scales_on_cpu_or_memory() -> None:
    name = "scales-on-cpu-or-memory"
    write_case(name, "fires-hpa-cpu", bundle(scaling=objects(hpa([CPU]))), why="An engine's HPA on CPU alone.",
               expect={"severity": "warning", "setting": "spec.metrics[0].resource.name"})
    write_case(name, "quiet-queue", bundle(scaling=objects(hpa([QUEUE]))), why="An HPA on the engine's queue per pod.")
    write_case(name, "na-router-on-cpu", bundle(scaling=objects(hpa([CPU], name="vllm-router"))),
               why="A router in front of the engines scales on its CPU: not an engine.")
    _missing(name)


def cases_no_warm_floor() -> None:
    name = "no-warm-floor"
    write_case(name, "fires-keda-default-floor", bundle(scaling=objects(scaled_object([prometheus("sum(vllm:num_requests_waiting)",
                                                                                                   ignoreNullValues="false")])),
                                                        log=log(STARTUP_LOG)),
               why="A ScaledObject without minReplicaCount (KEDA's default is 0); the log's start-up 61.54 s.",
               expect={"severity": "warning", "setting": "spec.minReplicaCount", "summary_contains": ["62 s"]})
    write_case(name, "quiet-floor-one", bundle(scaling=objects(hpa([QUEUE]))), why="An HPA's floor of 1.")
    write_case(name, "quiet-placeholder-floor", bundle(scaling=objects(hpa([QUEUE], min_replicas=None) | {
        "spec": {**hpa([QUEUE])["spec"], "minReplicas": "${MIN_REPLICAS}"}})),
        why="A floor left as an envsubst placeholder: unknown, not judged.")
    write_case(name, "na-router-only", bundle(scaling=objects(hpa([CPU], min_replicas=0, name="llm-gateway"))),
               why="Only a gateway's scaler was read.")
    _missing(name)


def cases_counter_as_gauge() -> None:
    name = "counter-as-gauge"
    write_case(name, "fires-raw-counter", bundle(scaling=objects(scaled_object(
        [prometheus("sum(vllm:request_success_total)", ignoreNullValues="false")], minReplicaCount=1))),
        why="A KEDA query on a counter without rate().", expect={"severity": "warning", "setting": "spec.triggers[0].metadata.query"})
    write_case(name, "quiet-rated", bundle(scaling=objects(scaled_object(
        [prometheus("sum(rate(vllm:request_success_total[2m]))", ignoreNullValues="false")], minReplicaCount=1))),
        why="The same counter under rate().")
    write_case(name, "na-router-only-no-signals", bundle(scaling=objects(scaled_object([], minReplicaCount=1) | {
        "metadata": {"name": "gw", "namespace": "serving"}})) , why="A scaler with no signals at all.")
    _missing(name)


def cases_absent_signal_read_as_zero() -> None:
    name = "absent-signal-read-as-zero"
    write_case(name, "fires-ignore-null-default", bundle(scaling=objects(scaled_object(
        [prometheus("sum(vllm:num_requests_waiting)")], minReplicaCount=1))),
        why="KEDA's ignoreNullValues left at true: an empty result is 0.",
        expect={"severity": "warning", "setting": "spec.triggers[0].metadata.ignoreNullValues"})
    write_case(name, "fires-retired-metric", bundle(scaling=objects(hpa([pods("vllm:gpu_cache_usage_perc", "0.8")]))),
               why="An HPA on vllm:gpu_cache_usage_perc, gone from vLLM 0.12.0.",
               expect={"severity": "warning", "summary_contains": ["0.11.0"]})
    write_case(name, "quiet-loud-loss", bundle(scaling=objects(scaled_object(
        [prometheus("sum(vllm:num_requests_waiting)", ignoreNullValues="false")], minReplicaCount=1,
        fallback={"failureThreshold": 3, "replicas": 2}))), why="ignoreNullValues false and a fallback.")
    write_case(name, "na-nothing-but-a-router", bundle(scaling=ScalingEvidence(objects=[])), why="No object at all.")
    _missing(name)


def cases_unreachable_target() -> None:
    name = "unreachable-target"
    write_case(name, "fires-percent-on-a-fraction", bundle(scaling=objects(hpa([pods("vllm:kv_cache_usage_perc", "80")]))),
               why="Target 80 on a 0-1 gauge.", expect={"severity": "warning", "setting": "spec.metrics[0].pods.target.averageValue"})
    write_case(name, "fires-running-at-batch-limit", bundle(scaling=objects(hpa([pods("vllm:num_requests_running", "8")])),
                                                            log=log(STARTUP_LOG)),
               why="Running per replica at the logged max_num_seqs of 8.", expect={"severity": "warning"})
    write_case(name, "quiet-fraction", bundle(scaling=objects(hpa([pods("vllm:kv_cache_usage_perc", "0.8")]))),
               why="Target 0.8 on the KV cache's fraction.")
    write_case(name, "na-empty", bundle(scaling=ScalingEvidence(objects=[])), why="No object at all.")
    _missing(name)


def cases_eager_scale_down() -> None:
    name = "eager-scale-down"
    write_case(name, "fires-thirty-seconds", bundle(scaling=objects(hpa([QUEUE], behavior={"scaleDown": {"stabilizationWindowSeconds": 30}})),
                                                    log=log(STARTUP_LOG)),
               why="Replicas go after 30 s; one takes at least 62 s to serve.",
               expect={"severity": "warning", "setting": "spec.behavior.scaleDown.stabilizationWindowSeconds"})
    write_case(name, "quiet-default-window", bundle(scaling=objects(hpa([QUEUE]))), why="HPA's default 300 s.")
    write_case(name, "na-router-only", bundle(scaling=objects(hpa([CPU], name="router", behavior={"scaleDown": {"stabilizationWindowSeconds": 0}}))),
               why="Only a router's scaler.")
    _missing(name)


def cases_fleet_sum_as_per_replica() -> None:
    name = "fleet-sum-as-per-replica"
    write_case(name, "fires-value-on-sum", bundle(scaling=objects(scaled_object(
        [prometheus("sum(vllm:num_requests_waiting)", metric_type="Value", ignoreNullValues="false")], minReplicaCount=1))),
        why="metricType Value on a sum over replicas.", expect={"severity": "warning", "setting": "spec.triggers[0].metricType"})
    write_case(name, "quiet-average", bundle(scaling=objects(scaled_object(
        [prometheus("sum(vllm:num_requests_waiting)", ignoreNullValues="false")], minReplicaCount=1))),
        why="KEDA's default AverageValue on the same sum.")
    write_case(name, "na-empty", bundle(scaling=ScalingEvidence(objects=[])), why="No object at all.")
    _missing(name)


HPA_STATUS_FAILING = {"currentReplicas": 2, "desiredReplicas": 2, "conditions": [
    {"type": "AbleToScale", "status": "True", "reason": "SucceededGetScale"},
    {"type": "ScalingActive", "status": "False", "reason": "FailedGetPodsMetric",
     "message": "the HPA was unable to compute the replica count: unable to get metric vllm_num_requests_waiting"}]}
HPA_STATUS_AT_MAX = {"currentReplicas": 4, "desiredReplicas": 4, "conditions": [
    {"type": "ScalingActive", "status": "True", "reason": "ValidMetricFound"},
    {"type": "ScalingLimited", "status": "True", "reason": "TooManyReplicas", "message": "the desired replica count is more than the maximum replica count"}]}
HPA_STATUS_OK = {"currentReplicas": 2, "desiredReplicas": 2, "conditions": [
    {"type": "ScalingActive", "status": "True", "reason": "ValidMetricFound"},
    {"type": "ScalingLimited", "status": "False", "reason": "DesiredWithinRange"}]}


def cases_scaler_metric_unavailable() -> None:
    name = "scaler-metric-unavailable"
    write_case(name, "fires-failed-get-pods-metric", bundle(scaling=objects(hpa([QUEUE], status=HPA_STATUS_FAILING))),
               why="ScalingActive False: the HPA cannot read its metric.", expect={"severity": "critical"})
    write_case(name, "quiet-valid-metric", bundle(scaling=objects(hpa([QUEUE], status=HPA_STATUS_OK))), why="ValidMetricFound.")
    at_zero = {"currentReplicas": 0, "desiredReplicas": 0, "conditions": [
        {"type": "ScalingActive", "status": "False", "reason": "ScalingDisabled",
         "message": "scaling is disabled since the replica count of the target is zero"}]}
    write_case(name, "quiet-scaled-to-zero", bundle(scaling=objects(hpa([QUEUE], status=at_zero))),
               why="ScalingActive False with ScalingDisabled: the target rests at zero replicas, the controller's normal state.")
    write_case(name, "na-empty", bundle(scaling=ScalingEvidence(objects=[])), why="No object at all.")
    _missing(name)


def cases_stuck_at_max() -> None:
    name = "stuck-at-max"
    waiting = metrics(("before", -0.1, {"vllm:num_requests_waiting": 0, "vllm:num_requests_running": 8}),
                      ("after", 30.0, {"vllm:num_requests_waiting": 12, "vllm:num_requests_running": 8}))
    write_case(name, "fires-at-max-while-waiting", bundle(scaling=objects(hpa([QUEUE], status=HPA_STATUS_AT_MAX)), metrics=waiting),
               why="Desired 4 = maxReplicas 4, ScalingLimited, 12 waiting.", expect={"severity": "warning", "setting": "spec.maxReplicas"})
    write_case(name, "quiet-within-range", bundle(scaling=objects(hpa([QUEUE], status=HPA_STATUS_OK))), why="DesiredWithinRange.")
    write_case(name, "na-router-only", bundle(scaling=objects(hpa([CPU], name="router", status=HPA_STATUS_AT_MAX))),
               why="Only a router's scaler.")
    _missing(name)


def cases_replicas_pending() -> None:
    name = "replicas-pending"
    pending = [PodState("vllm-0", "Running"), PodState("vllm-1", "Pending", "Unschedulable",
                                                       "0/4 nodes are available: 4 Insufficient nvidia.com/gpu.")]
    write_case(name, "fires-unschedulable", bundle(scaling=objects(hpa([QUEUE]), pods_=pending)),
               why="A pod Pending for lack of a GPU.", expect={"severity": "warning", "summary_contains": ["nvidia.com/gpu"]})
    pulling = [PodState("vllm-0", "Running"), PodState("vllm-1", "Pending")]
    write_case(name, "quiet-image-pulling", bundle(scaling=objects(hpa([QUEUE], status=HPA_STATUS_OK), pods_=pulling)),
               why="A pod Pending while its image is pulled (scheduled): a rollout, no capacity problem.")
    write_case(name, "quiet-all-running", bundle(scaling=objects(hpa([QUEUE], status=HPA_STATUS_OK),
                                                                 pods_=[PodState("vllm-0", "Running")])), why="Every pod runs.")
    write_case(name, "na-router-only", bundle(scaling=objects(hpa([CPU], name="router"))), why="Only a router's scaler, no pods.")
    _missing(name)


def cases_slower_than_the_burst() -> None:
    name = "slower-than-the-burst"
    burst = metrics(("before", -0.1, {"vllm:num_requests_waiting": 0}), ("during", 10.0, {"vllm:num_requests_waiting": 6}),
                    ("during", 30.0, {"vllm:num_requests_waiting": 14}), ("after", 40.0, {"vllm:num_requests_waiting": 2}))
    write_case(name, "fires-a-twenty-second-burst", bundle(scaling=objects(hpa([QUEUE])), metrics=burst, log=log(STARTUP_LOG)),
               why="The queue grew for 20 s; a replica needs 15 s of sync and 62 s of start-up.",
               expect={"severity": "warning", "setting": "spec.minReplicas", "summary_contains": ["grew for 20 s"]})
    long_growth = metrics(*[("during", float(t), {"vllm:num_requests_waiting": t // 10}) for t in range(10, 400, 30)],
                          ("after", 420.0, {"vllm:num_requests_waiting": 0}))
    write_case(name, "quiet-a-long-growth", bundle(scaling=objects(hpa([QUEUE])), metrics=long_growth, log=log(STARTUP_LOG)),
               why="The queue grew for 360 s: a new replica could serve within it.")
    write_case(name, "na-no-queue", bundle(scaling=objects(hpa([QUEUE])),
                                           metrics=metrics(("before", -0.1, {"vllm:num_requests_waiting": 0}),
                                                           ("after", 30.0, {"vllm:num_requests_waiting": 0}))),
               why="Nothing waited over the window.")
    still_growing = metrics(("before", -0.1, {"vllm:num_requests_waiting": 0}), ("during", 10.0, {"vllm:num_requests_waiting": 6}),
                            ("after", 30.0, {"vllm:num_requests_waiting": 14}))
    write_case(name, "na-still-growing", bundle(scaling=objects(hpa([QUEUE])), metrics=still_growing, log=log(STARTUP_LOG)),
               why="The queue was still growing when the window closed: the burst's length is not known.")
    write_case(name, "missing-no-metrics", bundle(scaling=objects(hpa([QUEUE]))), why="No metrics window.")


if __name__ == "__main__":
    write_all(sys.modules[__name__])
