"""Replicas were asked for and are not running.

What it detects:
Pods of the scaled workload Pending and unschedulable (`PodScheduled` False: `Unschedulable`,
"0/4 nodes are available: 4 Insufficient nvidia.com/gpu"), or a scaler whose desired replicas
exceed its current ones in its status, or (Prometheus history) an HPA whose current replicas
stayed below its desired ones over the window for longer than a replica is created.

Why it matters:
The scaler did its part; the cluster did not: no GPU is free, the node pool is at its size or
quota, or a new node is still coming. Pending pods emit no metrics, and a scaler reading per-pod
averages may keep asking (aibrix#2670: 2 to 4 to 8 to 16 while pending).

Evidence:
scalers: the workload's pods (live), each scaler's status, and each HPA's history from Prometheus.

Remediation:
GPU capacity (the node pool's size or autoscaler, the quota), not the scaler's settings.

Options:
min_lag_s: seconds the history's current replicas must stay below desired before it fires (two
    HPA sync periods: a Deployment creates its pods within one)

Example:
Deployment/vllm: 2 pods Pending (Unschedulable: 0/4 nodes are available: 4 Insufficient
nvidia.com/gpu) -> more GPU nodes in the pool.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.checking.contract import Fire, Pass, Result, check
from doctor.checklib import ScalerFault, history_scaler, rescan, scaler_fire, scalers_of, tried
from doctor.evidence import PodState
from doctor.foundation.units import fmt_seconds
from doctor.model import Cause, EvidenceValue, Remediation, SymptomClass
from doctor.scalers.history import ScalerHistory
from doctor.scalers.model import Scaler, ScalingView


@dataclass(frozen=True)
class Pending:
    """Pods the scheduler could not place (of ``pods`` read) in the scaled workload."""

    workload: str | None
    pending: tuple[PodState, ...]
    pods: int


@check(code="LD610", name="replicas-pending", symptom=SymptomClass.SCALING, cause=Cause.SCALING)
def replicas_pending(scalers: ScalingView, *, min_lag_s: float = 30.0) -> Result:
    # unschedulable only: a pod pulling its image or creating its container is Pending too, and is no capacity problem
    pending = [p for p in scalers.pods if p.phase == "Pending" and p.unscheduled_reason == "Unschedulable"]
    if pending:
        found = Pending(scalers.workload, tuple(pending), len(scalers.pods))
        return Fire(
            title="Replicas were asked for and are not running",
            summary=_summary(found),
            remediation=_remediation(found),
            evidence=_evidence(found),
            felt=False,  # the cluster's state, not latency measured: a queue it causes is LD101/LD505's to feel
        )
    judged = scalers_of(scalers, history=True)
    behind = [s for s in judged if s.status is not None and s.status.desired is not None
              and s.status.current is not None and s.status.desired > s.status.current]
    lagging = [h for h in scalers.history if h.scoped and h.lag_s >= min_lag_s]
    if not behind and not lagging:
        return Pass(_all_running(scalers, bool(scalers.pods or any(s.status for s in judged) or scalers.history)))
    return scaler_fire("Replicas were asked for and are not running",
                       [*(_behind_said(s) for s in behind), *(_lagging_said(h) for h in lagging)],
                       "current replicas reaching desired within a start-up time")


def _reason(found: Pending) -> str:
    why = found.pending[0]
    return f"{why.unscheduled_reason}: {why.unscheduled_message}"


def _workload(found: Pending) -> str:
    return found.workload or "the scaled workload"


def _summary(found: Pending) -> str:
    return f"{_workload(found)}: {len(found.pending)} of {found.pods} pod(s) Pending ({_reason(found)})"


def _remediation(found: Pending) -> Remediation:
    return Remediation(setting="GPU capacity", suggested="nodes with a free GPU for each Pending pod",
                       current=f"{len(found.pending)} Pending", where=f"{_workload(found)}'s node pool or quota",
                       why=f"the scaler asked and the cluster could not place them: {_reason(found)}",
                       verify=rescan("every replica the scaler asks for Running within its start-up time"))


def _evidence(found: Pending) -> list[EvidenceValue]:
    return [EvidenceValue(f"pod {p.name}", p.phase, source=p.unscheduled_message or "") for p in found.pending[:8]]


def _all_running(scalers: ScalingView, read: bool) -> str:
    return ("every replica asked for is running" if read else "no pods nor scaler status read") + tried(scalers)


def _behind_said(scaler: Scaler) -> ScalerFault:
    status = scaler.status
    desired, current = (status.desired, status.current) if status is not None else (None, None)
    return ScalerFault(scaler, "status.desiredReplicas", f"desired {desired}, current {current}",
                       "GPU capacity for the missing replicas",
                       f"desired {desired} > current {current}: replicas asked for are not running")


def _lagging_said(history: ScalerHistory) -> ScalerFault:
    return ScalerFault(history_scaler(history), "status.currentReplicas", f"below desired for {fmt_seconds(history.lag_s)}",
                       "GPU capacity for the missing replicas", f"{history.said()}: replicas asked for were not running")
