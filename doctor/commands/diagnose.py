"""``llm-doctor diagnose``: settings -> the pipeline -> the report's files, summary and exit code."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from doctor import pipeline
from doctor.commands.baseline import against_baseline
from doctor.commands.emit import emit
from doctor.commands.export import export_metrics
from doctor.commands.watch_round import RoundSettings, round_targets, run_round
from doctor.config import FileConfig
from doctor.console import err, progress
from doctor.errors import UsageError
from doctor.exit_codes import ExitCode
from doctor.settings import (
    WatchPlan,
    build_analyze_options,
    build_collect_config,
    check_baseline_folder,
    check_bundle_path,
    check_export_options,
    check_output_options,
    check_output_paths,
    checked_registry,
    require_evidence_source,
)


def run(opts: dict[str, Any], cfg: FileConfig, bundle_path: Path | None, command: str = "diagnose") -> ExitCode:
    """Everything is checked before anything is sent: targets, --format, --fail-on, --select, --set,
    the metrics outputs, the baseline folder; the metrics are exported after the report (its files
    and summary), then the run is compared with its region's baseline."""
    config = build_collect_config(opts, cfg, command)
    require_evidence_source(config, "diagnose")
    check_output_options(opts, cfg)  # a bad --format or --fail-on fails before anything is sent
    check_bundle_path(bundle_path)
    check_output_paths(opts.get("json"), opts.get("html"), opts.get("md"))
    exports = check_export_options(opts)
    baseline = check_baseline_folder(opts)
    analyze_opts = build_analyze_options(opts, cfg, config.run_fields.get("region"))
    registry = checked_registry(analyze_opts)
    if config.fleet:  # one diagnosis per replica, side by side (``doctor.commands.watch_round``)
        if bundle_path:
            raise UsageError("--bundle keeps one run's bundle; with several --engine, each replica's --json report embeds its own")
        settings = RoundSettings(opts, cfg, analyze_opts, registry, WatchPlan(every_s=0.0, retries=0), exports, baseline)
        return run_round(round_targets(config, settings.plan), settings, time.monotonic(), threading.Event())[1]
    report = pipeline.diagnose(config, analyze_opts, registry, bundle_path=bundle_path, progress=progress)
    if bundle_path:
        err.print(f"wrote {bundle_path}")
    code = emit(report, opts, cfg, interrupted=report.bundle.interrupted)  # this run's own collection
    export_metrics(report, exports)
    return against_baseline(report, code, baseline, opts, cfg) if baseline is not None else code
