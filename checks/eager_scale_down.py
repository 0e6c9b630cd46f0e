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

from doctor.checking.contract import Pass, Result, check
from doctor.checklib import ScalerFault, scaler_fire, scalers_of, startup_s
from doctor.derive.log_facts import LogFacts
from doctor.model import Cause, EvidenceValue, SymptomClass
from doctor.scalers.model import ScalingView

#: The smallest window suggested: what HPA and KEDA ship.
SHIPPED_WINDOW_S = 300


@check(code="LD606", name="eager-scale-down", symptom=SymptomClass.SCALING, cause=Cause.COLD_START, aliases=("flapping",))
def eager_scale_down(scalers: ScalingView, log_facts: LogFacts | None = None) -> Result:
    judged = scalers_of(scalers)
    start, said = startup_s(log_facts)
    faults = []
    for scaler in judged:
        knob = scaler.scale_down_s
        window = knob.seconds() if knob is not None else None
        if knob is None or window is None or window >= start:
            continue
        floor, ceiling = scaler.floor, scaler.ceiling
        if floor is not None and ceiling is not None and floor.explicit and ceiling.explicit and floor.number() == ceiling.number():
            continue  # a fixed size: nothing scales down
        suggested = max(SHIPPED_WINDOW_S, int(start * 2))
        faults.append(ScalerFault(scaler, knob.path, f"{window:.0f} s", f"{suggested}",
                            f"replicas go after {window:.0f} s of lower load ({knob.said()}), and one needs {said} to serve again"))
    if not faults:
        return Pass(f"{len(judged)} engine autoscaler(s), each keeping replicas longer than a start-up ({said})")
    return scaler_fire("Replicas go faster than they come back", faults,
                       "the replica count steady through lulls shorter than a start-up",
                       evidence=[EvidenceValue("replica start-up", round(start, 1), "s", said)])
