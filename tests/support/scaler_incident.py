"""A real queueing incident beside an autoscaler stuck at its ceiling: the recorded real-vLLM bundle
(other users' load) with an HPA whose status says ScalingLimited (TooManyReplicas), analysed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from doctor.bundle import load_path
from doctor.checking.runner import AnalyzeOptions, analyze
from doctor.evidence import ScalerObject, ScalingEvidence
from doctor.model import Report

ROOT = Path(__file__).resolve().parents[2]
QUEUEING = ROOT / "fixtures" / "bundles" / "realvllm-users-queueing.json.gz"

AT_MAX: dict[str, Any] = {
    "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "vllm", "namespace": "serving"},
    "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "vllm"}, "minReplicas": 1, "maxReplicas": 2,
             "metrics": [{"type": "Pods", "pods": {"metric": {"name": "vllm_num_requests_waiting"},
                                                   "target": {"type": "AverageValue", "averageValue": "4"}}}]},
    "status": {"currentReplicas": 2, "desiredReplicas": 2, "conditions": [
        {"type": "ScalingActive", "status": "True", "reason": "ValidMetricFound"},
        {"type": "ScalingLimited", "status": "True", "reason": "TooManyReplicas"}]},
}


def incident(*, scaler: bool = True, ignore: tuple[str, ...] = ()) -> Report:
    """The incident analysed, with the HPA at its ceiling (``scaler``), leaving out the checks ``ignore`` names."""
    bundle = load_path(QUEUEING)
    if scaler:
        bundle.scaling = ScalingEvidence(objects=[ScalerObject("hpa.yaml", AT_MAX)])
    return analyze(bundle, AnalyzeOptions(ignore=list(ignore)))
