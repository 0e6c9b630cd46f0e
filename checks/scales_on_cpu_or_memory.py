"""An engine's autoscaler adds replicas on CPU or memory utilisation.

What it detects:
A signal of a GPU inference server's autoscaler is its pods' CPU or memory: an HPA `Resource`
or `ContainerResource` metric, a KEDA `cpu`/`memory` trigger, Knative's `metric: cpu`, KServe's
`scaleMetric: cpu` (its RawDeployment default), an AIBrix `targetMetric: cpu`. A router or
gateway in front of the engines (no GPU, its name says so) is not judged: its CPU is its load.

Why it matters:
An engine's CPU and memory track neither its queue nor its batch: the GPU does the work, the
weights and KV cache are allocated at start-up and never fall, so the scaler adds replicas that
do not help and fails to add the one the queue needs (the vLLM playbook's first deployment
pitfall; dcgm-exporter#301, bentoml/Yatai#500).

Evidence:
scalers: each signal's metric (`spec.metrics[i].resource.name`, `spec.triggers[i].type`, ...).

Remediation:
Scale on the engine's queue depth per replica (`vllm:num_requests_waiting`, SGLang's
`sglang:num_queue_reqs`), in the product's own words, with a target of a few waiting requests.

Example:
HorizontalPodAutoscaler serving/vllm: scales on cpu (spec.metrics[0].resource.name, Utilization 80)
-> a Pods metric vllm:num_requests_waiting with target.type AverageValue, averageValue 5.
"""

from __future__ import annotations

from doctor.checking.contract import Pass, Result, check
from doctor.checklib import ScalerFault, queue_signal, scaler_fire, scalers_of
from doctor.derive.engine import UNIDENTIFIED, EngineIdentity
from doctor.engines.names import UNKNOWN
from doctor.model import Cause, SymptomClass
from doctor.scalers.model import Scaler, ScalingView, Signal, SignalSource


def _resource(signal: Signal) -> bool:
    return signal.source == SignalSource.RESOURCE and (signal.metric or "").lower() in ("cpu", "memory")


def _fault(scaler: Scaler, engine: str | None) -> ScalerFault | None:
    resources = [s for s in scaler.signals if _resource(s)]
    if not resources:
        return None
    first = resources[0]
    target = first.target.value if first.target is not None and first.target.known else "unset"
    alone = len(resources) == len(scaler.signals)
    why = (f"scales on {first.metric} ({first.where}, {first.target_type or 'target'} {target})"
           + (" and nothing else" if alone else ", beside signals that track the engine: it adds replicas that do not help"))
    return ScalerFault(scaler, first.where, f"{first.metric} {first.target_type or ''} {target}".strip(),
                 queue_signal(scaler, engine), why)


@check(code="LD601", name="scales-on-cpu-or-memory", symptom=SymptomClass.SCALING, cause=Cause.SCALING,
       aliases=("scaled-on-cpu",))
def scales_on_cpu_or_memory(scalers: ScalingView, engine: EngineIdentity = UNIDENTIFIED) -> Result:
    judged = scalers_of(scalers)
    faults = [f for s in judged if (f := _fault(s, None if engine.id == UNKNOWN else engine.id)) is not None]
    if not faults:
        return Pass(f"{len(judged)} engine autoscaler(s), none on CPU or memory")
    return scaler_fire("An engine scales on CPU or memory", faults,
                       "the scaler adding a replica while requests wait, and none while the GPU is busy without a queue")
