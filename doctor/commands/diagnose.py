"""``llm-doctor diagnose``: settings -> the pipeline -> the report's files, summary and exit code."""

from __future__ import annotations

import threading
import time

from doctor.commands.baseline import against_baseline
from doctor.commands.emit import emit
from doctor.commands.export import export_metrics
from doctor.commands.round_outputs import run_round
from doctor.exit_codes import ExitCode
from doctor.foundation.console import err, progress
from doctor.foundation.errors import UsageError
from doctor.runs import pipeline
from doctor.runs.watch_round import round_targets
from doctor.settings import RunSettings, lookup_targets


def run(settings: RunSettings) -> ExitCode:
    """Everything was checked before anything is sent (``doctor.settings.resolve``): targets,
    --format, --fail-on, --select, --set, the metrics outputs, the baseline folder; a ``k8s://``
    engine is looked up first. The metrics are exported after the report (its files and summary),
    then the run is compared with its region's baseline."""
    settings = lookup_targets(settings)
    config, analysis, registry = settings.collect, settings.analysis, settings.registry
    assert config is not None and analysis is not None and registry is not None and settings.watch is not None
    if config.fleet:  # one diagnosis per replica, side by side (``doctor.runs.watch_round``)
        if settings.bundle:
            raise UsageError("--bundle keeps one run's bundle; with several --engine, each replica's --json report embeds its own")
        return run_round(round_targets(config, settings.watch), settings, time.monotonic(), threading.Event())[1]
    report = pipeline.diagnose(config, analysis, registry, bundle_path=settings.bundle, progress=progress)
    if settings.bundle:
        err.print(f"wrote {settings.bundle}")
    code = emit(report, settings.outputs, interrupted=report.bundle.interrupted)  # this run's own collection
    export_metrics(report, settings.exports)
    return against_baseline(report, code, settings.baseline, settings) if settings.baseline is not None else code
