"""KServe's ``InferenceService`` (``serving.kserve.io/v1beta1``): the predictor's replica bounds,
``scaleMetric``/``scaleTarget`` or ``autoScaling.metrics``, and the annotations that pick the
deployment mode and the autoscaler.

Defaults the rules lean on (kserve/website, "Autoscaling"): ``minReplicas`` 1 (0 asks for scale to
zero); in the default Serverless mode Knative scales it (its annotations on the InferenceService
pass through, so ``doctor.scalers.knative`` reads them); in ``RawDeployment`` (``Standard``) mode
an HPA does, on CPU at 80 % unless ``scaleMetric`` says otherwise, and
``serving.kserve.io/autoscalerClass: keda`` generates a ScaledObject from ``autoScaling.metrics``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from doctor.foundation.wire import dig, items, mapping
from doctor.scalers.fields import batch_limit, knob, status_of, uses_gpu, where
from doctor.scalers.knative import bounds_and_signal
from doctor.scalers.model import Knob, Scaler, Signal, SignalSource
from doctor.scalers.record import ScalerRecord

RAW_MODES = frozenset({"RawDeployment", "Standard"})


def _metric(spec: Mapping[str, Any], path: str) -> Signal:
    kind = str(spec.get("type") or "")
    if kind == "Resource":
        name = dig(spec, "resource", "name")
        target = mapping(spec, "resource", "target")
        field = "averageUtilization" if "averageUtilization" in target else "averageValue" if "averageValue" in target else "value"
        return Signal(path, SignalSource.RESOURCE, name if isinstance(name, str) else None, f"{path}.resource.name",
                      target=knob(target, field, at=f"{path}.resource.target.{field}"),
                      target_type=str(target.get("type") or "Utilization"), trigger=kind)
    section = "external" if kind == "External" else "podmetric" if kind == "PodMetric" else kind.lower()
    metric = mapping(spec, section, "metric")
    target = mapping(spec, section, "target")
    field = "averageValue" if "averageValue" in target else "value"
    query = metric.get("query")
    return Signal(path, SignalSource.PROMETHEUS if query else SignalSource.EXTERNAL,
                  query=query if isinstance(query, str) else None, metric_path=f"{path}.{section}.metric.query",
                  target=knob(target, field, at=f"{path}.{section}.target.{field}"),
                  target_type=str(target.get("type") or "Value"), trigger=kind or None)


def read(obj: Mapping[str, Any], source: str) -> list[Scaler]:
    """An InferenceService's predictor as a ``Scaler``."""
    namespace, name = where(obj)
    annotations = mapping(obj, "metadata", "annotations")
    predictor = mapping(obj, "spec", "predictor")
    at = "spec.predictor"
    mode = str(annotations.get("serving.kserve.io/deploymentMode") or "Serverless")
    autoscaler = str(annotations.get("serving.kserve.io/autoscalerClass") or "hpa")
    gpu = uses_gpu(predictor) or uses_gpu({"containers": [mapping(predictor, "model"), *items(predictor, "containers")]})
    fields: dict[str, Any]
    if mode in RAW_MODES or autoscaler == "keda":
        metrics = [m for m in items(predictor, "autoScaling", "metrics") if isinstance(m, Mapping)]
        if metrics:
            signals = tuple(_metric(m, f"{at}.autoScaling.metrics[{i}]") for i, m in enumerate(metrics))
        else:
            scale_metric = knob(predictor, "scaleMetric", "cpu", at=f"{at}.scaleMetric")
            metric = str(scale_metric.value)
            signals = (Signal(at, SignalSource.RESOURCE if metric in ("cpu", "memory") else SignalSource.CONCURRENCY, metric,
                              scale_metric.path, target=knob(predictor, "scaleTarget", 80, at=f"{at}.scaleTarget"),
                              target_type="Utilization" if metric in ("cpu", "memory") else "AverageValue", trigger="scaleMetric"),)
        fields = {"signals": signals, "scale_down_s": Knob("(the generated HPA's behavior)", 300, explicit=False)}
    else:
        concurrency = knob(predictor, "containerConcurrency", 0, at=f"{at}.containerConcurrency")
        fields = bounds_and_signal(annotations, "metadata.annotations", concurrency)
        if "scaleMetric" in predictor or "scaleTarget" in predictor:
            metric = str(predictor.get("scaleMetric") or "concurrency")
            fields["signals"] = (Signal(at, SignalSource.RESOURCE if metric in ("cpu", "memory") else SignalSource.CONCURRENCY,
                                        metric, f"{at}.scaleMetric", target=knob(predictor, "scaleTarget", 100, at=f"{at}.scaleTarget"),
                                        target_type="AverageValue", trigger="scaleMetric"),)
    fields["floor"] = knob(predictor, "minReplicas", 1, at=f"{at}.minReplicas")
    fields["ceiling"] = knob(predictor, "maxReplicas", at=f"{at}.maxReplicas")
    return [Scaler(kind="InferenceService", name=name, namespace=namespace, product=RECORD.id, source=source,
                   api_version=str(obj.get("apiVersion") or ""), target=f"InferenceService/{name}",
                   serves="gpu" if gpu else None, status=status_of(obj),
                   batch_limit=batch_limit({"containers": [mapping(predictor, "model"), *items(predictor, "containers")]}, at),
                   notes=(f"deployment mode {mode}, autoscaler {autoscaler}",),
                   **fields)]


RECORD = ScalerRecord(
    id="kserve",
    display="KServe",
    kinds=(("serving.kserve.io", "InferenceService"),),
    read=read,
    queue_signal=('serving.kserve.io/autoscalerClass: keda with spec.predictor.autoScaling.metrics: type External, '
                  'query sum({metric}{{...}}), target.type AverageValue, averageValue "{target}"'),
    resources=(("serving.kserve.io", "inferenceservices", "v1beta1"),),
    owner_labels=(("serving.kserve.io/inferenceservice", "serving.kserve.io", "InferenceService"),),
    defaults={"minReplicas": "1", "Serverless": "Knative's defaults", "RawDeployment scaleMetric": "cpu at 80 %"},
    docs="https://kserve.github.io/website/docs/model-serving/generative-inference/autoscaling/",
)
