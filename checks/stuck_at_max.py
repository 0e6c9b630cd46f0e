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

from dataclasses import dataclass

from doctor.checking.contract import Pass, Result, check
from doctor.checklib import ScalerFault, history_scaler, scaler_fire, scalers_of, tried
from doctor.derive.metrics_window import MetricsWindow
from doctor.model import Cause, EvidenceValue, SymptomClass
from doctor.scalers.history import ScalerHistory
from doctor.scalers.model import Knob, Scaler, ScalingView


@dataclass(frozen=True)
class AtCeiling:
    """A scaler at its ceiling: its controller says so (``ScalingLimited`` True, TooManyReplicas,
    with its message), else the replicas it desires reach the ceiling (``top``)."""

    scaler: Scaler
    ceiling: Knob
    top: float
    limited: bool
    message: str = ""
    desired: int | None = None


def _at_ceiling(scaler: Scaler) -> AtCeiling | None:
    """Whether the scaler is at its ceiling, and what says so."""
    status, ceiling = scaler.status, scaler.ceiling
    if status is None or ceiling is None:
        return None
    top = ceiling.number()
    limited = status.condition("ScalingLimited")
    if limited is not None and limited.status == "True" and limited.reason == "TooManyReplicas":
        return AtCeiling(scaler, ceiling, top or 0, limited=True, message=limited.message)
    if top is not None and status.desired is not None and status.desired >= top:
        return AtCeiling(scaler, ceiling, top, limited=False, desired=status.desired)
    return None


def _raised(top: float) -> str:
    return f"{max(int(top) * 2, int(top) + 1)} (the GPU quota first)"


@check(code="LD609", name="stuck-at-max", symptom=SymptomClass.SCALING, cause=Cause.SCALING)
def stuck_at_max(scalers: ScalingView, metrics_window: MetricsWindow | None = None) -> Result:
    judged = scalers_of(scalers, history=True)
    waiting = metrics_window.waiting.max if metrics_window is not None and metrics_window.waiting is not None else None
    queued = waiting is None or waiting > 0
    at_ceiling = [c for s in judged if (c := _at_ceiling(s)) is not None] if queued else []
    histories = [h for h in scalers.history if h.scoped and h.at_ceiling_s > 0 and h.ceiling is not None] if queued else []
    if not at_ceiling and not histories:
        return Pass(_below_ceilings(scalers))
    return scaler_fire("The fleet is at its ceiling while requests wait",
                       [*(_said(c, waiting) for c in at_ceiling), *(_history_said(h, waiting) for h in histories)],
                       "desired replicas below the ceiling under the same load, and the queue drained",
                       evidence=_evidence(waiting), felt=bool(waiting))


def _below_ceilings(scalers: ScalingView) -> str:
    return "no autoscaler at its ceiling while requests waited" + tried(scalers)


def _queue(waiting: float | None) -> str:
    return f", up to {waiting:.0f} request(s) waiting" if waiting else ""


def _said(found: AtCeiling, waiting: float | None) -> ScalerFault:
    if found.limited:
        why = (f"ScalingLimited True (TooManyReplicas: {found.message})" if found.message
               else "ScalingLimited True (TooManyReplicas)")
    else:
        why = f"desired {found.desired} = {found.ceiling.said()}"
    return ScalerFault(found.scaler, found.ceiling.path, str(found.ceiling.value), _raised(found.top),
                       f"{why}{_queue(waiting)}: the ceiling, not the engine, is the limit")


def _history_said(history: ScalerHistory, waiting: float | None) -> ScalerFault:
    ceiling = history.ceiling or 0
    return ScalerFault(history_scaler(history), "spec.maxReplicas", f"{ceiling:g}", _raised(ceiling),
                       f"{history.said()}{_queue(waiting)}: the ceiling, not the engine, was the limit")


def _evidence(waiting: float | None) -> list[EvidenceValue]:
    return [EvidenceValue("waiting max", waiting, "requests", "metrics window")] if waiting is not None else []
