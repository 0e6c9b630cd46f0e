"""An autoscaler compares a fleet-wide sum with a per-replica target.

What it detects:
A `Value` target (HPA `Object`/`External` metric with `target.type: Value`, KEDA `metricType:
Value`, KServe `target.type: Value`) on a query that sums over every replica (`sum(...)`
without `by (pod)`).

Why it matters:
With `Value`, the controller compares the whole fleet's total with the target and multiplies the
current replicas by total / target: a target meant per replica sizes the fleet to hold that many
waiting in all, and overshoots on the way (4 replicas, 8 waiting in all, target 4: 8 replicas,
where `AverageValue` gives 2).

Evidence:
scalers: each signal's target type and its query's outermost aggregation (parsed).

Remediation:
`AverageValue` (KEDA's default `metricType`), which divides the sum by the replicas.

Example:
ScaledObject serving/vllm: spec.triggers[0].metricType Value on sum(vllm:num_requests_waiting)
-> metricType: AverageValue.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.checking.contract import Result, check
from doctor.checklib import ScalerFault, judge_signals
from doctor.model import Cause, SymptomClass
from doctor.scalers.model import Scaler, ScalingView, Signal
from doctor.scalers.promql import read_query


@dataclass(frozen=True)
class FleetSum:
    """A signal whose query sums every replica, compared as a Value: its target and the replicas
    running now (for a worked example)."""

    signal: Signal
    target: float | None
    current: int | None


def _fleet_sum(scaler: Scaler, signal: Signal) -> FleetSum | None:
    if signal.target_type != "Value" or signal.query is None or not read_query(signal.query).sums_replicas:
        return None
    return FleetSum(signal, signal.target.number() if signal.target is not None else None,
                    scaler.status.current if scaler.status is not None else None)


def _fault(scaler: Scaler, signal: Signal) -> ScalerFault | None:
    found = _fleet_sum(scaler, signal)
    return _said(scaler, found) if found is not None else None


@check(code="LD607", name="fleet-sum-as-per-replica", symptom=SymptomClass.SCALING, cause=Cause.SCALING)
def fleet_sum_as_per_replica(scalers: ScalingView) -> Result:
    return judge_signals(scalers, _fault, passed="no fleet sum compared as a Value",
                         title="A fleet-wide sum meets a per-replica target",
                         expect="replicas in proportion to the load per replica, without overshoot")


def _said(scaler: Scaler, found: FleetSum) -> ScalerFault:
    signal, current = found.signal, found.current
    target = signal.target.value if signal.target is not None else "unset"
    example = (f"at {current} replicas and {2 * current * (found.target or 1):g} in all, it asks for "
               f"{2 * current} where AverageValue holds {current}" if current and signal.target is not None and found.target
               else "it asks for replicas x total / target")
    return ScalerFault(scaler, f"{signal.path}.metricType" if scaler.product == "keda" else f"{signal.path} target.type", "Value",
                       "AverageValue", f"{signal.where} sums every replica and is compared as a Value with {target}: {example}")
