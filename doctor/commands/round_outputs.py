"""What a round of ``watch`` (and a fleet ``diagnose``) shows: each target's report emitted and
held against its baseline, the round's metrics exported, the fleet side by side and the canary
against its stable (on stderr), and the round's exit code.

The round itself (targets, retries while a target is down, the kept history) is
``doctor.runs.watch_round``; this module is the command layer's part, shared by the ``watch``
and ``diagnose`` commands, because it prints and writes the outputs the user asked for.
"""

from __future__ import annotations

import sys
import threading

from doctor.commands.baseline import against_baseline
from doctor.commands.emit import emit
from doctor.commands.export import export_metrics
from doctor.exit_codes import ExitCode, worst_code
from doctor.foundation.console import err
from doctor.model import Practical, Report
from doctor.probes.plan import CollectConfig
from doctor.runs.compare_runs import compare_reports, decision_code
from doctor.runs.fleet_view import fleet_view
from doctor.runs.watch_round import CANARY, GATEWAY, STABLE, diagnose_round, file_part, keep_round
from doctor.settings import Outputs, RunSettings
from reports.comparison import print_comparison, print_unlike
from reports.fleet import print_fleet
from reports.json_doc import render_json
from reports.terminal import stdout_console


def canary_code(reports: dict[str, Report], code: ExitCode, practical: Practical) -> ExitCode:
    """Print the canary against its stable (on stderr: stdout holds the reports) and return the
    worse of ``code`` and the comparison's (``compare``'s rule). The canary runs another build or
    config by design, so what its run record changes is shown, never a reason to refuse."""
    if CANARY not in reports:
        return code
    comparison = compare_reports(reports[STABLE], reports[CANARY], practical)
    err.print("canary against stable:")
    console = stdout_console(sys.stderr)
    if comparison.unlike:
        print_unlike(comparison, console, refused=False, head="The canary differs from the stable")
    print_comparison(comparison, console)
    return worst_code([code, decision_code(comparison)])


def show_fleet(reports: dict[str, Report]) -> None:
    """The replicas side by side (on stderr) when the round probed a fleet. It adds no exit code:
    the fleet's is the worst replica's, already counted."""
    replicas = {name: report for name, report in reports.items() if name not in ("", STABLE, CANARY, GATEWAY)}
    if len(replicas) > 1:
        print_fleet(fleet_view(replicas), err)


def target_outputs(outputs: Outputs, name: str) -> Outputs:
    """The outputs of one target's report: ``--json r.json`` becomes ``r.canary.json`` for a named target;
    ``-`` stays stdout, where each target's document follows the last (``jq`` reads the stream)."""
    return outputs.for_target(file_part(name)) if name else outputs


def run_round(targets: dict[str, CollectConfig], settings: RunSettings, started: float, stop: threading.Event) -> tuple[dict[str, Report], ExitCode]:
    """Diagnose every target, keep and emit each report, export the round, show a fleet side by
    side, and decide the round's code: the worst of the targets' (each against its baseline) and
    the canary's comparison with its stable. ``settings.watch`` says how the round retries and keeps."""
    plan, analysis, registry = settings.watch, settings.analysis, settings.registry
    assert plan is not None and analysis is not None and registry is not None
    reports = diagnose_round(targets, analysis, registry, plan, started, stop)
    if plan.history is not None:
        documents = {name: render_json(report).encode("utf-8") for name, report in reports.items()}
        for path in keep_round(documents, plan.history, plan.keep):
            err.print(f"kept {path}")
    codes = []
    for name, report in reports.items():
        codes.append(emit(report, target_outputs(settings.outputs, name), interrupted=report.bundle.interrupted))
        if settings.baseline is not None and name != CANARY:  # a canary is judged against its stable, not the baseline
            codes[-1] = against_baseline(report, codes[-1], settings.baseline, settings)
    export_metrics(exported(reports), settings.exports)
    show_fleet(reports)
    return reports, canary_code(reports, worst_code(codes), settings.practical)


def exported(reports: dict[str, Report]) -> Report | dict[str, Report]:
    """What the families are built from: the one report, or every target's (labelled ``target``)."""
    return reports[""] if list(reports) == [""] else reports
