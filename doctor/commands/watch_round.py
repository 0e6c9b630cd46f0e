"""One round of ``watch`` (and a fleet ``diagnose``): its targets, each diagnosed with retries
while it is down, the canary compared with its stable, the fleet's replicas side by side, and the
round kept in ``--history``.

A round diagnoses each of its named targets in turn through ``doctor.pipeline`` (one at a time:
two probes at once would each load the other's numbers). The targets are the watched one
(named ``""``); or ``stable`` and ``canary`` when ``--canary-engine``/``--canary-gateway`` are
given (the canary gets the same request shape, budgets and run record, and its own engine's
/metrics, but none of the stable's log, Prometheus or model directory); or, with several
``--engine``, one per replica (named by its host and port) plus ``gateway`` for the users' path.
"""

from __future__ import annotations

import re
import sys
import threading
import time
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import httpx

from doctor import pipeline
from doctor.bundle import write_file
from doctor.checking.registry import Registry
from doctor.checking.runner import AnalyzeOptions
from doctor.commands.baseline import against_baseline
from doctor.commands.emit import emit
from doctor.commands.export import export_metrics
from doctor.compare import Practical, compare_reports, decision_code
from doctor.exit_codes import ExitCode, worst_code
from doctor.fleet import fleet_view
from doctor.foundation.console import err, progress, warn
from doctor.foundation.errors import UsageError
from doctor.model import Report
from doctor.outage import retry_delay, unreachable_paths
from doctor.probes.plan import CollectConfig
from doctor.settings import Outputs, RunSettings, WatchPlan
from reports.comparison import print_comparison, print_unlike
from reports.fleet import print_fleet
from reports.json_doc import render_json
from reports.terminal import stdout_console

STABLE, CANARY, GATEWAY = "stable", "canary", "gateway"


def round_targets(config: CollectConfig, plan: WatchPlan) -> dict[str, CollectConfig]:
    """``{name: what to diagnose}`` for every round: the one target, a stable and its canary, or a fleet."""
    if plan.canary and config.fleet:
        raise UsageError("a canary is compared with one stable target: not with several --engine")
    if plan.canary:
        canary = replace(config, engine=plan.canary_engine, gateway=plan.canary_gateway, metrics_url=None,
                         log=None, prometheus=None, model_dir=None, run_fields=dict(config.run_fields))
        return {STABLE: config, CANARY: canary}
    if not config.fleet:
        return {"": config}
    names = replica_names(config.fleet)
    targets = {name: replace(config, engine=url, gateway=None, fleet=[], run_fields=dict(config.run_fields))
               for name, url in names.items()}
    if config.gateway:
        targets[GATEWAY] = replace(config, engine=None, fleet=[], run_fields=dict(config.run_fields))
    return targets


def replica_names(engines: list[str]) -> dict[str, str]:
    """``{host:port: URL}``; a repeated host and port gets ``#2``, ``#3``, ... (two paths on one server)."""
    names: dict[str, str] = {}
    for url in engines:
        parsed = httpx.URL(url)
        host = f"[{parsed.host}]" if ":" in parsed.host else parsed.host
        base = f"{host}:{parsed.port or (443 if parsed.scheme == 'https' else 80)}"
        name, n = base, 1
        while name in names:
            n += 1
            name = f"{base}#{n}"
        names[name] = url
    return names


def diagnose_with_retries(name: str, config: CollectConfig, analyze_opts: AnalyzeOptions, registry: Registry,
                          plan: WatchPlan, started: float, stop: threading.Event) -> Report:
    """Diagnose ``config``; while a probed path is down, wait (``doctor.outage.retry_delay``) and
    diagnose again. What is left down after the retries is reported as an outage: the round's
    result, with its exit code and metrics, never the end of the watch."""
    who = f"{name}: " if name else ""
    report = pipeline.diagnose(config, analyze_opts, registry, progress=progress)
    attempt = 1
    while (down := unreachable_paths(report.bundle)) and not report.bundle.interrupted and not stop.is_set():
        delay = retry_delay(attempt, plan.retries, time.monotonic() - started, plan.every_s)
        if delay is None:
            break
        progress(f"{who}{_paths(down)} unreachable; retry {attempt}/{plan.retries} in {delay:g} s")
        if stop.wait(delay):
            break
        report = pipeline.diagnose(config, analyze_opts, registry, progress=progress)
        attempt += 1
    if down := unreachable_paths(report.bundle):
        warn(f"outage: {who}{_paths(down)} unreachable after {attempt} attempt(s); reported as this round's result")
    return report


def _paths(down: dict[str, str]) -> str:
    return ", ".join(f"{path} ({kinds})" for path, kinds in sorted(down.items()))


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


def _file_part(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


def target_outputs(outputs: Outputs, name: str) -> Outputs:
    """The outputs of one target's report: ``--json r.json`` becomes ``r.canary.json`` for a named target;
    ``-`` stays stdout, where each target's document follows the last (``jq`` reads the stream)."""
    return outputs.for_target(_file_part(name)) if name else outputs


#: ``round-<UTC stamp>.json``, or ``round-<stamp>--<target>.json`` for a named target.
_ROUND = re.compile(r"round-(?P<stamp>[0-9T.]+Z)(?:--[A-Za-z0-9_.-]+)?\.json")


def keep_round(reports: dict[str, Report], history: Path, keep: int) -> list[Path]:
    """Write the round's JSON reports (they embed the bundles) and drop the files of the rounds
    older than the newest ``keep``; other files in the folder are left alone."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    written = []
    for name, report in reports.items():
        path = history / (f"round-{stamp}--{_file_part(name)}.json" if name else f"round-{stamp}.json")
        write_file(path, render_json(report).encode("utf-8"))
        written.append(path)
    rounds = [(m.group("stamp"), path) for path in history.iterdir() if (m := _ROUND.fullmatch(path.name))]
    newest = set(sorted({stamp for stamp, _ in rounds})[-keep:])
    for stamp, path in rounds:
        if stamp not in newest:
            path.unlink(missing_ok=True)
    return written


def run_round(targets: dict[str, CollectConfig], settings: RunSettings, started: float, stop: threading.Event) -> tuple[dict[str, Report], ExitCode]:
    """Diagnose every target, keep and emit each report, export the round, show a fleet side by
    side, and decide the round's code: the worst of the targets' (each against its baseline) and
    the canary's comparison with its stable. ``settings.watch`` says how the round retries and keeps."""
    plan, analysis, registry = settings.watch, settings.analysis, settings.registry
    assert plan is not None and analysis is not None and registry is not None
    reports: dict[str, Report] = {}
    for name, target in targets.items():
        reports[name] = diagnose_with_retries(name, target, analysis, registry, plan, started, stop)
        if reports[name].bundle.interrupted:  # Ctrl-C: what was gathered is reported, the rest is not probed
            break
    if plan.history is not None:
        for path in keep_round(reports, plan.history, plan.keep):
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
