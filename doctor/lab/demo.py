"""``llm-doctor demo``: the real ``diagnose`` path against the embedded engine and gateway.

Nothing here fakes a verdict: the demo starts a lab scenario on free ports, writes the
scenario's request body as a ``--payload`` file, and runs exactly what ``llm-doctor diagnose``
runs (collect -> bundle file -> analyze -> reports) with the lab's log as ``--log``.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from doctor.config import FileConfig
from doctor.exit_codes import ExitCode
from doctor.lab.scenarios import SCENARIOS, get_scenario, start_lab


def list_scenarios() -> str:
    width = max(len(n) for n in SCENARIOS)
    return "\n".join(
        f"{name:<{width}}  {s.expect.symptom:<15}  {s.description}" for name, s in SCENARIOS.items()
    ) + "\n"


#: The files a demo always writes, under ``--out-dir`` unless a flag names the file elsewhere.
DEFAULT_OUTPUTS = {"html": "report.html", "json": "report.json"}


def with_default_outputs(opts: dict[str, Any], out_dir: Path) -> dict[str, Any]:
    """``opts`` with each default report that no flag placed filled in under ``out_dir``.

    Each output on its own: ``--html x.html`` moves the page, and the JSON still goes to
    ``out_dir``, so ``--out-dir`` is never silently ignored.
    """
    return {**opts, **{key: out_dir / name for key, name in DEFAULT_OUTPUTS.items() if not opts.get(key)}}


def run_demo(
    scenario: str,
    out_dir: Path,
    opts: dict[str, Any],
    *,
    list_only: bool = False,
    progress: Callable[[str], None] = lambda _m: None,
) -> ExitCode:
    from doctor.cli import diagnose_config
    from doctor.errors import UsageError

    if list_only:
        sys.stdout.write(list_scenarios())
        return ExitCode.HEALTHY
    try:
        spec = get_scenario(scenario)
    except KeyError as exc:
        raise UsageError(str(exc.args[0])) from None
    out_dir.mkdir(parents=True, exist_ok=True)
    opts = with_default_outputs(opts, out_dir)
    progress(f"scenario {spec.name}: {spec.description}")
    with tempfile.TemporaryDirectory(prefix="llm-doctor-demo-") as tmp, start_lab(spec, tmp) as lab:
        payload = Path(tmp) / "payload.json"
        payload.write_text(json.dumps(spec.probe.payload()))
        plan = spec.probe
        opts.update(
            engine=lab.engine_url,
            gateway=lab.gateway_url,
            metrics_url=lab.metrics_url,
            log=str(lab.log_path),
            route=plan.route,
            payload=payload,
            concurrency=plan.concurrency,
            requests=plan.requests,
            warmup=plan.warmup,
            scrape_interval=0.5,
            no_gpu=True,
            client_location="localhost (llm-doctor demo)",
        )
        return diagnose_config(opts, FileConfig(), bundle_path=None, command="demo")
