"""``llm-doctor analyze``: re-analyse a saved bundle or report, with the settings it was made with."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from doctor.bundle import load_path
from doctor.commands.emit import emit
from doctor.commands.export import export_metrics
from doctor.config import load_config, with_recorded_analysis
from doctor.console import warn
from doctor.exit_codes import ExitCode
from doctor.registry import load_registry
from doctor.runner import analyze, known_analysis
from doctor.settings import build_analyze_options, check_export_options, check_output_options


def run(opts: dict[str, Any], source: Path, region: str | None) -> ExitCode:
    """Recorded settings under the config file's and the flags' (an explicit --config wins over them)."""
    cfg = load_config(opts.get("config"))
    check_output_options(opts, cfg)  # before reading the bundle or writing any file
    exports = check_export_options(opts)
    bundle = load_path(source)
    registry = load_registry()
    recorded, dropped = known_analysis(bundle.run.analysis, registry)
    for warning in dropped:
        warn(warning)
    cfg = with_recorded_analysis(cfg, recorded, explicit=opts.get("config") is not None)
    report = analyze(bundle, build_analyze_options(opts, cfg, region or bundle.run.region), registry)
    code = emit(report, opts, cfg)
    export_metrics(report, exports)
    return code
