"""AIBrix's ``PodAutoscaler`` (``autoscaling.aibrix.ai/v1alpha1``): a scaling strategy (HPA, KPA,
APA) over metrics it reads from the engine's pods or a domain.

Defaults the rules lean on (vllm-project/aibrix, docs "metric-based autoscaling"): ``minReplicas``
1, a scale-down cooldown of 300 s (annotation ``autoscaling.aibrix.ai/scale-down-cooldown-window``,
also spelled ``scale-down-delay``); each ``metricsSources[]`` names a ``targetMetric`` (an engine
metric such as ``kv_cache_usage_perc`` or ``vllm:num_requests_waiting``) and a ``targetValue``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from doctor.foundation.wire import items, mapping
from doctor.scalers.fields import annotation, knob, status_of, target_of, where
from doctor.scalers.model import Scaler, Signal, SignalSource
from doctor.scalers.record import ScalerRecord

#: The scale-down delay's annotation, as AIBrix's releases and samples spell it (``kpa.`` and ``apa.``
#: prefixes in the samples of the KPA and APA strategies).
_COOLDOWN = ("autoscaling.aibrix.ai/scale-down-cooldown-window", "autoscaling.aibrix.ai/scale-down-delay")
_SOURCES = {"resource": SignalSource.RESOURCE, "pod": SignalSource.ENGINE, "domain": SignalSource.EXTERNAL,
            "custom": SignalSource.ENGINE, "external": SignalSource.EXTERNAL}


def _source(spec: Mapping[str, Any], path: str) -> Signal:
    metric = spec.get("targetMetric")
    kind = str(spec.get("metricSourceType") or "pod").lower()
    name = metric if isinstance(metric, str) else None
    source = SignalSource.RESOURCE if name in ("cpu", "memory") else _SOURCES.get(kind, SignalSource.OTHER)
    return Signal(path, source, name, f"{path}.targetMetric", target=knob(spec, "targetValue", at=f"{path}.targetValue"),
                  target_type="AverageValue", trigger=kind)


def read(obj: Mapping[str, Any], source: str) -> list[Scaler]:
    """A PodAutoscaler as a ``Scaler``."""
    namespace, name = where(obj)
    spec = mapping(obj, "spec")
    annotations = mapping(obj, "metadata", "annotations")
    sources = [s for s in items(spec, "metricsSources") if isinstance(s, Mapping)]
    signals = tuple(_source(s, f"spec.metricsSources[{i}]") for i, s in enumerate(sources))
    if not signals and "targetMetric" in spec:  # the first releases' flat form
        signals = (_source(spec, "spec"),)
    key = next((k for k in annotations if isinstance(k, str) and k.endswith(_COOLDOWN)), _COOLDOWN[0])
    return [Scaler(kind="PodAutoscaler", name=name, namespace=namespace, product=RECORD.id, source=source,
                   api_version=str(obj.get("apiVersion") or ""), target=target_of(spec.get("scaleTargetRef")),
                   floor=knob(spec, "minReplicas", 1, at="spec.minReplicas"), ceiling=knob(spec, "maxReplicas", at="spec.maxReplicas"), signals=signals,
                   scale_down_s=annotation(annotations, key, "metadata.annotations", "300s"),
                   status=status_of(obj, current="actualScale", desired="desiredScale"),
                   notes=(f"strategy {spec.get('scalingStrategy') or 'unset'}",))]


RECORD = ScalerRecord(
    id="aibrix",
    display="AIBrix",
    kinds=(("autoscaling.aibrix.ai", "PodAutoscaler"),),
    read=read,
    queue_signal="a metricsSources entry with targetMetric {metric} and targetValue \"{target}\"",
    resources=(("autoscaling.aibrix.ai", "podautoscalers", "v1alpha1"),),
    defaults={"minReplicas": "1", "scale-down cooldown": "300s"},
    docs="https://aibrix.readthedocs.io/latest/features/autoscaling/metric-based-autoscaling.html",
)

