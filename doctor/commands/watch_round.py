"""One round of ``watch``: its targets, each diagnosed with retries while it is down, the canary
compared with its stable, and the round kept in ``--history``.

A round diagnoses each of its named targets in turn through ``doctor.pipeline`` (one at a time:
two probes at once would each load the other's numbers). The targets are the watched one
(named ``""``), or ``stable`` and ``canary`` when ``--canary-engine``/``--canary-gateway`` are
given: the canary gets the same request shape, budgets and run record (same region), and its
own engine's /metrics, but none of the stable's log, Prometheus or model directory.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from doctor import pipeline
from doctor.bundle import write_file
from doctor.compare import compare_reports
from doctor.console import err, progress, warn
from doctor.exit_codes import ExitCode
from doctor.model import Report
from doctor.outage import retry_delay, unreachable_paths
from doctor.probes.plan import CollectConfig
from doctor.registry import Registry
from doctor.runner import AnalyzeOptions
from doctor.settings import WatchPlan
from reports.comparison import print_comparison, print_unlike
from reports.json_doc import render_json

STABLE, CANARY = "stable", "canary"


def round_targets(config: CollectConfig, plan: WatchPlan) -> dict[str, CollectConfig]:
    """``{name: what to diagnose}`` for every round: the one target, or a stable and its canary."""
    if not plan.canary:
        return {"": config}
    canary = replace(config, engine=plan.canary_engine, gateway=plan.canary_gateway, metrics_url=None,
                     log=None, prometheus=None, model_dir=None, run_fields=dict(config.run_fields))
    return {STABLE: config, CANARY: canary}


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


def canary_code(reports: dict[str, Report], code: ExitCode) -> ExitCode:
    """Print the canary against its stable (on stderr: stdout holds the reports) and return
    ``code``, or 1 for a canary regression beyond noise. The canary runs another build or
    config by design, so what its run record changes is shown, never a reason to refuse."""
    if CANARY not in reports:
        return code
    comparison = compare_reports(reports[STABLE], reports[CANARY])
    err.print("canary against stable:")
    if comparison.unlike:
        print_unlike(comparison, err, refused=False, head="The canary differs from the stable")
    print_comparison(comparison, err)
    return ExitCode.SYMPTOM if comparison.regressions and code is not ExitCode.INTERRUPTED else code


def target_outputs(opts: dict[str, Any], name: str) -> dict[str, Any]:
    """The flags for one target's report: ``--json r.json`` becomes ``r.canary.json`` for a named target."""
    if not name:
        return opts
    return {**opts, **{key: Path(opts[key]).with_suffix(f".{name}{Path(opts[key]).suffix}")
                       for key in ("json", "html", "md") if opts.get(key)}}


#: ``round-<UTC stamp>.json``, or ``round-<stamp>--<target>.json`` for a named target.
_ROUND = re.compile(r"round-(?P<stamp>[0-9T.]+Z)(?:--[A-Za-z0-9_.-]+)?\.json")


def keep_round(reports: dict[str, Report], history: Path, keep: int) -> list[Path]:
    """Write the round's JSON reports (they embed the bundles) and drop the files of the rounds
    older than the newest ``keep``; other files in the folder are left alone."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    written = []
    for name, report in reports.items():
        path = history / (f"round-{stamp}--{name}.json" if name else f"round-{stamp}.json")
        write_file(path, render_json(report).encode("utf-8"))
        written.append(path)
    rounds = [(m.group("stamp"), path) for path in history.iterdir() if (m := _ROUND.fullmatch(path.name))]
    newest = set(sorted({stamp for stamp, _ in rounds})[-keep:])
    for stamp, path in rounds:
        if stamp not in newest:
            path.unlink(missing_ok=True)
    return written
