"""Ray Serve: each deployment's ``autoscaling_config`` in a Serve config file (``applications:``),
or in a KubeRay ``RayService`` (``ray.io/v1``), whose ``spec.serveConfigV2`` holds that file as text.

Defaults the rules lean on (Ray's ``AutoscalingConfig``): ``min_replicas`` 1, ``max_replicas`` 1,
``target_ongoing_requests`` 2 (``target_num_ongoing_requests_per_replica`` before Ray 2.32),
``upscale_delay_s`` 30, ``downscale_delay_s`` 600. Ray scales on requests in flight per replica.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from doctor.foundation.wire import dig, items, mapping
from doctor.scalers.fields import knob, where
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


def _llm_config(llm: Mapping[str, Any], path: str, name: str, namespace: str | None, source: str, kind: str) -> Scaler | None:
    """A Ray Serve LLM config (``args.llm_configs[]``): its ``deployment_config`` is the deployment's,
    its ``engine_kwargs`` the vLLM engine's (``max_num_seqs``), and it serves on an accelerator."""
    model = dig(llm, "model_loading_config", "model_id")
    deployment = {**mapping(llm, "deployment_config"), "name": model if isinstance(model, str) else "llm"}
    scaler = _deployment(deployment, f"{path}.deployment_config", name, namespace, source, kind)
    if scaler is None:
        return None
    limit = knob(llm, "engine_kwargs.max_num_seqs", at=f"{path}.engine_kwargs.max_num_seqs")
    return dataclasses.replace(scaler, serves="gpu" if llm.get("accelerator_type") else scaler.serves,
                               batch_limit=limit if limit.explicit else None)


def read_config(config: Mapping[str, Any], source: str, name: str, namespace: str | None, kind: str, at: str) -> list[Scaler]:
    """Every autoscaled deployment of a Serve config (``at``: its path in the object): its
    ``deployments`` and its Ray Serve LLM ``llm_configs``."""
    found: list[Scaler | None] = []
    for i, app in enumerate(items(config, "applications")):
        found += [_deployment(d, f"{at}applications[{i}].deployments[{j}]", name, namespace, source, kind)
                  for j, d in enumerate(items(app, "deployments")) if isinstance(d, Mapping)]
        found += [_llm_config(c, f"{at}applications[{i}].args.llm_configs[{j}]", name, namespace, source, kind)
                  for j, c in enumerate(items(app, "args", "llm_configs")) if isinstance(c, Mapping)]
    return [s for s in found if s is not None]


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
