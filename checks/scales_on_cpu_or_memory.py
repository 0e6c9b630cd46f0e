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

from dataclasses import dataclass

from doctor.checking.contract import Pass, Result, check
from doctor.checklib import ScalerFault, queue_signal, scaler_fire, scalers_of
from doctor.derive.engine import UNIDENTIFIED, EngineIdentity
from doctor.engines.names import UNKNOWN
from doctor.model import Cause, SymptomClass
from doctor.scalers.model import Scaler, ScalingView, Signal, SignalSource


def _resource(signal: Signal) -> bool:
    return signal.source == SignalSource.RESOURCE and (signal.metric or "").lower() in ("cpu", "memory")


@dataclass(frozen=True)
class OnResources:
    """A scaler's first CPU or memory signal, and whether it scales on those alone."""

    first: Signal
    alone: bool


def _on_resources(scaler: Scaler) -> OnResources | None:
    resources = [s for s in scaler.signals if _resource(s)]
    if not resources:
        return None
    return OnResources(resources[0], len(resources) == len(scaler.signals))


@check(code="LD601", name="scales-on-cpu-or-memory", symptom=SymptomClass.SCALING, cause=Cause.SCALING,
       aliases=("scaled-on-cpu",))
def scales_on_cpu_or_memory(scalers: ScalingView, engine: EngineIdentity = UNIDENTIFIED) -> Result:
    judged = scalers_of(scalers)
    named = None if engine.id == UNKNOWN else engine.id
    faults = [_said(s, found, named) for s in judged if (found := _on_resources(s)) is not None]
    if not faults:
        return Pass(_none_on_resources(len(judged)))
    return scaler_fire("An engine scales on CPU or memory", faults,
                       "the scaler adding a replica while requests wait, and none while the GPU is busy without a queue")


def _none_on_resources(judged: int) -> str:
    return f"{judged} engine autoscaler(s), none on CPU or memory"


def _said(scaler: Scaler, found: OnResources, engine: str | None) -> ScalerFault:
    first = found.first
    target = first.target.value if first.target is not None and first.target.known else "unset"
    why = (f"scales on {first.metric} ({first.where}, {first.target_type or 'target'} {target})"
           + (" and nothing else" if found.alone else ", beside signals that track the engine: it adds replicas that do not help"))
    return ScalerFault(scaler, first.where, f"{first.metric} {first.target_type or ''} {target}".strip(),
                       queue_signal(scaler, engine), why)
