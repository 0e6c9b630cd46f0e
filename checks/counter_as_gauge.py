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

from doctor.checking.contract import Result, check
from doctor.checklib import ScalerFault, judge_signals
from doctor.model import Cause, SymptomClass
from doctor.scalers.model import Scaler, ScalingView, Signal
from doctor.scalers.promql import read_query

COUNTER_SUFFIXES = ("_total", "_count", "_sum", "_bucket")


def _counter(name: str) -> bool:
    return name.endswith(COUNTER_SUFFIXES)


def _fault(scaler: Scaler, signal: Signal) -> ScalerFault | None:
    if signal.query is not None:
        shape = read_query(signal.query)
        raw = [s.metric for s in shape.selections if _counter(s.metric) and not s.rated]
        if not raw:
            return None
        return ScalerFault(scaler, signal.where, signal.query, f"rate({raw[0]}[2m]) in place of {raw[0]}",
                     f"{signal.where} selects the counter {raw[0]} without rate() or increase(): it only grows")
    if signal.metric and (_counter(signal.metric) or signal.metric_kind == "counter"):
        return ScalerFault(scaler, signal.where, signal.metric, f"a rate of {signal.metric} (an adapter rule with rate()) or a gauge",
                     f"{signal.where} names the counter {signal.metric}: unless the adapter's rule rates it, it only grows")
    return None


@check(code="LD603", name="counter-as-gauge", symptom=SymptomClass.SCALING, cause=Cause.SCALING)
def counter_as_gauge(scalers: ScalingView) -> Result:
    return judge_signals(scalers, _fault, passed="none a raw counter", title="An autoscaler reads a counter as a level",
                         expect="the signal's value falling when the load falls, and replicas going with it")
