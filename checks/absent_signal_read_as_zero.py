"""An autoscaler reads an absent signal as zero.

What it detects:
- A KEDA `prometheus` trigger that leaves `ignoreNullValues` at its default, `true`: an empty
  result (a renamed series, a lost scrape target, replicas that are all starting) is read as 0,
  raises no error, and scales the engine down to its floor. A `fallback` does not help there: it
  answers scaler errors, and an empty result raises none (KEDA's Prometheus scaler docs,
  kedacore/keda PR#6464); with `"false"` the empty result is an error, and the fallback (or the
  held replica count) applies.
- A signal naming a metric its engine no longer exports by default (renamed or removed across
  releases: vLLM's `vllm:gpu_cache_usage_perc`, last in 0.11.0, is `vllm:kv_cache_usage_perc`),
  so the query reads nothing at all.

Why it matters:
The scaler goes quiet exactly when the signal is lost (keda#3065: a Prometheus outage scaled
every deployment to its minimum at peak), and a renamed metric never triggers (GIE PR#1905,
llm-d PR#546 followed the rename; examples still ship the old name).

Evidence:
scalers: each trigger's `ignoreNullValues` and `fallback`; each signal's metric names against
the engines' records of retired metrics (doctor/engines/, from each release's wheel).

Remediation:
The current metric name; `ignoreNullValues: "false"` with a `fallback` (failureThreshold 3,
replicas at least the usual count) so losing the signal is loud.

Example:
ScaledObject serving/vllm: spec.triggers[0].metadata.ignoreNullValues = true (default): an empty
result scales to spec.minReplicaCount -> ignoreNullValues: "false" and a fallback.
"""

from __future__ import annotations

from doctor.checking.contract import Pass, Result, check
from doctor.checklib import ScalerFault, retired_metric, scaler_fire, signals_of
from doctor.model import Cause, SymptomClass
from doctor.scalers.model import Scaler, ScalingView, Signal
from doctor.scalers.promql import read_query


def _retired(scaler: Scaler, signal: Signal) -> ScalerFault | None:
    names = read_query(signal.query).metrics if signal.query else [signal.metric] if signal.metric else []
    for name in names:
        if (found := retired_metric(name)) is not None:
            engine, metric, retired = found
            instead = retired.replacement or "a metric the engine still exports"
            return ScalerFault(scaler, signal.where, name, f"{instead} in place of {metric}",
                         f"{signal.where} reads {metric}, which {engine} no longer exports (last in {retired.last_release}, "
                         f"gone from {retired.first_without}; {retired.source}): the signal is empty")
    return None


def _null_as_zero(scaler: Scaler, signal: Signal) -> ScalerFault | None:
    knob = signal.null_as_zero
    if knob is None or not knob.known or str(knob.value).strip().lower() == "false":
        return None
    fallback = scaler.fallback
    advice = '"false"' + ("" if fallback is not None and fallback.known else
                          ", and spec.fallback {failureThreshold: 3, replicas: the usual count}")
    helps = ("; its spec.fallback does not apply to an empty result" if fallback is not None and fallback.known
             else "; no spec.fallback says what a scaler error means")
    return ScalerFault(scaler, knob.path, str(knob.value), advice,
                 f"{knob.said()}: an empty result (a renamed series, a lost scrape target) reads as 0 and scales to the floor"
                 + helps)


@check(code="LD604", name="absent-signal-read-as-zero", symptom=SymptomClass.SCALING, cause=Cause.SCALING,
       aliases=("ignore-null-values", "retired-metric"))
def absent_signal_read_as_zero(scalers: ScalingView) -> Result:
    pairs = signals_of(scalers)
    faults = [f for s, sig in pairs for f in (_retired(s, sig), _null_as_zero(s, sig)) if f is not None]
    if not faults:
        return Pass(f"{len(pairs)} signal(s): none read an empty result as 0 or a retired metric")
    return scaler_fire("An absent signal reads as zero", faults,
                       "losing the signal (stop the metric's scrape target) held or raised replicas, never dropped them")
