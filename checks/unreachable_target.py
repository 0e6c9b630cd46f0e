"""An autoscaler's target is one its metric can never reach.

What it detects:
- a fraction gauge (the KV cache's usage, 0 to 1: `vllm:kv_cache_usage_perc`,
  `sglang:token_usage`) given a target above 1 (a percentage typed for a fraction);
- a GPU utilisation gauge (DCGM's `DCGM_FI_DEV_GPU_UTIL`, 0 to 100) given a target above 100;
- a per-replica target of requests in flight (Knative's or KServe's concurrency, Ray Serve's
  `target_ongoing_requests`, the KEDA HTTP add-on's) above the engine's batch limit: the excess
  waits inside each replica before a replica is added (the batch limit from the object's own
  `--max-num-seqs`, else the log);
- a per-replica target on the engine's running requests (`vllm:num_requests_running`) at or
  above its batch limit (`max_num_seqs` from the startup log, else vLLM's default; llama.cpp's
  slots): running can never exceed it (LLMKube#482: `requests_processing` capped at 1 slot,
  target 2).

Why it matters:
The scaler never adds a replica: users queue while the signal sits below its target forever.

Evidence:
scalers: each signal's metric and target; log_facts and run: the engine's batch limit.

Remediation:
A target the metric reaches: a fraction below 1 (0.8 for the KV cache), or the queue depth,
which is unbounded.

Example:
HorizontalPodAutoscaler serving/vllm: spec.metrics[0].pods.metric.name vllm:kv_cache_usage_perc
targets 80, a fraction of at most 1 -> averageValue 0.8.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.checking.contract import Result, check
from doctor.checklib import ScalerFault, engine_family, judge_signals
from doctor.checklib.engine_settings import max_num_seqs_stated
from doctor.derive.log_facts import LogFacts
from doctor.evidence import RunRecord
from doctor.model import Cause, SymptomClass
from doctor.scalers.model import Scaler, ScalingView, Signal, SignalSource
from doctor.scalers.promql import read_query

GPU_UTIL = ("DCGM_FI_DEV_GPU_UTIL", "nvidia_gpu_duty_cycle", "gpu_utilization")


def _metrics(signal: Signal) -> list[str]:
    if signal.query is not None:
        return read_query(signal.query).metrics
    return [signal.metric] if signal.metric else []


@dataclass(frozen=True)
class Unreachable:
    """A signal whose target its metric never reaches: ``concurrency`` above the batch limit,
    a ``fraction`` gauge or a GPU ``percentage`` given a target past its top, or ``running``
    requests at or above the batch limit; with the metric, the target and the batch limit (and
    where it was read: ``batch_said``, the log's source, unless the object states it at ``in_object``)."""

    kind: str
    signal: Signal
    target: float
    metric: str = ""
    batch: float | None = None
    batch_said: str = ""
    in_object: str | None = None


def _unreachable(scaler: Scaler, signal: Signal, batch: float | None, batch_said: str) -> Unreachable | None:
    target = signal.target.number() if signal.target is not None else None
    if target is None or signal.target is None:
        return None
    in_object = None
    if scaler.batch_limit is not None and scaler.batch_limit.known:
        batch, in_object = scaler.batch_limit.number(), scaler.batch_limit.path
    if signal.source == SignalSource.CONCURRENCY and batch is not None and target > batch:
        return Unreachable("concurrency", signal, target, batch=batch, batch_said=batch_said, in_object=in_object)
    for metric in _metrics(signal):
        family = engine_family(metric)
        if family is not None and family[1] == "kv_usage" and target > 1:
            return Unreachable("fraction", signal, target, metric)
        if metric in GPU_UTIL and target > 100:
            return Unreachable("percentage", signal, target, metric)
        if (family is not None and family[1] == "running" and batch is not None and signal.target_type != "Value"
                and target >= batch):
            return Unreachable("running", signal, target, metric, batch, batch_said, in_object)
    return None


def _fault(scaler: Scaler, signal: Signal, batch: float | None, batch_said: str) -> ScalerFault | None:
    found = _unreachable(scaler, signal, batch, batch_said)
    return _said(scaler, found) if found is not None else None


def _batch_said(found: Unreachable) -> str:
    return f"{found.in_object} in the same object" if found.in_object is not None else found.batch_said


def _said(scaler: Scaler, found: Unreachable) -> ScalerFault:
    signal, target, batch, metric = found.signal, found.target, found.batch or 0.0, found.metric
    path, shown = (signal.target.path, signal.target.value) if signal.target is not None else ("", "")
    if found.kind == "concurrency":
        return ScalerFault(scaler, path, str(shown), f"{batch:.0f} (the engine's batch limit)",
                           f"{path} is {shown} requests in flight per replica, and the engine runs {batch:.0f} at once "
                           f"({_batch_said(found)}): {target - batch:.0f} wait inside each replica before the scaler adds one")
    if found.kind == "fraction":
        return ScalerFault(scaler, path, str(shown), f"{min(target / 100, 0.8):g}",
                           f"{metric} is a fraction of at most 1, and {path} is {shown}: it never fires")
    if found.kind == "percentage":
        return ScalerFault(scaler, path, str(shown), "80", f"{metric} is a percentage of at most 100, and {path} is {shown}")
    return ScalerFault(scaler, path, str(shown), f"{max(1, int(batch * 0.75))} (or the queue depth instead)",
                       f"{metric} per replica can never pass the batch limit of {batch:.0f} ({_batch_said(found)}), "
                       f"and {path} is {shown}")


@check(code="LD605", name="unreachable-target", symptom=SymptomClass.SCALING, cause=Cause.SCALING)
def unreachable_target(scalers: ScalingView, log_facts: LogFacts | None = None, run: RunRecord | None = None) -> Result:
    batch_setting = max_num_seqs_stated(log_facts, run)
    # a default the engine may exceed on some hardware proves nothing unreachable
    batch = float(batch_setting.value) if batch_setting is not None and not batch_setting.lower_bound else None
    said = batch_setting.source if batch_setting is not None else ""
    return judge_signals(scalers, lambda s, sig: _fault(s, sig, batch, said), passed="each target within its metric's reach",
                         title="An autoscaler's target cannot be reached", expect="the scaler adding a replica while requests wait")
