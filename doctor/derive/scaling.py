"""The ``scalers`` view: the autoscaler objects of the bundle read by their products' records
(``doctor.scalers``), at analysis, so a newer llm-doctor reads an old bundle's objects anew."""

from __future__ import annotations

from doctor.derive.missing import Missing
from doctor.evidence import Bundle
from doctor.scalers import read_documents
from doctor.scalers.history import read_history
from doctor.scalers.manifests import as_documents
from doctor.scalers.model import ScalingView


def derive_scalers(bundle: Bundle) -> ScalingView:
    """Every scaler the bundle's objects declare, and what each HPA in the Prometheus history did;
    ``Missing`` when neither was read."""
    evidence = bundle.scaling
    history = read_history(bundle.prometheus)
    if evidence is None:
        if history:
            return ScalingView(origin="Prometheus history (kube-state-metrics)", history=history)
        errors = [e.message for e in bundle.errors_for("scaling")]
        raise Missing("; ".join(errors) if errors else
                      "no autoscaler was read (a k8s:// target, `llm-doctor scaling`, or kube-state-metrics' HPA series in --prometheus)")
    view = read_documents(d for o in evidence.objects for d in as_documents(o.object, o.source))
    view.skipped = [*evidence.skipped, *view.skipped]
    view.problems = [*evidence.problems, *view.problems]
    view.origin = "the Kubernetes API" if evidence.origin == "kubernetes" else "files"
    view.workload, view.pods, view.absent = evidence.workload, list(evidence.pods), list(evidence.absent)
    view.history = history
    return view
