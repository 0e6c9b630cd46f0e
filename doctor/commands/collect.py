"""``llm-doctor collect``: gather a bundle and write it, without analysing it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from doctor.bundle import save
from doctor.collect import collect
from doctor.config import load_config
from doctor.console import err, progress
from doctor.exit_codes import ExitCode, usable_evidence
from doctor.settings import build_collect_config, check_output_paths, require_evidence_source


def run(opts: dict[str, Any], bundle: Path) -> ExitCode:
    """0 with usable evidence; 2 without (the bundle is still written: its errors say why)."""
    cfg = load_config(opts.get("config"))
    config = build_collect_config(opts, cfg, "collect")
    require_evidence_source(config, "collect")
    check_output_paths(bundle)
    result = collect(config, progress)
    save(result, bundle)
    err.print(f"wrote {bundle} ({len(result.errors)} evidence error(s))")
    if result.interrupted:
        return ExitCode.INTERRUPTED
    if not usable_evidence(result):
        err.print("[red]no usable evidence:[/] no request succeeded and no log, /metrics or Prometheus data was read")
        return ExitCode.NO_DIAGNOSIS
    return ExitCode.HEALTHY
