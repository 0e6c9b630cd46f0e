"""Knative Serving: a ``Service`` (``serving.knative.dev/v1``) scaled by the annotations of its
revision template, and the ``Revision``/``Configuration`` that carry the same template.

Defaults the rules lean on (knative.dev, "Configuring scale bounds", "KPA-specific"): the Knative
Pod Autoscaler scales on ``concurrency`` with a ``target`` of 100 in flight per replica;
``min-scale`` 0, so a revision with no traffic goes to zero; ``containerConcurrency`` 0 (no
limit: the activator does not hold requests back); a replica goes after the stable ``window``
(60 s) plus ``scale-down-delay`` (0 s); ``metric: cpu``/``memory`` needs the HPA class.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from doctor.foundation.wire import dig, mapping
from doctor.scalers.fields import annotation, batch_limit, knob, status_of, uses_gpu, where
from doctor.scalers.model import Knob, Scaler, Signal, SignalSource, seconds
from doctor.scalers.record import ScalerRecord

PREFIX = "autoscaling.knative.dev/"
STABLE_WINDOW_S = 60.0


def bounds_and_signal(annotations: Mapping[str, Any], at: str, concurrency: Knob) -> dict[str, Any]:
    """The scaler fields Knative's annotations declare (also on a KServe InferenceService, which
    passes them to its Knative revision): floor, ceiling, signal and scale-down time."""

    def read(key: str, default: Any = None) -> Knob:
        return annotation(annotations, PREFIX + key, at, default)

    floor = read("min-scale") if PREFIX + "min-scale" in annotations else read("minScale", 0)
    ceiling = read("max-scale") if PREFIX + "max-scale" in annotations else read("maxScale", 0)
    metric = read("metric", "concurrency")
    name = str(metric.value)
    source = {"concurrency": SignalSource.CONCURRENCY, "rps": SignalSource.RPS}.get(name, SignalSource.RESOURCE)
    target = read("target", {"concurrency": 100, "rps": 200}.get(name, 80))
    if name == "concurrency" and not target.explicit and concurrency.known and (concurrency.number() or 0) > 0:
        target = concurrency  # a hard limit and no target: the KPA aims at 70 % of the limit
    window = read("window", "60s")
    delay = read("scale-down-delay", "0s")
    down_s = (seconds(window.value) or STABLE_WINDOW_S) + (seconds(delay.value) or 0.0)
    return {"floor": floor, "ceiling": ceiling,
            "signals": (Signal(at, source, name, metric.path, target=target,
                               target_type="Utilization" if source == SignalSource.RESOURCE else "AverageValue",
                               trigger=f"{PREFIX}metric"),),
            "scale_down_s": Knob(delay.path, down_s, explicit=delay.explicit, placeholder=delay.placeholder,
                                 shown=f"{delay.value} + the {window.value} stable window")}


def read(obj: Mapping[str, Any], source: str) -> list[Scaler]:
    """A Knative Service, Configuration or Revision as a ``Scaler``."""
    namespace, name = where(obj)
    kind = str(obj.get("kind") or "")
    template = mapping(obj, "spec", "template") if kind != "Revision" else obj
    template_path = "spec.template" if kind != "Revision" else ""
    annotations = mapping(template, "metadata", "annotations")
    prefix = f"{template_path}." if template_path else ""
    concurrency = knob(template, "spec.containerConcurrency", 0, at=f"{prefix}spec.containerConcurrency")
    fields = bounds_and_signal(annotations, f"{prefix}metadata.annotations", concurrency)
    return [Scaler(kind=kind, name=name, namespace=namespace, product=RECORD.id, source=source,
                   api_version=str(obj.get("apiVersion") or ""), target=f"{kind}/{name}",
                   serves="gpu" if uses_gpu(dig(template, "spec")) else None, status=status_of(obj),
                   batch_limit=batch_limit(dig(template, "spec"), f"{prefix}spec"), **fields)]


RECORD = ScalerRecord(
    id="knative",
    display="Knative Serving",
    kinds=(("serving.knative.dev", "Service"), ("serving.knative.dev", "Configuration"), ("serving.knative.dev", "Revision")),
    read=read,
    queue_signal=("KEDA on {metric} (Knative's own autoscaler reads only concurrency and rps): or "
                  "autoscaling.knative.dev/target at most the engine's batch limit with containerConcurrency at it"),
    resources=(("serving.knative.dev", "services", "v1"),),
    owner_labels=tuple((f"serving.knative.dev/{kind.lower()}", "serving.knative.dev", kind)
                       for kind in ("Service", "Configuration", "Revision")),
    defaults={"min-scale": "0 (scale to zero)", "metric": "concurrency", "target": "100", "window": "60s",
              "scale-down-delay": "0s", "containerConcurrency": "0 (no limit)"},
    docs="https://knative.dev/docs/serving/autoscaling/",
)
