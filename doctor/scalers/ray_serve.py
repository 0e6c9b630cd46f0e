"""Ray Serve: each deployment's ``autoscaling_config`` in a Serve config file (``applications:``),
or in a KubeRay ``RayService`` (``ray.io/v1``), whose ``spec.serveConfigV2`` holds that file as text.

Defaults the rules lean on (Ray's ``AutoscalingConfig``): ``min_replicas`` 1, ``max_replicas`` 1,
``target_ongoing_requests`` 2 (``target_num_ongoing_requests_per_replica`` before Ray 2.32),
``upscale_delay_s`` 30, ``downscale_delay_s`` 600. Ray scales on requests in flight per replica.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from doctor.scalers.fields import dig, items, knob, mapping, where
from doctor.scalers.manifests import yaml_mapping
from doctor.scalers.model import Scaler, Signal, SignalSource
from doctor.scalers.record import ScalerRecord

#: The pseudo-kind a Serve config file (no ``kind`` of its own) is read under.
SERVE_CONFIG = "RayServeConfig"
_TARGETS = ("target_ongoing_requests", "target_num_ongoing_requests_per_replica")


def _deployment(deployment: Mapping[str, Any], path: str, name: str, namespace: str | None, source: str,
                kind: str) -> Scaler | None:
    config = mapping(deployment, "autoscaling_config")
    if not config:
        return None
    at = f"{path}.autoscaling_config"
    key = next((k for k in _TARGETS if k in config), _TARGETS[0])
    gpus = dig(deployment, "ray_actor_options", "num_gpus")
    return Scaler(kind=kind, name=f"{name}/{deployment.get('name') or '?'}", namespace=namespace, product=RECORD.id,
                  source=source, target=f"deployment/{deployment.get('name') or '?'}",
                  floor=knob(config, "min_replicas", 1, at=f"{at}.min_replicas"),
                  ceiling=knob(config, "max_replicas", 1, at=f"{at}.max_replicas"),
                  signals=(Signal(at, SignalSource.CONCURRENCY, "ongoing requests", f"{at}.{key}",
                                  target=knob(config, key, 2, at=f"{at}.{key}"), target_type="AverageValue", trigger=key),),
                  scale_down_s=knob(config, "downscale_delay_s", 600, at=f"{at}.downscale_delay_s"),
                  scale_up_s=knob(config, "upscale_delay_s", 30, at=f"{at}.upscale_delay_s"),
                  serves="gpu" if isinstance(gpus, int | float) and gpus > 0 else None)


def read_config(config: Mapping[str, Any], source: str, name: str, namespace: str | None, kind: str, at: str) -> list[Scaler]:
    """Every autoscaled deployment of a Serve config (``at``: its path in the object)."""
    found: list[Scaler] = []
    for i, app in enumerate(items(config, "applications")):
        for j, deployment in enumerate(items(app, "deployments")):
            if isinstance(deployment, Mapping):
                scaler = _deployment(deployment, f"{at}applications[{i}].deployments[{j}]", name, namespace, source, kind)
                if scaler is not None:
                    found.append(scaler)
    return found


def read(obj: Mapping[str, Any], source: str) -> list[Scaler]:
    """A Serve config or a RayService as the ``Scaler`` of each autoscaled deployment."""
    if obj.get("kind") == "RayService":
        namespace, name = where(obj)
        text = dig(obj, "spec", "serveConfigV2")
        config = yaml_mapping(text, f"{source} spec.serveConfigV2") if isinstance(text, str) else None
        return read_config(config or {}, source, name, namespace, "RayService", "spec.serveConfigV2: ")
    return read_config(obj, source, "serve-config", None, SERVE_CONFIG, "")


RECORD = ScalerRecord(
    id="ray-serve",
    display="Ray Serve",
    kinds=(("", SERVE_CONFIG), ("ray.io", "RayService")),
    read=read,
    queue_signal="target_ongoing_requests at most the engine's batch limit (Ray reads requests in flight per replica)",
    resources=(("ray.io", "rayservices", "v1"),),
    defaults={"min_replicas": "1", "target_ongoing_requests": "2", "downscale_delay_s": "600", "upscale_delay_s": "30"},
    docs="https://docs.ray.io/en/latest/serve/advanced-guides/advanced-autoscaling.html",
)
