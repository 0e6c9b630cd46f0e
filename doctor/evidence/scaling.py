"""The ``scaling`` kind: the autoscaler objects a run read, raw, and where each came from.

Kept as the objects themselves (spec and status as the API or the file had them), so a newer
llm-doctor re-reads an old bundle with the rules it knows then (``doctor.scalers`` reads them
at analysis). From files (``llm-doctor scaling PATH``) or the Kubernetes API (a ``k8s://``
diagnosis: the autoscalers whose ``scaleTargetRef`` is the workload behind the Service, and its
pods); what could not be read is said in ``problems``, never raised.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class ScalerObject:
    """One object as read, and where from (``deploy/hpa.yaml#2``, ``the Kubernetes API``)."""

    source: str
    object: dict[str, Any] = field(default_factory=dict)


@dataclass
class PodState:
    """A pod of the scaled workload: its phase, and why it is not scheduled when it is not
    (``PodScheduled`` False: ``Unschedulable``, "0/4 nodes are available: 4 Insufficient nvidia.com/gpu")."""

    name: str
    phase: str = ""
    unscheduled_reason: str | None = None
    unscheduled_message: str | None = None
    created: str | None = None


@dataclass
class ScalingEvidence:
    """Every autoscaler object read (``objects``), the objects of other kinds passed over
    (``skipped``: "Deployment default/vllm"), what could not be read (``problems``: a file that is a
    Helm template, an answer the API refused), the workload the scalers target and its pods (live),
    and the API resources the cluster does not serve (``absent``: "scaledobjects.keda.sh", a
    product not installed, which is no fault)."""

    origin: str = "files"  # files | kubernetes
    objects: list[ScalerObject] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    workload: str | None = None  # Deployment/vllm
    pods: list[PodState] = field(default_factory=list)
    absent: list[str] = field(default_factory=list)
