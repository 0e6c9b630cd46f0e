"""An autoscaler aims a target at a cumulative counter.

What it detects:
A scaler's signal reads a counter as if it were a level: a PromQL query selecting a `_total`,
`_count`, `_sum` or `_bucket` series outside `rate()`, `irate()` or `increase()`, or a metric
name so suffixed (or of kind `counter`, as Google Managed Prometheus spells it:
`prometheus.googleapis.com|name|counter`) handed to an HPA `Pods`/`External` metric or an AIBrix
`targetMetric`.

Why it matters:
A counter only grows: the scaler reads an ever larger number, scales up and never back down
(aibrix#852: a KPA on a `_sum` counter). Through prometheus-adapter, its default rules turn a
`_total` series into a rate and drop the suffix, so a name still ending in `_total` is the raw
counter unless a rule of the adapter (not in this object) rates it.

Evidence:
scalers: each signal's query (parsed) or metric name.

Remediation:
Wrap the counter in `rate(...[2m])` (requests per second) or scale on a gauge such as the
engine's queue depth.

Example:
ScaledObject serving/vllm: spec.triggers[0].metadata.query selects vllm:request_success_total
without rate() -> sum(rate(vllm:request_success_total[2m])).
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.checking.contract import Result, check
from doctor.checklib import ScalerFault, judge_signals
from doctor.model import Cause, SymptomClass
from doctor.scalers.model import Scaler, ScalingView, Signal
from doctor.scalers.promql import read_query

COUNTER_SUFFIXES = ("_total", "_count", "_sum", "_bucket")


def _counter(name: str) -> bool:
    return name.endswith(COUNTER_SUFFIXES)


@dataclass(frozen=True)
class RawCounter:
    """A signal that reads a counter as a level: the counter, and whether a query selects it (else
    the signal names it, and only an adapter's rule could rate it)."""

    signal: Signal
    counter: str
    in_query: bool


def _raw_counter(signal: Signal) -> RawCounter | None:
    if signal.query is not None:
        shape = read_query(signal.query)
        raw = [s.metric for s in shape.selections if _counter(s.metric) and not s.rated]
        return RawCounter(signal, raw[0], in_query=True) if raw else None
    if signal.metric and (_counter(signal.metric) or signal.metric_kind == "counter"):
        return RawCounter(signal, signal.metric, in_query=False)
    return None


def _fault(scaler: Scaler, signal: Signal) -> ScalerFault | None:
    raw = _raw_counter(signal)
    return _said(scaler, raw) if raw is not None else None


@check(code="LD603", name="counter-as-gauge", symptom=SymptomClass.SCALING, cause=Cause.SCALING)
def counter_as_gauge(scalers: ScalingView) -> Result:
    return judge_signals(scalers, _fault, passed="none a raw counter", title="An autoscaler reads a counter as a level",
                         expect="the signal's value falling when the load falls, and replicas going with it")


def _said(scaler: Scaler, raw: RawCounter) -> ScalerFault:
    signal, counter = raw.signal, raw.counter
    if raw.in_query and signal.query is not None:
        return ScalerFault(scaler, signal.where, signal.query, f"rate({counter}[2m]) in place of {counter}",
                           f"{signal.where} selects the counter {counter} without rate() or increase(): it only grows")
    return ScalerFault(scaler, signal.where, counter, f"a rate of {counter} (an adapter rule with rate()) or a gauge",
                       f"{signal.where} names the counter {counter}: unless the adapter's rule rates it, it only grows")
