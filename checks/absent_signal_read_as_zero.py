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

from dataclasses import dataclass

from doctor.checking.contract import Pass, Result, check
from doctor.checklib import ScalerFault, retired_metric, scaler_fire, signals_of
from doctor.model import Cause, SymptomClass
from doctor.scalers.model import Knob, Scaler, ScalingView, Signal
from doctor.scalers.promql import read_query


@dataclass(frozen=True)
class RetiredRead:
    """A signal that reads a metric its engine no longer exports: the name as spelled, the engine
    (as a sentence names it), the metric, its replacement if any, the last release that had it, the
    first without it, and where that is said."""

    scaler: Scaler
    signal: Signal
    name: str
    engine: str
    metric: str
    replacement: str | None
    last_release: str
    first_without: str
    source: str


@dataclass(frozen=True)
class NullAsZero:
    """A signal set to read an empty result as 0, and whether the scaler has a fallback."""

    scaler: Scaler
    knob: Knob
    fallback: bool


def _retired(scaler: Scaler, signal: Signal) -> RetiredRead | None:
    names = read_query(signal.query).metrics if signal.query else [signal.metric] if signal.metric else []
    for name in names:
        if (found := retired_metric(name)) is not None:
            engine, metric, retired = found
            return RetiredRead(scaler, signal, name, engine, metric, retired.replacement, retired.last_release,
                               retired.first_without, retired.source)
    return None


def _null_as_zero(scaler: Scaler, signal: Signal) -> NullAsZero | None:
    knob = signal.null_as_zero
    if knob is None or not knob.known or str(knob.value).strip().lower() == "false":
        return None
    return NullAsZero(scaler, knob, scaler.fallback is not None and scaler.fallback.known)


@check(code="LD604", name="absent-signal-read-as-zero", symptom=SymptomClass.SCALING, cause=Cause.SCALING,
       aliases=("ignore-null-values", "retired-metric"))
def absent_signal_read_as_zero(scalers: ScalingView) -> Result:
    pairs = signals_of(scalers)
    found = [f for s, sig in pairs for f in (_retired(s, sig), _null_as_zero(s, sig)) if f is not None]
    if not found:
        return Pass(_none_absent(len(pairs)))
    return scaler_fire("An absent signal reads as zero", [_said(f) for f in found],
                       "losing the signal (stop the metric's scrape target) held or raised replicas, never dropped them")


def _none_absent(signals: int) -> str:
    return f"{signals} signal(s): none read an empty result as 0 or a retired metric"


def _said(found: RetiredRead | NullAsZero) -> ScalerFault:
    if isinstance(found, RetiredRead):
        where = found.signal.where
        instead = found.replacement or "a metric the engine still exports"
        return ScalerFault(found.scaler, where, found.name, f"{instead} in place of {found.metric}",
                           f"{where} reads {found.metric}, which {found.engine} no longer exports (last in "
                           f"{found.last_release}, gone from {found.first_without}; {found.source}): the signal is empty")
    knob = found.knob
    advice = '"false"' + ("" if found.fallback else ", and spec.fallback {failureThreshold: 3, replicas: the usual count}")
    helps = ("; its spec.fallback does not apply to an empty result" if found.fallback
             else "; no spec.fallback says what a scaler error means")
    return ScalerFault(found.scaler, knob.path, str(knob.value), advice,
                       f"{knob.said()}: an empty result (a renamed series, a lost scrape target) reads as 0 and scales to "
                       "the floor" + helps)
