"""KEDA: the ``ScaledObject`` (``keda.sh/v1alpha1``) and the HTTP add-on's ``HTTPScaledObject``
(``http.keda.sh/v1alpha1``).

Defaults the rules lean on (KEDA 2.18's ScaledObject spec and Prometheus scaler pages):
``minReplicaCount`` **0** (left out, the workload scales to zero), ``maxReplicaCount`` 100,
``pollingInterval`` 30 s, ``cooldownPeriod`` 300 s (only for the last replica, to zero), the HPA
KEDA generates scales down after ``advanced.horizontalPodAutoscalerConfig.behavior.scaleDown
.stabilizationWindowSeconds`` (300 s); a trigger's ``metricType`` is ``AverageValue`` (the
query's result divided by the replicas) except for cpu/memory (``Utilization``); a prometheus
trigger's ``ignoreNullValues`` is ``true``: an empty result is 0, and raises no error, so a
``fallback`` (which answers scaler errors) does not apply. The HTTP add-on: ``replicas.min`` 0,
``scaledownPeriod`` 300 s, a concurrency or request-rate target of 100.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from doctor.foundation.wire import items, mapping
from doctor.scalers.fields import knob, status_of, target_of, where
from doctor.scalers.hpa import SYNC_S, behavior_window
from doctor.scalers.model import Knob, Scaler, ScalerStatus, Signal, SignalSource
from doctor.scalers.record import ScalerRecord


def trigger_signal(trigger: Mapping[str, Any], path: str) -> Signal:
    """One entry of ``spec.triggers``."""
    kind = str(trigger.get("type") or "")
    meta = mapping(trigger, "metadata")
    at = f"{path}.metadata"
    if kind in ("cpu", "memory"):
        return Signal(path, SignalSource.RESOURCE, kind, f"{path}.type", target=knob(meta, "value", at=f"{at}.value"),
                      target_type=str(trigger.get("metricType") or "Utilization"), trigger=kind)
    if kind == "prometheus":
        query = meta.get("query")
        return Signal(path, SignalSource.PROMETHEUS, query=query if isinstance(query, str) else None,
                      metric_path=f"{at}.query", target=knob(meta, "threshold", at=f"{at}.threshold"),
                      target_type=str(trigger.get("metricType") or "AverageValue"),
                      null_as_zero=knob(meta, "ignoreNullValues", "true", at=f"{at}.ignoreNullValues"), trigger=kind)
    return Signal(path, SignalSource.OTHER, trigger=kind or None, target_type=str(trigger.get("metricType") or "") or None)


def read_scaled_object(obj: Mapping[str, Any], source: str) -> list[Scaler]:
    """A ScaledObject: its bounds, triggers, windows, fallback and status (triggers' health)."""
    namespace, name = where(obj)
    spec = mapping(obj, "spec")
    behavior = mapping(spec, "advanced", "horizontalPodAutoscalerConfig", "behavior")
    behavior_path = "spec.advanced.horizontalPodAutoscalerConfig.behavior"
    status = status_of(obj)
    if status is not None:
        failing = tuple(str(k) for k, v in mapping(obj, "status", "health").items()
                        if isinstance(v, Mapping) and str(v.get("status", "")).lower() == "failing")
        status = ScalerStatus(conditions=status.conditions, failing=failing)
    return [Scaler(kind="ScaledObject", name=name, namespace=namespace, product=RECORD.id, source=source,
                   api_version=str(obj.get("apiVersion") or ""), target=target_of(spec.get("scaleTargetRef")),
                   floor=knob(spec, "minReplicaCount", 0, at="spec.minReplicaCount"),
                   ceiling=knob(spec, "maxReplicaCount", 100, at="spec.maxReplicaCount"),
                   signals=tuple(trigger_signal(t, f"spec.triggers[{i}]") for i, t in enumerate(items(spec, "triggers"))
                                 if isinstance(t, Mapping)),
                   scale_down_s=behavior_window(behavior, "scaleDown", 300, behavior_path),
                   scale_up_s=behavior_window(behavior, "scaleUp", 0, behavior_path),
                   polling_s=Knob("spec.pollingInterval", (knob(spec, "pollingInterval", 30).number() or 30) + SYNC_S,
                                  explicit="pollingInterval" in spec),
                   fallback=knob(spec, "fallback", at="spec.fallback"), status=status)]


def read_http_scaled_object(obj: Mapping[str, Any], source: str) -> list[Scaler]:
    """The HTTP add-on's HTTPScaledObject: replica bounds, its concurrency or request-rate target."""
    namespace, name = where(obj)
    spec = mapping(obj, "spec")
    metric = mapping(spec, "scalingMetric")
    if metric:
        which = "concurrency" if "concurrency" in metric else "requestRate"
        signal = Signal("spec.scalingMetric", SignalSource.CONCURRENCY if which == "concurrency" else SignalSource.RPS,
                        which, f"spec.scalingMetric.{which}",
                        target=knob(metric, f"{which}.targetValue", 100, at=f"spec.scalingMetric.{which}.targetValue"),
                        target_type="AverageValue", trigger=which)
    else:  # before the add-on's v0.8: pending requests
        signal = Signal("spec", SignalSource.CONCURRENCY, "pending requests", "spec.targetPendingRequests",
                        target=knob(spec, "targetPendingRequests", 100, at="spec.targetPendingRequests"), target_type="AverageValue", trigger="targetPendingRequests")
    return [Scaler(kind="HTTPScaledObject", name=name, namespace=namespace, product=RECORD.id, source=source,
                   api_version=str(obj.get("apiVersion") or ""),
                   target=target_of(spec.get("scaleTargetRef")),
                   floor=knob(spec, "replicas.min", 0, at="spec.replicas.min"), ceiling=knob(spec, "replicas.max", 100, at="spec.replicas.max"), signals=(signal,),
                   scale_down_s=knob(spec, "scaledownPeriod", 300, at="spec.scaledownPeriod"), status=status_of(obj))]


def generated_by(obj: Mapping[str, Any]) -> tuple[str | None, str] | None:
    """(namespace, name) of the ScaledObject that owns an HPA KEDA generated; None for any other HPA."""
    for owner in items(obj, "metadata", "ownerReferences"):
        if (isinstance(owner, Mapping) and owner.get("kind") == "ScaledObject"
                and str(owner.get("apiVersion") or "").startswith("keda.sh/") and isinstance(owner.get("name"), str)):
            return where(obj)[0], owner["name"]
    return None


def fold_generated(scalers: list[Scaler], generated: Mapping[tuple[str | None, str], Scaler]) -> tuple[list[Scaler], list[str]]:
    """The scalers with each ScaledObject given its generated HPA's status, and that HPA left out
    (said in the second list, for ``skipped``).

    Why one object: the HPA is KEDA's translation of the ScaledObject (its metrics are the
    triggers as external metrics, its bounds the ScaledObject's), so judging both would report
    each fault twice, and on the HPA at fields KEDA overwrites; but only the HPA's status holds the
    replicas the controller wants and whether the ceiling limits it (``ScalingLimited``). An HPA
    whose ScaledObject was not read (a refused list) stays an HPA: its status is still evidence."""
    folded: list[str] = []
    drop: set[int] = set()
    out: list[Scaler] = []
    for scaler in scalers:
        hpa = generated.get((scaler.namespace, scaler.name)) if scaler.kind == "ScaledObject" else None
        if hpa is None or hpa.status is None:
            out.append(scaler)
            continue
        own = scaler.status or ScalerStatus()
        kinds = {c.type for c in own.conditions}
        status = dataclasses.replace(hpa.status, conditions=own.conditions + tuple(c for c in hpa.status.conditions if c.type not in kinds),
                                     failing=own.failing)
        out.append(dataclasses.replace(scaler, status=status, notes=(*scaler.notes, f"replicas and conditions from its generated {hpa.label}")))
        drop.add(id(hpa))
        folded.append(f"{hpa.label} ({hpa.source}): generated by {scaler.label}, read as its status")
    return [s for s in out if id(s) not in drop], folded


def read(obj: Mapping[str, Any], source: str) -> list[Scaler]:
    """A ScaledObject or an HTTPScaledObject as a ``Scaler``."""
    if obj.get("kind") == "HTTPScaledObject":
        return read_http_scaled_object(obj, source)
    return read_scaled_object(obj, source)


RECORD = ScalerRecord(
    id="keda",
    display="KEDA",
    kinds=(("keda.sh", "ScaledObject"), ("http.keda.sh", "HTTPScaledObject")),
    read=read,
    queue_signal=('a prometheus trigger, query sum({metric}{{...}}), metricType AverageValue, threshold "{target}", '
                  'ignoreNullValues "false"'),
    resources=(("keda.sh", "scaledobjects", "v1alpha1"), ("http.keda.sh", "httpscaledobjects", "v1alpha1")),
    defaults={"minReplicaCount": "0", "maxReplicaCount": "100", "pollingInterval": "30", "cooldownPeriod": "300 (to zero only)",
              "prometheus ignoreNullValues": "true (an empty result is 0)", "trigger metricType": "AverageValue",
              "HTTPScaledObject replicas.min": "0"},
    docs="https://keda.sh/docs/2.18/reference/scaledobject-spec/",
)
