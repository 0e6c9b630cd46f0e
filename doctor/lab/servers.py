"""Start and stop a lab engine and gateway from a JSON-able spec, in whichever process calls.

``start_lab`` (``doctor.lab.scenarios``) calls these in-process or through the child process of
``doctor.lab.serve``; both sides import this leaf, so neither imports the other.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from doctor.lab.engine import BackgroundLoad, LabEngine
from doctor.lab.gateway import GatewayConfig, LabGateway
from doctor.lab.scheduler import EngineConfig


def servers_spec(engine: EngineConfig, gateway: GatewayConfig, background: BackgroundLoad | None) -> str:
    return json.dumps(
        {
            "engine": dataclasses.asdict(engine),
            "gateway": dataclasses.asdict(gateway),
            "background": dataclasses.asdict(background) if background else None,
        }
    )


def start_servers(spec: dict[str, Any], workdir: Path) -> tuple[LabEngine, LabGateway]:
    """Start engine (log in ``workdir/vllm.log``) then gateway; both stopped by the caller."""
    background = BackgroundLoad(**spec["background"]) if spec.get("background") else None
    engine = LabEngine(EngineConfig(**spec["engine"]), log_path=workdir / "vllm.log")
    engine.start(background=background)
    gateway = LabGateway(engine.url, GatewayConfig(**spec["gateway"]))
    try:
        gateway.start()
    except BaseException:
        engine.stop()
        raise
    return engine, gateway


def stop_servers(engine: LabEngine, gateway: LabGateway) -> None:
    # The engine first: a gateway blocked in a synchronous upstream read is released by it.
    engine.stop()
    gateway.stop()
