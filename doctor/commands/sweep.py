"""``llm-doctor sweep``: levels of load until the SLO knee is found, each diagnosed like ``load``.

Each level is one ``doctor.runs.pipeline`` run (collect -> bundle -> analyze, /metrics scraped over
it) of the level's probe plan (``doctor.settings.load_plan.level_config``); ``doctor.runs.sweep_knee`` decides
the next level, finds the knee and words the recommendation. Ctrl-C or SIGTERM ends the level
in flight at once, and the sweep is reported with the levels it measured (exit 130).

``--bundle-dir DIR`` keeps each level's evidence bundle as ``DIR/level-<level>.json.gz`` (a level
measured twice, its client suspect the first time, keeps the measurement the sweep used), so
``llm-doctor analyze`` re-reads any level offline with the budgets it was judged by. The knee's
families (``reports.prometheus_export.sweep_registry``) go to the textfile and the Pushgateway
as ``diagnose``'s do, under a job of their own.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from doctor.commands.emit import deliver
from doctor.commands.export import SWEEP_JOB, export_registry
from doctor.derive.load_summary import load_summary
from doctor.derive.missing import Missing
from doctor.exit_codes import ExitCode
from doctor.foundation.console import err, progress, warn
from doctor.foundation.serial import to_jsonable
from doctor.runs import pipeline
from doctor.runs.sweep_knee import Ladder, Level, client_bottleneck, conclude, engine_facts, sweep_dict
from doctor.settings import RunSettings, level_config, lookup_targets
from reports.prometheus_export import sweep_registry
from reports.sweep_report import print_sweep, render_sweep_html


def level_bundle(folder: Path, value: float) -> Path:
    """Where ``--bundle-dir`` keeps one level's bundle: ``level-4.json.gz``, ``level-2.5.json.gz``."""
    return folder / f"level-{value:g}.json.gz"


def run(settings: RunSettings) -> ExitCode:
    """0 with a knee, 1 when even the first level is over budget, 2 when nothing was measured, 130 interrupted."""
    settings = lookup_targets(settings)
    base, analyze_opts, registry, plan = settings.collect, settings.analysis, settings.registry, settings.sweep
    assert base is not None and analyze_opts is not None and registry is not None and plan is not None
    bundle_dir, price, exports, cap = settings.bundle_dir, settings.price, settings.exports, settings.max_in_flight
    unit = "stream(s)" if plan.by == "concurrency" else "request(s)/s"
    ladder = Ladder(plan.by, plan.start, plan.maximum)
    first_run: dict[str, Any] = {}

    def measure(value: float) -> Level | None:
        """One level through the pipeline; None when it measured nothing (the reason is printed)."""
        progress(f"level {value:g} {unit}")
        kept = level_bundle(bundle_dir, value) if bundle_dir else None
        report = pipeline.diagnose(level_config(base, plan, value, cap), analyze_opts, registry, bundle_path=kept,
                                   progress=progress)
        if not first_run:
            first_run.update(to_jsonable(report.bundle.run))
        try:
            summary = load_summary(report.bundle, analyze_opts.budgets, price)
        except Missing as exc:
            warn(f"level {value:g}: {exc}")
            return None
        client = report.bundle.stream.client if report.bundle.stream is not None else None
        return Level(value, summary, engine_facts(report.bundle),
                     [{"code": f.code, "name": f.name, "title": f.title} for f in report.findings],
                     interrupted=report.bundle.interrupted,
                     client=client_bottleneck(client, analyze_opts.budgets) if client else None,
                     bundle=str(kept) if kept else None)

    levels: list[Level] = []
    interrupted = False
    try:
        while (value := ladder.next(levels, analyze_opts.budgets)) is not None:
            level = measure(value)
            if level is not None and level.suspect and not level.interrupted:
                progress(f"level {value:g}: {level.client}; measuring it once more")  # a busy host comes and goes
                level = measure(value)
            if level is None:
                break
            levels.append(level)
            if level.interrupted:
                interrupted = True
                break
    except KeyboardInterrupt:  # between levels, or while a level was analysed
        interrupted = True
    if not levels:
        err.print("[red]no level was measured[/]")
        return ExitCode.INTERRUPTED if interrupted else ExitCode.NO_DIAGNOSIS
    result = conclude(levels, analyze_opts.budgets, plan.by, plan.maximum, first_run, interrupted)
    document = json.dumps(sweep_dict(result), indent=1, ensure_ascii=False) + "\n"
    deliver(settings.outputs, lambda console: print_sweep(result, console), {"json": lambda: document, "html": lambda: render_sweep_html(result)})
    if bundle_dir:
        err.print(f"kept each level's bundle in {bundle_dir}")
    if exports.asked:
        export_registry(sweep_registry(result), exports, region=result.run.get("region"), job=SWEEP_JOB)
    if interrupted:
        return ExitCode.INTERRUPTED
    return ExitCode.HEALTHY if result.knee.value is not None else ExitCode.SYMPTOM
