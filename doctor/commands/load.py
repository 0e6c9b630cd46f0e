"""``llm-doctor load --scenario single|server|offline``: a load test in MLPerf's terms, diagnosed.

The run is a ``diagnose`` of one path under the scenario's load (``doctor.settings.load_plan``):
collected into a bundle, read back and analysed by every check through ``doctor.runs.pipeline``, with
the engine's /metrics scraped over it. The scenario's own numbers (``doctor.derive.load_summary``)
go beside the report: in the terminal, as the JSON's ``summary``, as a section of the HTML and as
the ``llm_doctor_load_*`` metric families. ``emit_load`` is that way out, shared with ``analyze``
of a bundle a load run or a sweep level kept, so the offline reading is the live one.
Ctrl-C or SIGTERM stops sending at once (``doctor.foundation.signals``) and the partial report is still written.
"""

from __future__ import annotations

import json

from rich.console import Console

from doctor.checking.runner import recorded_budgets
from doctor.commands.emit import deliver
from doctor.commands.export import export_metrics
from doctor.derive.load_summary import LoadSummary, Price, load_summary
from doctor.derive.missing import Missing
from doctor.exit_codes import ExitCode, exit_code_for
from doctor.foundation.console import err, progress
from doctor.model import Report
from doctor.runs import pipeline
from doctor.settings import ExportTargets, Outputs, RunSettings, lookup_targets
from reports.html_page import render_html
from reports.load_report import load_dict, load_rows, print_load
from reports.markdown import render_markdown
from reports.terminal import print_report


def run(settings: RunSettings) -> ExitCode:
    """The report's exit code (130 when interrupted); every flag was checked before anything is sent."""
    settings = lookup_targets(settings)
    config, analysis, registry = settings.collect, settings.analysis, settings.registry
    assert config is not None and analysis is not None and registry is not None
    report = pipeline.diagnose(config, analysis, registry, bundle_path=settings.bundle, progress=progress)
    if settings.bundle:
        err.print(f"wrote {settings.bundle}")
    return emit_load(report, settings.outputs, settings.exports, price=settings.price, interrupted=report.bundle.interrupted)


def emit_load(report: Report, outputs: Outputs, exports: ExportTargets, *,
              price: Price | None = None, interrupted: bool = False) -> ExitCode:
    """A load report's way out: the JSON with its ``summary``, the HTML with its load section, the
    scenario's table and the report's summary on stdout, the metrics; then the exit code
    (``outputs.fail_on``).

    The summary is judged by the budgets the report was analysed with (its run record), so a
    re-analysed level or load bundle reads as it did live. ``interrupted``: this process was
    stopped while collecting (exit 130), as in ``doctor.commands.emit``.
    """
    summary: LoadSummary | None = None
    missing = None
    try:
        summary = load_summary(report.bundle, recorded_budgets(report.bundle), price)
    except Missing as exc:
        missing = str(exc)
    document = json.dumps(load_dict(report, summary, missing), indent=1, ensure_ascii=False) + "\n"
    scenario = report.bundle.run.scenario or "load"
    title = f"Load: {scenario} scenario" + (f" on the {summary.path} path" if summary else "")
    renders = {
        "json": lambda: document,
        "html": lambda: render_html(report, (title, load_rows(summary) if summary else [("summary", missing or "")])),
        "md": lambda: render_markdown(report, outputs.footer_pointer()),  # analyze's --md; load itself has none
    }

    def show(console: Console) -> None:
        print_load(summary, missing, console)
        print_report(report, console, verbose=outputs.verbose)

    deliver(outputs, show, renders)
    export_metrics(report, exports, load=summary)
    if interrupted:
        return ExitCode.INTERRUPTED
    return exit_code_for(report, outputs.fail_on)
