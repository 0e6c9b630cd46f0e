"""One run's settings: ``resolve(command, flags, file)`` builds them, in one place and one order.

Every command starts from the ``RunSettings`` its flags resolve to (flags over the config file over
the dataclass defaults, each value checked before anything is sent) and never changes them: a
derived copy is a ``dataclasses.replace``, made here by a named step:

- ``lookup_targets``: the endpoints of a ``k8s://`` engine, asked of the Kubernetes API (the one
  step that reaches the network, called by the command that probes);
- ``for_saved``: the analysis a saved bundle is re-read with (its recorded settings under an
  explicit ``--config`` and the flags), for ``analyze``, ``compare`` and a baseline;
- ``with_lab``: ``demo``'s targets, known once its lab runs.

The order is the same for every command (``STEPS``), and what each command takes is declared once
(``COMMANDS``: a ``Takes`` per command, no test of a command's name); a command simply has no
value for a step it does not take: the config file; how the run repeats (``watch``, ``sweep``);
the probe plan and its evidence source; the report's outputs; the bundle; the report files; the
metrics outputs; the baseline; the price; the analysis and the check catalogue; what a
comparison calls a regression. So a typo is a
usage error (exit 2) before the first request, and the flags are read by name here only.

Fastapi-cli resolves its settings the same way (``FastAPIConfig.resolve`` -> one validated model);
Lighthouse keeps one typed ``Settings`` per run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType

from doctor.checking.registry import Registry
from doctor.checking.runner import AnalyzeOptions
from doctor.derive.load_summary import Price
from doctor.foundation.errors import UsageError
from doctor.foundation.user_paths import check_output_folder
from doctor.model import Practical
from doctor.probes.plan import CollectConfig
from doctor.settings.analysis import (
    ExportTargets,
    Outputs,
    build_analyze_options,
    build_outputs,
    build_practical,
    check_baseline_folder,
    check_export_options,
    checked_registry,
)
from doctor.settings.config_file import AnalysisRecord, FileConfig, load_config, with_recorded_analysis
from doctor.settings.load_plan import (
    MAX_CONCURRENCY,
    SweepPlan,
    build_load_base,
    build_load_config,
    build_price,
    build_sweep_plan,
)
from doctor.settings.probe_plan import (
    build_collect_config,
    check_bundle_path,
    check_fleet,
    check_output_paths,
    given_engines,
    is_kubernetes,
    lookup_engines,
    warn_same_place,
)
from doctor.settings.values import PRACTICAL, Flags
from doctor.settings.watch_plan import WatchPlan, build_watch_plan

#: Where ``diagnose`` writes its report when no output is named.
DEFAULT_REPORT = Path("llm-doctor-report.html")
#: The files a demo always writes, under ``--out-dir`` unless a flag names the file elsewhere.
DEFAULT_OUTPUTS = {"html": "report.html", "json": "report.json"}
#: A fleet ``diagnose`` is one round of ``watch``'s, never retried.
ONE_ROUND = WatchPlan(every_s=0.0, retries=0)


@dataclass(frozen=True)
class RunSettings:
    """Everything one run was asked to do, resolved and checked: the probe plan (``collect``), the
    analysis and its check catalogue, where the report and metrics go, and how the run repeats.

    Frozen: a command reads it and never changes it. ``flags`` are the flags as given, kept for the
    named steps of this package that derive a copy (``for_saved``, ``with_lab``); no other module
    reads them. ``engines`` are the ``--engine`` values as given, a ``k8s://`` one still unresolved
    until ``lookup_targets``.
    """

    command: str
    file: FileConfig
    flags: Flags = field(default_factory=lambda: MappingProxyType({}))
    collect: CollectConfig | None = None
    engines: tuple[str, ...] = ()
    analysis: AnalyzeOptions | None = None
    registry: Registry | None = None
    outputs: Outputs = field(default_factory=Outputs)
    bundle: Path | None = None  # --bundle (diagnose, load) or -o (collect, probe)
    bundle_dir: Path | None = None  # sweep's --bundle-dir
    exports: ExportTargets = field(default_factory=ExportTargets)
    baseline: Path | None = None
    practical: Practical = PRACTICAL
    watch: WatchPlan | None = None
    sweep: SweepPlan | None = None
    price: Price | None = None
    max_in_flight: int = MAX_CONCURRENCY  # a rate sweep's cap on the streams in flight
    region: str | None = None  # analyze's --region


#: Every report file (``--json``, ``--html``, ``--md``).
ALL_FILES = ("json", "html", "md")


def _default_report(flags: Flags) -> Flags:
    """``diagnose`` with no output named writes ``DEFAULT_REPORT``."""
    return flags if any(flags.get(key) for key in ALL_FILES) else {**flags, "html": DEFAULT_REPORT}


def _verify_targets(flags: Flags) -> Flags:
    """``verify``'s endpoints as the probe plan's: the baseline as the direct path and the candidate as
    the other, so the stream probe pairs and interleaves them; the candidate alone without a live baseline."""
    baseline, candidate = flags.get("baseline"), flags.get("candidate")
    if not candidate:
        raise UsageError("give --candidate URL (the changed stack)")
    if baseline and flags.get("baseline_answers"):
        raise UsageError("give --baseline or --baseline-answers, not both")
    targets = {"engine": [baseline], "gateway": candidate} if baseline else {"engine": [candidate], "gateway": None}
    return {**flags, **targets}


#: A probe plan: built from the run's flags and file, given the level cap (``--max-concurrency``) and
#: whether a ``k8s://`` engine is still to be looked up; checked for reading something.
PlanBuilder = Callable[[RunSettings, int | None, bool], CollectConfig]


def _collector_plan(run: RunSettings, _in_flight: int | None, pending: bool) -> CollectConfig:
    """The collector's plan: refused when it would read nothing."""
    config = build_collect_config(run.flags, run.file, run.command)
    if not (config.targets() or pending or config.log or config.prometheus):
        raise UsageError(f"nothing to {COMMANDS[run.command].verb or run.command}: give --engine and/or --gateway, --log, or --prometheus")
    return config


def _stream_plan(run: RunSettings, _in_flight: int | None, pending: bool) -> CollectConfig:
    """Only the stream probe: no log, Prometheus, host, GPU or /metrics."""
    config = build_collect_config(run.flags, run.file, run.command)
    if not config.targets() and not pending:
        raise UsageError("give --engine and/or --gateway")
    return replace(config, log=None, prometheus=None, gpu=False, host=False, metrics=False)


def _load_plan(run: RunSettings, in_flight: int | None, pending: bool) -> CollectConfig:
    """A load run's plan, shaped by its --scenario."""
    return build_load_config(run.flags, run.file, run.command, in_flight, pending=pending)


def _sweep_base(run: RunSettings, in_flight: int | None, pending: bool) -> CollectConfig:
    """The base of a sweep's levels, each of which sets its own concurrency or rate."""
    return build_load_base(run.flags, run.file, run.command, in_flight, pending=pending)


def _one_round(_flags: Flags) -> WatchPlan:
    return ONE_ROUND


def _watch_rounds(flags: Flags) -> WatchPlan:
    """``watch``'s rounds: every ``--every``, ``--count`` times, kept and retried as asked."""
    return build_watch_plan(
        flags.get("every") or "5m", flags.get("count"), flags.get("listen"), _path(flags.get("history")),
        WatchPlan.keep if flags.get("keep") is None else flags["keep"],
        retries=WatchPlan.retries if flags.get("retries") is None else flags["retries"],
        canary_engine=flags.get("canary_engine"), canary_gateway=flags.get("canary_gateway"))


@dataclass(frozen=True)
class Takes:
    """What one command's settings hold, declared once (``COMMANDS``): which of the steps of the one
    order (``STEPS``) it takes, and how. A step a command does not take leaves its default."""

    prepare: Callable[[Flags], Flags] | None = None  # its flags made whole before any is read
    lab: bool = False  # its probe plan, analysis and report files wait for its lab (``with_lab``)
    repeats: Callable[[Flags], WatchPlan] | None = None  # how it repeats (a round of ``watch``'s)
    sweeps: bool = False  # --by, --max-concurrency/--max-rate, --start, --bundle-dir
    fleet: bool = False  # several --engine replicas, probed one by one
    plan: PlanBuilder | None = None  # the probe plan it builds
    verb: str | None = None  # what "nothing to ..." says when its collector plan reads nothing (its name)
    outputs: bool = False  # --json, --html, --md, --format, --fail-on
    bundle_check: Callable[[Path | None], None] | None = None  # how its --bundle / -o is checked
    report_files: tuple[str, ...] = ()  # the report files checked before it probes (watch writes them each round)
    exports: bool = False  # --metrics-textfile, --pushgateway
    baseline: bool = False  # --baseline (a folder of earlier reports)
    priced: bool = False  # --price-*
    analyses: bool = False  # --select/--ignore/--set checked, the check catalogue
    practical: bool = False  # what a comparison calls a regression
    region: bool = False  # --region selects the budgets of a saved bundle


#: Every command's settings, declared once.
COMMANDS: dict[str, Takes] = {
    "diagnose": Takes(prepare=_default_report, repeats=_one_round, fleet=True, plan=_collector_plan, outputs=True,
                      bundle_check=check_bundle_path, report_files=ALL_FILES, exports=True, baseline=True, analyses=True,
                      practical=True),
    "demo": Takes(lab=True, repeats=_one_round, plan=_collector_plan, verb="diagnose", outputs=True, report_files=ALL_FILES, analyses=True),
    "watch": Takes(repeats=_watch_rounds, fleet=True, plan=_collector_plan, outputs=True, exports=True, baseline=True, analyses=True, practical=True),
    "collect": Takes(plan=_collector_plan, bundle_check=check_output_paths),
    "probe": Takes(plan=_stream_plan),
    "load": Takes(plan=_load_plan, outputs=True, bundle_check=check_bundle_path, report_files=("json", "html"), exports=True,
                  priced=True, analyses=True),
    "sweep": Takes(sweeps=True, plan=_sweep_base, outputs=True, report_files=("json", "html"), exports=True, priced=True, analyses=True),
    "verify": Takes(prepare=_verify_targets, plan=_collector_plan, outputs=True, report_files=ALL_FILES, practical=True),
    "analyze": Takes(outputs=True, report_files=ALL_FILES, exports=True, region=True),
    "compare": Takes(practical=True),
}


def resolve(command: str, flags: Flags, file: FileConfig | None = None) -> RunSettings:
    """The settings of one ``command`` run from its ``flags`` and the config ``file`` (None: the
    ``--config`` flag's, else ``./llm-doctor.toml`` when present; ``demo`` passes an empty one, so a
    stray file never changes the lab). A bad value is a ``UsageError`` naming the flag or key."""
    cfg = load_config(flags.get("config")) if file is None else file
    takes = COMMANDS[command]
    if takes.prepare is not None:
        flags = takes.prepare(flags)
    return _resolve(command, MappingProxyType(dict(flags)), cfg, probe=not takes.lab)


def _rounds(run: RunSettings, takes: Takes) -> RunSettings:
    return replace(run, watch=takes.repeats(run.flags)) if takes.repeats is not None else run


def _sweep(run: RunSettings, takes: Takes) -> RunSettings:
    """What a sweep varies; a rate sweep's --max-concurrency caps the streams in flight."""
    if not takes.sweeps:
        return run
    flags, in_flight = run.flags, run.flags.get("max_concurrency")
    by = flags.get("by") or "concurrency"
    return replace(run, sweep=build_sweep_plan(flags, by, flags.get("max_rate") if by == "rate" else in_flight, flags.get("start")),
                   max_in_flight=int(in_flight or MAX_CONCURRENCY))


def _probe_plan(run: RunSettings, takes: Takes) -> RunSettings:
    """The probe plan and the engines as given. A concurrency sweep's --max-concurrency is its
    highest level, not a cap on its levels' plan."""
    if takes.plan is None:
        return run
    in_flight = None if run.sweep is not None and run.sweep.by != "rate" else run.flags.get("max_concurrency")
    engines = given_engines(run.flags, run.file)
    _one_unless_fleet(engines, run.command)
    config = takes.plan(run, in_flight, any(is_kubernetes(e) for e in engines))
    return replace(run, collect=config, engines=engines)


def _one_unless_fleet(engines: Sequence[str], command: str) -> None:
    """Refuse several ``engines`` where ``command`` probes one engine (``Takes.fleet``)."""
    if len(engines) > 1 and not COMMANDS[command].fleet:
        fleet = " and ".join(name for name, takes in COMMANDS.items() if takes.fleet)
        raise UsageError(f"several --engine are for {fleet}; {command} probes one engine")


def _outputs(run: RunSettings, takes: Takes) -> RunSettings:
    return replace(run, outputs=build_outputs(run.flags, run.file)) if takes.outputs else run


def _bundle(run: RunSettings, takes: Takes) -> RunSettings:
    if takes.bundle_check is not None:
        takes.bundle_check(run.bundle)
    return run


def _report_files(run: RunSettings, takes: Takes) -> RunSettings:
    check_output_paths(*(run.outputs.paths()[key] for key in takes.report_files))
    return run


def _bundle_dir(run: RunSettings, takes: Takes) -> RunSettings:
    if takes.sweeps:
        check_output_folder(run.bundle_dir, "--bundle-dir")
    return run


def _exports(run: RunSettings, takes: Takes) -> RunSettings:
    return replace(run, exports=check_export_options(run.flags)) if takes.exports else run


def _baseline(run: RunSettings, takes: Takes) -> RunSettings:
    return replace(run, baseline=check_baseline_folder(run.flags)) if takes.baseline else run


def _price(run: RunSettings, takes: Takes) -> RunSettings:
    return replace(run, price=build_price(run.flags)) if takes.priced else run


def _analysis(run: RunSettings, takes: Takes) -> RunSettings:
    if not takes.analyses:
        return run
    assert run.collect is not None
    analysis = build_analyze_options(run.flags, run.file, run.collect.run_fields.get("region"))
    return replace(run, analysis=analysis, registry=checked_registry(analysis))


def _practical(run: RunSettings, takes: Takes) -> RunSettings:
    return replace(run, practical=build_practical(run.flags, run.file)) if takes.practical else run


#: The steps in their one order (the module's docstring); each reads what its command ``Takes``.
STEPS: tuple[Callable[[RunSettings, Takes], RunSettings], ...] = (
    _rounds, _sweep, _probe_plan, _outputs, _bundle, _report_files, _bundle_dir, _exports, _baseline, _price, _analysis, _practical)
#: The steps a command with a lab (``demo``) takes only once its lab runs (``with_lab``).
AFTER_LAB = (_probe_plan, _report_files, _analysis)


def _resolve(command: str, flags: Flags, cfg: FileConfig, *, probe: bool) -> RunSettings:
    """``command``'s settings, step by step in the one order. ``probe``: take the steps that wait for
    a lab too (``demo``'s only once its lab runs)."""
    takes = COMMANDS[command]
    run = RunSettings(command=command, file=cfg, flags=flags, bundle=_path(flags.get("bundle")),
                      bundle_dir=_path(flags.get("bundle_dir")), region=flags.get("region") if takes.region else None)
    for step in STEPS:
        if probe or step not in AFTER_LAB:
            run = step(run, takes)
    return run


def _path(value: object) -> Path | None:
    return None if value is None else Path(str(value))


def lookup_targets(run: RunSettings) -> RunSettings:
    """``run`` with each ``k8s://namespace/service:port`` engine replaced by its Service's ready
    endpoints (a call to the Kubernetes API: the command calls this before it probes), checked
    as any engines are (several only for a fleet command, none with the inputs of one engine).
    Without such an engine, ``run`` itself."""
    if run.collect is None or not any(is_kubernetes(e) for e in run.engines):
        return run
    config = run.collect
    inputs = {"log": config.log, "model_dir": config.model_dir, "metrics_url": config.metrics_url, "prometheus": config.prometheus}
    engines = lookup_engines(run.engines)
    _one_unless_fleet(engines, run.command)
    fleet = check_fleet(engines, inputs)
    service = next(e for e in run.engines if is_kubernetes(e))
    config = replace(config, engine=fleet[0] if fleet else None, fleet=fleet if len(fleet) > 1 else [], kubernetes=service)
    warn_same_place(config)
    return replace(run, collect=config)


def for_saved(run: RunSettings, record: AnalysisRecord | None, region: str | None, *, flags: bool = True) -> RunSettings:
    """The settings a saved bundle is re-analysed with: its recorded analysis (``record``, what this
    installation knows of it) under an explicit ``--config`` and, with ``flags``, the run's flags
    (``doctor.settings.config_file.with_recorded_analysis``); ``region`` selects the budgets. Without ``flags``
    (a baseline) only the config file speaks besides the record."""
    given = run.flags if flags else MappingProxyType({"config": run.flags.get("config")})
    cfg = with_recorded_analysis(run.file, record, explicit=given.get("config") is not None)
    analysis = build_analyze_options(given, cfg, region)
    return replace(run, file=cfg, analysis=analysis, outputs=replace(run.outputs, fail_on=analysis.fail_on))


def with_default_outputs(flags: Flags, out_dir: Path) -> Flags:
    """``flags`` with each default report that no flag placed filled in under ``out_dir``.

    Each output on its own: ``--html x.html`` moves the page, and the JSON still goes to
    ``out_dir``, so ``--out-dir`` is never silently ignored.
    """
    return {**flags, **{key: out_dir / name for key, name in DEFAULT_OUTPUTS.items() if not flags.get(key)}}


def with_lab(run: RunSettings, lab: Flags, out_dir: Path) -> RunSettings:
    """``demo``'s settings once its lab runs: the lab's targets (``lab``, the flags that point
    ``diagnose`` at it) over the user's flags, the reports under ``out_dir`` unless placed elsewhere,
    resolved as ``diagnose``'s are."""
    flags = MappingProxyType({**with_default_outputs(run.flags, out_dir), **lab})
    return _resolve(run.command, flags, run.file, probe=True)
