"""Kubernetes' HorizontalPodAutoscaler, ``autoscaling/v2`` (and ``v2beta2``, ``v2beta1``, ``v1``).

Defaults the rules lean on (Kubernetes API reference): ``minReplicas`` 1 (0 only behind the
``HPAScaleToZero`` feature gate), ``behavior.scaleDown.stabilizationWindowSeconds`` 300,
``scaleUp`` 0; ``v1`` without ``targetCPUUtilizationPercentage`` scales on CPU at 80 %. The
metric types: ``Resource``/``ContainerResource`` (CPU, memory), ``Pods`` and ``Object`` (custom
metrics through an adapter) and ``External``; targets ``Utilization``, ``AverageValue`` (per
replica) or ``Value`` (the whole, against which the controller multiplies the replicas).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from doctor.foundation.wire import dig, items, mapping
from doctor.scalers.fields import knob, status_of, target_of, where
from doctor.scalers.model import Knob, Scaler, Signal, SignalSource, metric_name
from doctor.scalers.record import ScalerRecord

#: The controller's sync period (``--horizontal-pod-autoscaler-sync-period``, default 15 s).
SYNC_S = 15.0

_SOURCES = {"Resource": SignalSource.RESOURCE, "ContainerResource": SignalSource.RESOURCE, "Pods": SignalSource.PODS,
            "Object": SignalSource.OBJECT, "External": SignalSource.EXTERNAL}


def metric_signal(spec: Mapping[str, Any], path: str) -> Signal:
    """One entry of ``spec.metrics`` (v2, v2beta2 or v2beta1 spelling) at ``path``."""
    kind = str(spec.get("type") or "")
    section_name = kind[:1].lower() + kind[1:]
    section = mapping(spec, section_name)
    at = f"{path}.{section_name}"
    if kind in ("Resource", "ContainerResource"):
        metric, metric_path = section.get("name"), f"{at}.name"
    else:  # v2: <type>.metric.name; v2beta1: <type>.metricName
        metric = dig(section, "metric", "name") or section.get("metricName")
        metric_path = f"{at}.metric.name" if dig(section, "metric", "name") else f"{at}.metricName"
    target = mapping(section, "target")
    if target:
        target_type = str(target.get("type") or "")
        field = {"Utilization": "averageUtilization", "AverageValue": "averageValue", "Value": "value"}.get(target_type, "value")
        number = knob(target, field, at=f"{at}.target.{field}")
    else:  # v2beta1
        found = next(((f, t) for f, t in (("targetAverageUtilization", "Utilization"), ("targetAverageValue", "AverageValue"),
                                          ("targetValue", "Value")) if f in section), None)
        target_type = found[1] if found else ""
        number = knob(section, found[0], at=f"{at}.{found[0]}") if found else Knob(f"{at}.target", None, explicit=False)
    name, metric_kind = metric_name(metric) if isinstance(metric, str) else (None, None)
    return Signal(path=path, source=_SOURCES.get(kind, SignalSource.OTHER), metric=name, metric_path=metric_path,
                  target=number, target_type=target_type or None, trigger=kind or None, metric_kind=metric_kind)


def behavior_window(behavior: Any, direction: str, default: float, path: str) -> Knob:
    """``behavior.<direction>.stabilizationWindowSeconds`` at ``path``."""
    return knob(behavior, f"{direction}.stabilizationWindowSeconds", default,
                at=f"{path}.{direction}.stabilizationWindowSeconds")


def read(obj: Mapping[str, Any], source: str) -> list[Scaler]:
    """One HPA as a ``Scaler``."""
    namespace, name = where(obj)
    spec = mapping(obj, "spec")
    api_version = str(obj.get("apiVersion") or "")
    if api_version.endswith("/v1"):
        cpu = knob(spec, "targetCPUUtilizationPercentage", 80, at="spec.targetCPUUtilizationPercentage")
        signals: tuple[Signal, ...] = (Signal("spec", SignalSource.RESOURCE, "cpu", "spec.targetCPUUtilizationPercentage",
                                              target=cpu, target_type="Utilization", trigger="targetCPUUtilizationPercentage"),)
    else:
        signals = tuple(metric_signal(m, f"spec.metrics[{i}]") for i, m in enumerate(items(spec, "metrics"))
                        if isinstance(m, Mapping))
        if not items(spec, "metrics"):  # v2 without metrics: the API server defaults to CPU at 80 %
            signals = (Signal("spec.metrics", SignalSource.RESOURCE, "cpu", "spec.metrics",
                              target=Knob("spec.metrics", 80, explicit=False), target_type="Utilization", trigger="Resource"),)
    behavior = mapping(spec, "behavior")
    status = status_of(obj)
    if status is not None:
        current = tuple((str(dig(m, "type") or ""), _current_value(m)) for m in items(obj, "status", "currentMetrics")
                        if isinstance(m, Mapping))
        status = dataclasses.replace(status, current_metrics=current)
    return [Scaler(kind="HorizontalPodAutoscaler", name=name, namespace=namespace, product=RECORD.id, source=source,
                   api_version=api_version, target=target_of(spec.get("scaleTargetRef")),
                   floor=knob(spec, "minReplicas", 1, at="spec.minReplicas"), ceiling=knob(spec, "maxReplicas", at="spec.maxReplicas"),
                   signals=signals, scale_down_s=behavior_window(behavior, "scaleDown", 300, "spec.behavior"),
                   scale_up_s=behavior_window(behavior, "scaleUp", 0, "spec.behavior"),
                   polling_s=Knob("(controller sync period)", SYNC_S, explicit=False), status=status)]


def _current_value(metric: Mapping[str, Any]) -> str:
    for section in metric.values():
        if isinstance(section, Mapping):
            name = section.get("name") or dig(section, "metric", "name") or ""
            current = mapping(section, "current")
            value = current.get("averageValue") or current.get("averageUtilization") or current.get("value")
            return f"{name}={value}"
    return ""


RECORD = ScalerRecord(
    id="hpa",
    display="Kubernetes HorizontalPodAutoscaler",
    kinds=(("autoscaling", "HorizontalPodAutoscaler"),),
    read=read,
    queue_signal=("a Pods metric {metric} (exposed through prometheus-adapter) with target.type AverageValue, "
                  "averageValue {target}"),
    resources=(("autoscaling", "horizontalpodautoscalers", "v2"),),
    defaults={"minReplicas": "1", "behavior.scaleDown.stabilizationWindowSeconds": "300",
              "autoscaling/v1 targetCPUUtilizationPercentage": "80"},
    docs="https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/horizontal-pod-autoscaler-v2/",
)
