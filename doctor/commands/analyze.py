"""``llm-doctor analyze``: re-analyse a saved bundle or report, with the settings it was made with.

A bundle of a load run (``load --bundle``) or of a sweep level (``sweep --bundle-dir``) comes out
as ``load`` wrote it: the scenario's summary judged by the budgets it was made with, beside the
report, and its ``llm_doctor_load_*`` families with the rest.
"""

from __future__ import annotations

from pathlib import Path

from doctor.bundle import load_path
from doctor.checking.registry import load_registry
from doctor.checking.runner import analyze, known_analysis
from doctor.commands.emit import emit
from doctor.commands.export import export_metrics
from doctor.commands.load import emit_load
from doctor.exit_codes import ExitCode
from doctor.foundation.console import warn
from doctor.model import Report
from doctor.settings import RunSettings, for_saved


def run(settings: RunSettings, source: Path) -> ExitCode:
    """Recorded settings under the config file's and the flags' (an explicit --config wins over them);
    the outputs were checked before the bundle is read (``doctor.settings.resolve``)."""
    report, saved = reanalyse(source, settings, settings.region)
    if report.bundle.run.scenario is not None:  # kept by ``load --bundle`` or ``sweep --bundle-dir``: read as it was live
        return emit_load(report, saved.outputs, settings.exports)
    code = emit(report, saved.outputs)
    export_metrics(report, settings.exports)
    return code


def reanalyse(source: Path, settings: RunSettings, region: str | None, *, flags: bool = True) -> tuple[Report, RunSettings]:
    """The report of a saved bundle (or of the bundle a report embeds), with its recorded settings.

    Also what ``compare`` reads each side with, so both sides are judged as ``analyze`` would, and
    a baseline (without the run's ``flags``: only the config file speaks besides the record).
    Returns the settings with the recorded analysis folded in (``doctor.settings.for_saved``),
    whose ``--fail-on`` decides the exit code.
    """
    bundle = load_path(source)
    registry = load_registry()
    recorded, dropped = known_analysis(bundle.run.analysis, registry)
    for warning in dropped:
        warn(warning)
    saved = for_saved(settings, recorded, region or bundle.run.region, flags=flags)
    assert saved.analysis is not None
    return analyze(bundle, saved.analysis, registry), saved
