"""Run a lab scenario's engine and gateway in this process until stdin closes.

``start_lab`` starts this module as a child process so that the lab's threads never compete
with the probe for the parent's GIL (the probe's event-loop lag would then be the lab's doing).
The scenario arrives as JSON on the command line; the child prints one JSON line with the URLs
once both servers listen, and shuts down when its stdin reaches end of file, which also happens
when the parent dies.

Also handy by hand: ``python -m doctor.lab.serve kv-pressure /tmp/lab`` prints the URLs and
serves until Ctrl-D.
"""

from __future__ import annotations

import dataclasses
import json
import sys
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


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        sys.stderr.write("usage: python -m doctor.lab.serve SCENARIO|SPEC_JSON WORKDIR\n")
        return 2
    what, workdir = argv
    if what.lstrip().startswith("{"):
        spec = json.loads(what)
    else:
        from doctor.lab.scenarios import get_scenario

        scenario = get_scenario(what)
        spec = json.loads(servers_spec(scenario.engine, scenario.gateway, scenario.background))
    Path(workdir).mkdir(parents=True, exist_ok=True)
    engine, gateway = start_servers(spec, Path(workdir))
    try:
        sys.stdout.write(json.dumps({"engine": engine.url, "gateway": gateway.url}) + "\n")
        sys.stdout.flush()
        sys.stdin.read()  # until the parent closes our stdin, or dies
    finally:
        stop_servers(engine, gateway)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
