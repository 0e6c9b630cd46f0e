"""One round of ``watch`` (and a fleet ``diagnose``): its targets, each diagnosed with retries
while it is down, and the round kept in ``--history``. What the round prints and emits (each
target's report, the canary against its stable, the fleet side by side) is the command layer's:
``doctor.commands.round_outputs``.

A round diagnoses each of its named targets in turn through ``doctor.runs.pipeline`` (one at a time:
two probes at once would each load the other's numbers). The targets are the watched one
(named ``""``); or ``stable`` and ``canary`` when ``--canary-engine``/``--canary-gateway`` are
given (the canary gets the same request shape, budgets and run record, and its own engine's
/metrics, but none of the stable's log, Prometheus or model directory); or, with several
``--engine``, one per replica (named by its host and port) plus ``gateway`` for the users' path.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import httpx

from doctor.bundle import write_file
from doctor.checking.registry import Registry
from doctor.checking.runner import AnalyzeOptions
from doctor.foundation.console import progress, warn
from doctor.foundation.errors import UsageError
from doctor.model import Report
from doctor.probes.plan import CollectConfig
from doctor.runs import pipeline
from doctor.runs.outage import retry_delay, unreachable_paths
from doctor.settings import WatchPlan

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
    """Diagnose ``config``; while a probed path is down, wait (``doctor.runs.outage.retry_delay``) and
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


def file_part(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


#: ``round-<UTC stamp>.json``, or ``round-<stamp>--<target>.json`` for a named target.
_ROUND = re.compile(r"round-(?P<stamp>[0-9T.]+Z)(?:--[A-Za-z0-9_.-]+)?\.json")


def keep_round(documents: dict[str, bytes], history: Path, keep: int) -> list[Path]:
    """Write the round's JSON reports (``{target: document}``; they embed the bundles) and drop the
    files of the rounds older than the newest ``keep``; other files in the folder are left alone."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    written = []
    for name, document in documents.items():
        path = history / (f"round-{stamp}--{file_part(name)}.json" if name else f"round-{stamp}.json")
        write_file(path, document)
        written.append(path)
    rounds = [(m.group("stamp"), path) for path in history.iterdir() if (m := _ROUND.fullmatch(path.name))]
    newest = set(sorted({stamp for stamp, _ in rounds})[-keep:])
    for stamp, path in rounds:
        if stamp not in newest:
            path.unlink(missing_ok=True)
    return written


def diagnose_round(targets: dict[str, CollectConfig], analysis: AnalyzeOptions, registry: Registry, plan: WatchPlan,
                   started: float, stop: threading.Event) -> dict[str, Report]:
    """``{name: report}`` of every target, diagnosed in turn with ``diagnose_with_retries``; after a
    Ctrl-C what was gathered is reported and the remaining targets are not probed."""
    reports: dict[str, Report] = {}
    for name, target in targets.items():
        reports[name] = diagnose_with_retries(name, target, analysis, registry, plan, started, stop)
        if reports[name].bundle.interrupted:
            break
    return reports
