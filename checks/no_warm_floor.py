"""A latency-serving engine's autoscaler may take it to zero replicas.

What it detects:
No warm floor: the scaler's floor is 0, said or by default: HPA `minReplicas: 0`, KEDA
`minReplicaCount` 0 or left out (KEDA's default is 0), the HTTP add-on's `replicas.min` 0,
Knative's `min-scale` 0 or left out, KServe `minReplicas: 0`, AIBrix `minReplicas: 0`, Ray
Serve `min_replicas: 0`. A floor that is a `${...}` placeholder is said as unknown, not judged.

Why it matters:
The first request after a lull waits for a replica to be scheduled, pull its image, load its
weights and capture its CUDA graphs: tens of seconds to minutes, felt by exactly the users
returning to the product (the vLLM playbook: "keep a warm floor"). A scale-to-zero wake signal
that exists only while a backend is ready never wakes it (llm-d PR#2492).

Evidence:
scalers: the floor field of each engine scaler; log_facts: the engine's start-up time
(`init engine ... took`), else a stated default of minutes.

Remediation:
A floor of 1 (or more) on the latency-serving engine; keep scale-to-zero for batch or rarely
used models whose users accept the start-up time.

Example:
ScaledObject serving/vllm: spec.minReplicaCount = 0 (default): a returning user waits for a
replica to start (at least 62 s) -> spec.minReplicaCount: 1.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.checking.contract import Pass, Result, check
from doctor.checklib import ScalerFault, scaler_fire, scalers_of, startup_s
from doctor.derive.log_facts import LogFacts
from doctor.model import Cause, EvidenceValue, SymptomClass
from doctor.scalers.model import Knob, Scaler, ScalingView


@dataclass(frozen=True)
class ToZero:
    """A scaler whose floor is zero replicas."""

    scaler: Scaler
    floor: Knob


@check(code="LD602", name="no-warm-floor", symptom=SymptomClass.SCALING, cause=Cause.COLD_START, aliases=("scale-to-zero",))
def no_warm_floor(scalers: ScalingView, log_facts: LogFacts | None = None) -> Result:
    judged = scalers_of(scalers)
    start, said = startup_s(log_facts)
    to_zero = [ToZero(s, s.floor) for s in judged if s.floor is not None and s.floor.number() == 0]
    if not to_zero:
        return Pass(_floors_kept(len(judged)))
    return scaler_fire("An engine may scale to zero", [_said(z, said) for z in to_zero],
                       "a request after an idle spell answered by a warm replica, its first token at the steady TTFT",
                       evidence=_evidence(start, said))


def _floors_kept(judged: int) -> str:
    return f"{judged} engine autoscaler(s), each with a floor of at least one replica or an unknown one"


def _said(zero: ToZero, startup: str) -> ScalerFault:
    floor = zero.floor
    return ScalerFault(zero.scaler, floor.path, floor.said().partition(" = ")[2], "1",
                       f"{floor.said()}: the first request after a lull waits for a replica to start ({startup})")


def _evidence(start: float, startup: str) -> list[EvidenceValue]:
    return [EvidenceValue("replica start-up", round(start, 1), "s", startup)]
