"""``llm-doctor analyze``: re-analyse a saved bundle or report, with the settings it was made with.

A bundle of a load run (``load --bundle``) or of a sweep level (``sweep --bundle-dir``) comes out
as ``load`` wrote it: the scenario's summary judged by the budgets it was made with, beside the
report, and its ``llm_doctor_load_*`` families with the rest.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from doctor.bundle import load_path
from doctor.commands.emit import emit
from doctor.commands.export import export_metrics
from doctor.commands.load import emit_load
from doctor.config import FileConfig, load_config, with_recorded_analysis
from doctor.console import warn
from doctor.exit_codes import ExitCode
from doctor.model import Report
from doctor.registry import load_registry
from doctor.runner import analyze, known_analysis
from doctor.settings import build_analyze_options, check_export_options, check_output_options, check_output_paths


def run(opts: dict[str, Any], source: Path, region: str | None) -> ExitCode:
    """Recorded settings under the config file's and the flags' (an explicit --config wins over them)."""
    cfg = load_config(opts.get("config"))
    check_output_options(opts, cfg)  # before reading the bundle or writing any file
    check_output_paths(opts.get("json"), opts.get("html"), opts.get("md"))
    exports = check_export_options(opts)
    report, cfg = reanalyse(source, opts, cfg, region)
    if report.bundle.run.scenario is not None:  # kept by ``load --bundle`` or ``sweep --bundle-dir``: read as it was live
        return emit_load(report, opts, check_output_options(opts, cfg), exports)
    code = emit(report, opts, cfg)
    export_metrics(report, exports)
    return code


def reanalyse(source: Path, opts: dict[str, Any], cfg: FileConfig, region: str | None) -> tuple[Report, FileConfig]:
    """The report of a saved bundle (or of the bundle a report embeds), with its recorded settings.

    Also what ``compare`` reads each side with, so both sides are judged as ``analyze`` would.
    Returns the config with the recorded analysis folded in, which decides the exit code.
    """
    bundle = load_path(source)
    registry = load_registry()
    recorded, dropped = known_analysis(bundle.run.analysis, registry)
    for warning in dropped:
        warn(warning)
    cfg = with_recorded_analysis(cfg, recorded, explicit=opts.get("config") is not None)
    return analyze(bundle, build_analyze_options(opts, cfg, region or bundle.run.region), registry), cfg
