"""The autoscaler cannot read its own signal.

What it detects:
The controller's status says it is scaling blind: an HPA's `ScalingActive` condition False
(`FailedGetExternalMetric`, `FailedGetPodsMetric`, `FailedGetResourceMetric`, `InvalidSelector`;
not `ScalingDisabled`, the rest of a target scaled to zero),
a KEDA ScaledObject whose `Ready` condition is False, whose `Fallback` is active, or whose
triggers report `Failing` health.

Why it matters:
While the metric cannot be read the replica count is frozen (or the fallback's): users queue
behind a scaler that is not looking (an HPA whose ScalingActive had been False for hours is a
recurring finding of LLM incident write-ups).

Evidence:
scalers: each object's status conditions (and KEDA's trigger health), as the controller wrote them.

Remediation:
Make the signal readable: the adapter or Prometheus address, the metric's name and labels, the
scaler's credentials, as the condition's message says.

Example:
HorizontalPodAutoscaler serving/vllm: ScalingActive False (FailedGetExternalMetric: unable to get
external metric vllm_waiting) -> fix the metric the condition names.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.checking.contract import Pass, Result, check
from doctor.checklib import ScalerFault, scaler_fire, scalers_of
from doctor.model import Cause, Severity, SymptomClass
from doctor.scalers.model import Condition, Scaler, ScalingView


@dataclass(frozen=True)
class Unreadable:
    """A scaler whose controller cannot read its signal: the condition that says so (``kind`` at
    ``bad``), else the triggers that fail."""

    scaler: Scaler
    condition: Condition | None
    failing: tuple[str, ...] = ()


def _unreadable(scaler: Scaler) -> Unreadable | None:
    status = scaler.status
    if status is None:
        return None
    for kind, bad in (("ScalingActive", "False"), ("Ready", "False"), ("Fallback", "True")):
        condition = status.condition(kind)
        # ScalingDisabled: the target has no replica (KEDA at zero, idle), the controller's normal rest
        if condition is not None and condition.status == bad and condition.reason != "ScalingDisabled":
            return Unreadable(scaler, condition)
    if status.failing:
        return Unreadable(scaler, None, tuple(status.failing))
    return None


@check(code="LD608", name="scaler-metric-unavailable", symptom=SymptomClass.SCALING, cause=Cause.SCALING)
def scaler_metric_unavailable(scalers: ScalingView) -> Result:
    judged = scalers_of(scalers, engines_only=False)
    with_status = [s for s in judged if s.status is not None]
    if not with_status:
        return Pass("no autoscaler status was read (objects without status, as written rather than as the cluster has them)")
    unreadable = [u for s in with_status if (u := _unreadable(s)) is not None]
    if not unreadable:
        return Pass(_all_read(len(with_status)))
    return scaler_fire("The autoscaler cannot read its signal", [_said(u) for u in unreadable],
                       "ScalingActive True (ValidMetricFound)", severity=Severity.CRITICAL)


def _all_read(with_status: int) -> str:
    return f"{with_status} autoscaler(s) with status, each reading its signal"


def _said(found: Unreadable) -> ScalerFault:
    condition = found.condition
    if condition is not None:
        kind, bad = condition.type, condition.status
        said = f"{kind} {bad}" + (f" ({condition.reason}: {condition.message})" if condition.reason or condition.message else "")
        return ScalerFault(found.scaler, f"status.conditions[{kind}]", said, "a signal the controller can read (see the message)",
                           f"the controller reports {said}: the replica count is frozen while it cannot read its signal")
    failing = ", ".join(found.failing)
    return ScalerFault(found.scaler, "status.health", failing, "the failing trigger's query, address or credentials",
                       f"trigger(s) {failing} fail: the scaler acts on what it last read, or its fallback")
