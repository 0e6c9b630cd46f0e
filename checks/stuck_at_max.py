"""The autoscaler is at its ceiling while requests wait.

What it detects:
The controller wants as many replicas as `maxReplicas` allows (desired at the ceiling, or an
HPA's `ScalingLimited` True with `TooManyReplicas`) while the engine's queue holds requests
(its waiting gauge over the window), or, from an object alone, while the controller says the
ceiling limits it. For a past incident, kube-state-metrics' HPA series in Prometheus say the
same over the window (desired at `spec_max_replicas`, or `ScalingLimited` true); a quiet result
then says what each HPA did (desired rose, or stayed: the scaler did not try).

Why it matters:
Users queue and the fleet does not grow: the ceiling (or the GPU budget behind it) is the limit,
not the engine's tuning nor the scaler's signal.

Evidence:
scalers: each scaler's status (desired, current, conditions) and ceiling, and its history from
Prometheus; metrics_window: the engine's waiting requests.

Remediation:
A higher `maxReplicas` (the GPU quota or node pool behind it first), or fewer requests offered.

Example:
HorizontalPodAutoscaler serving/vllm: desired 4 = spec.maxReplicas 4, ScalingLimited
TooManyReplicas, up to 12 requests waiting -> spec.maxReplicas: 8.
"""

from __future__ import annotations

from doctor.checking.contract import Pass, Result, check
from doctor.checklib import ScalerFault, history_scaler, scaler_fire, scalers_of, tried
from doctor.derive.metrics_window import MetricsWindow
from doctor.model import Cause, EvidenceValue, SymptomClass
from doctor.scalers.model import Scaler, ScalingView


def _at_ceiling(scaler: Scaler) -> str | None:
    """Why the scaler is at its ceiling, or None."""
    status, ceiling = scaler.status, scaler.ceiling
    if status is None or ceiling is None:
        return None
    limited = status.condition("ScalingLimited")
    if limited is not None and limited.status == "True" and limited.reason == "TooManyReplicas":
        return f"ScalingLimited True (TooManyReplicas: {limited.message})" if limited.message else "ScalingLimited True (TooManyReplicas)"
    top = ceiling.number()
    if top is not None and status.desired is not None and status.desired >= top:
        return f"desired {status.desired} = {ceiling.said()}"
    return None


def _raised(top: float) -> str:
    return f"{max(int(top) * 2, int(top) + 1)} (the GPU quota first)"


@check(code="LD609", name="stuck-at-max", symptom=SymptomClass.SCALING, cause=Cause.SCALING)
def stuck_at_max(scalers: ScalingView, metrics_window: MetricsWindow | None = None) -> Result:
    judged = scalers_of(scalers, history=True)
    waiting = metrics_window.waiting.max if metrics_window is not None and metrics_window.waiting is not None else None
    faults = []
    for scaler in judged:
        why = _at_ceiling(scaler)
        if why is None or (waiting is not None and waiting <= 0) or scaler.ceiling is None:
            continue
        top = scaler.ceiling.number() or 0
        queue = f", up to {waiting:.0f} request(s) waiting" if waiting else ""
        faults.append(ScalerFault(scaler, scaler.ceiling.path, str(scaler.ceiling.value), _raised(top),
                            f"{why}{queue}: the ceiling, not the engine, is the limit"))
    if waiting is None or waiting > 0:
        queue = f", up to {waiting:.0f} request(s) waiting" if waiting else ""
        for history in (h for h in scalers.history if h.scoped):
            if history.at_ceiling_s > 0 and history.ceiling is not None:
                scaler = history_scaler(history)
                faults.append(ScalerFault(scaler, "spec.maxReplicas", f"{history.ceiling:g}", _raised(history.ceiling),
                                    f"{history.said()}{queue}: the ceiling, not the engine, was the limit"))
    if not faults:
        return Pass("no autoscaler at its ceiling while requests waited" + tried(scalers))
    evidence = [EvidenceValue("waiting max", waiting, "requests", "metrics window")] if waiting is not None else []
    return scaler_fire("The fleet is at its ceiling while requests wait", faults,
                       "desired replicas below the ceiling under the same load, and the queue drained", evidence=evidence,
                       felt=bool(waiting))
