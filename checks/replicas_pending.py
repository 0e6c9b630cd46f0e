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

from doctor.checking.contract import Fire, Pass, Result, check
from doctor.checklib import ScalerFault, history_scaler, rescan, scaler_fire, scalers_of, tried
from doctor.foundation.units import fmt_seconds
from doctor.model import Cause, EvidenceValue, Remediation, SymptomClass
from doctor.scalers.model import ScalingView


@check(code="LD610", name="replicas-pending", symptom=SymptomClass.SCALING, cause=Cause.SCALING)
def replicas_pending(scalers: ScalingView, *, min_lag_s: float = 30.0) -> Result:
    # unschedulable only: a pod pulling its image or creating its container is Pending too, and is no capacity problem
    pending = [p for p in scalers.pods if p.phase == "Pending" and p.unscheduled_reason == "Unschedulable"]
    if pending:
        why = pending[0]
        reason = f"{why.unscheduled_reason}: {why.unscheduled_message}"
        workload = scalers.workload or "the scaled workload"
        return Fire(
            title="Replicas were asked for and are not running",
            summary=f"{workload}: {len(pending)} of {len(scalers.pods)} pod(s) Pending ({reason})",
            remediation=Remediation(setting="GPU capacity", suggested="nodes with a free GPU for each Pending pod",
                                    current=f"{len(pending)} Pending", where=f"{workload}'s node pool or quota",
                                    why=f"the scaler asked and the cluster could not place them: {reason}",
                                    verify=rescan("every replica the scaler asks for Running within its start-up time")),
            evidence=[EvidenceValue(f"pod {p.name}", p.phase, source=p.unscheduled_message or "") for p in pending[:8]],
            felt=False,  # the cluster's state, not latency measured: a queue it causes is LD101/LD505's to feel
        )
    judged = scalers_of(scalers, history=True)
    faults = [ScalerFault(s, "status.desiredReplicas", f"desired {s.status.desired}, current {s.status.current}",
                    "GPU capacity for the missing replicas",
                    f"desired {s.status.desired} > current {s.status.current}: replicas asked for are not running")
              for s in judged if s.status is not None and s.status.desired is not None and s.status.current is not None
              and s.status.desired > s.status.current]
    faults += [ScalerFault(history_scaler(h), "status.currentReplicas", f"below desired for {fmt_seconds(h.lag_s)}",
                     "GPU capacity for the missing replicas", f"{h.said()}: replicas asked for were not running")
               for h in scalers.history if h.scoped and h.lag_s >= min_lag_s]
    if not faults:
        return Pass(("every replica asked for is running" if scalers.pods or any(s.status for s in judged) or scalers.history
                     else "no pods nor scaler status read") + tried(scalers))
    return scaler_fire("Replicas were asked for and are not running", faults,
                       "current replicas reaching desired within a start-up time")
