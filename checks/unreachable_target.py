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


def _fault(scaler: Scaler, signal: Signal, batch: float | None, batch_said: str) -> ScalerFault | None:
    target = signal.target.number() if signal.target is not None else None
    if target is None or signal.target is None:
        return None
    path, shown = signal.target.path, signal.target.value
    if scaler.batch_limit is not None and scaler.batch_limit.known:
        batch, batch_said = scaler.batch_limit.number(), f"{scaler.batch_limit.path} in the same object"
    if signal.source == SignalSource.CONCURRENCY and batch is not None and target > batch:
        return ScalerFault(scaler, path, str(shown), f"{batch:.0f} (the engine's batch limit)",
                     f"{path} is {shown} requests in flight per replica, and the engine runs {batch:.0f} at once "
                     f"({batch_said}): {target - batch:.0f} wait inside each replica before the scaler adds one")
    for metric in _metrics(signal):
        family = engine_family(metric)
        if family is not None and family[1] == "kv_usage" and target > 1:
            return ScalerFault(scaler, path, str(shown), f"{min(target / 100, 0.8):g}",
                         f"{metric} is a fraction of at most 1, and {path} is {shown}: it never fires")
        if metric in GPU_UTIL and target > 100:
            return ScalerFault(scaler, path, str(shown), "80", f"{metric} is a percentage of at most 100, and {path} is {shown}")
        if (family is not None and family[1] == "running" and batch is not None and signal.target_type != "Value"
                and target >= batch):
            return ScalerFault(scaler, path, str(shown), f"{max(1, int(batch * 0.75))} (or the queue depth instead)",
                         f"{metric} per replica can never pass the batch limit of {batch:.0f} ({batch_said}), "
                         f"and {path} is {shown}")
    return None


@check(code="LD605", name="unreachable-target", symptom=SymptomClass.SCALING, cause=Cause.SCALING)
def unreachable_target(scalers: ScalingView, log_facts: LogFacts | None = None, run: RunRecord | None = None) -> Result:
    batch_setting = max_num_seqs_stated(log_facts, run)
    # a default the engine may exceed on some hardware proves nothing unreachable
    batch = float(batch_setting.value) if batch_setting is not None and not batch_setting.lower_bound else None
    said = batch_setting.source if batch_setting is not None else ""
    return judge_signals(scalers, lambda s, sig: _fault(s, sig, batch, said), passed="each target within its metric's reach",
                         title="An autoscaler's target cannot be reached", expect="the scaler adding a replica while requests wait")
