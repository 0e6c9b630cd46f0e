"""An autoscaler removes replicas faster than one can come back.

What it detects:
The time load must stay low before a replica goes is shorter than a replica's start-up: HPA
`behavior.scaleDown.stabilizationWindowSeconds` (default 300 s), the same field under KEDA's
`advanced.horizontalPodAutoscalerConfig`, the HTTP add-on's `scaledownPeriod`, Knative's stable
`window` plus `scale-down-delay` (60 s and 0 s by default), AIBrix's scale-down cooldown, Ray
Serve's `downscale_delay_s`. The start-up is the engine's own (its startup log's
initialisation, a lower bound) or, without a log, a stated default of minutes.

Why it matters:
A lull shorter than a start-up takes a replica away that the next burst needs back: the fleet
flaps (dynamo PR#9294: 2 to 1 and back, the survivor taking the whole load), and each return
costs the users of that burst a cold start.

Evidence:
scalers: each scaler's scale-down time; log_facts: `init engine ... took`.

Remediation:
A scale-down window at least the start-up time (the vendors ship 300-600 s).

Example:
HorizontalPodAutoscaler serving/vllm: spec.behavior.scaleDown.stabilizationWindowSeconds = 30,
a replica needs at least 62 s to serve -> 300.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.checking.contract import Pass, Result, check
from doctor.checklib import ScalerFault, scaler_fire, scalers_of, startup_s
from doctor.derive.log_facts import LogFacts
from doctor.model import Cause, EvidenceValue, SymptomClass
from doctor.scalers.model import Knob, Scaler, ScalingView

#: The smallest window suggested: what HPA and KEDA ship.
SHIPPED_WINDOW_S = 300


@dataclass(frozen=True)
class Eager:
    """A scaler whose scale-down window (``window`` seconds) is shorter than a replica's start-up,
    and the window to suggest."""

    scaler: Scaler
    knob: Knob
    window: float
    suggested: int


@check(code="LD606", name="eager-scale-down", symptom=SymptomClass.SCALING, cause=Cause.COLD_START, aliases=("flapping",))
def eager_scale_down(scalers: ScalingView, log_facts: LogFacts | None = None) -> Result:
    judged = scalers_of(scalers)
    start, said = startup_s(log_facts)
    eager = []
    for scaler in judged:
        knob = scaler.scale_down_s
        window = knob.seconds() if knob is not None else None
        if knob is None or window is None or window >= start:
            continue
        floor, ceiling = scaler.floor, scaler.ceiling
        if floor is not None and ceiling is not None and floor.explicit and ceiling.explicit and floor.number() == ceiling.number():
            continue  # a fixed size: nothing scales down
        eager.append(Eager(scaler, knob, window, max(SHIPPED_WINDOW_S, int(start * 2))))
    if not eager:
        return Pass(_kept_longer(len(judged), said))
    return scaler_fire("Replicas go faster than they come back", [_said(e, said) for e in eager],
                       "the replica count steady through lulls shorter than a start-up",
                       evidence=_evidence(start, said))


def _kept_longer(judged: int, startup: str) -> str:
    return f"{judged} engine autoscaler(s), each keeping replicas longer than a start-up ({startup})"


def _said(eager: Eager, startup: str) -> ScalerFault:
    return ScalerFault(eager.scaler, eager.knob.path, f"{eager.window:.0f} s", f"{eager.suggested}",
                       f"replicas go after {eager.window:.0f} s of lower load ({eager.knob.said()}), and one needs "
                       f"{startup} to serve again")


def _evidence(start: float, startup: str) -> list[EvidenceValue]:
    return [EvidenceValue("replica start-up", round(start, 1), "s", startup)]
