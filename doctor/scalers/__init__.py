"""The autoscalers llm-doctor reads, one record each, and the reading of objects into ``Scaler``s.

Each product is one module holding one ``ScalerRecord`` (``record``): ``hpa`` (Kubernetes),
``keda`` (ScaledObject, HTTPScaledObject), ``knative``, ``kserve``, ``aibrix``, ``ray_serve``.
Everything that lists scalers is derived from ``RECORDS``: the kinds ``llm-doctor scaling``
reads, the API resources a live read lists (and the RBAC ``deploy/kubernetes/fleet-rbac.yaml``
grants), the docs' table. ``model`` is the neutral shape the checks read; ``manifests`` reads
untrusted text into objects; ``promql`` reads a query's shape.

Pure: no probe, no network. The live read (``doctor.probes.scalers``) stores raw objects in the
bundle; ``read_objects`` turns them into the ``scaling`` view at analysis.
"""

from __future__ import annotations

from collections.abc import Iterable

from doctor.scalers import aibrix, hpa, keda, knative, kserve, ray_serve
from doctor.scalers.fields import where
from doctor.scalers.manifests import Document
from doctor.scalers.model import Scaler, ScalingView
from doctor.scalers.record import ScalerRecord

RECORDS: tuple[ScalerRecord, ...] = (hpa.RECORD, keda.RECORD, knative.RECORD, kserve.RECORD, aibrix.RECORD, ray_serve.RECORD)
BY_ID: dict[str, ScalerRecord] = {r.id: r for r in RECORDS}


def record_for(group: str, kind: str) -> ScalerRecord | None:
    """The record that reads objects of that API group and kind; None for any other kind."""
    return next((r for r in RECORDS if r.reads(group, kind)), None)


def read_documents(docs: Iterable[Document]) -> ScalingView:
    """The scalers the documents declare; other kinds listed as skipped, a reader's failure as a
    problem (a bug reading one object must not lose the others)."""
    view = ScalingView()
    generated: dict[tuple[str | None, str], Scaler] = {}  # KEDA's HPAs, by their ScaledObject
    for doc in docs:
        record = record_for(doc.group, doc.kind)
        namespace, name = where(doc.obj)
        label = f"{doc.kind} {namespace + '/' if namespace else ''}{name} ({doc.source})"
        if record is None:
            view.skipped.append(label)
            continue
        try:
            scalers: list[Scaler] = record.read(doc.obj, doc.source)
        except Exception as exc:  # noqa: BLE001 - one unreadable object is a problem, not a crash
            view.problems.append(f"{label}: could not be read: {type(exc).__name__}: {exc}")
            continue
        view.scalers += scalers
        if not scalers:
            view.skipped.append(f"{label}: declares no autoscaling")
        elif record is hpa.RECORD and (owner := keda.generated_by(doc.obj)) is not None:
            generated[owner] = scalers[0]
    view.scalers, folded = keda.fold_generated(view.scalers, generated)
    view.skipped += folded
    return view


__all__ = ["BY_ID", "RECORDS", "ScalerRecord", "read_documents", "record_for"]
