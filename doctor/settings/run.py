"""One run's settings: ``resolve(command, flags, file)`` builds them, in one place and one order.

Every command starts from the ``RunSettings`` its flags resolve to (flags over the config file over
the dataclass defaults, each value checked before anything is sent) and never changes them: a
derived copy is a ``dataclasses.replace``, made here by a named step:

- ``lookup_targets``: the endpoints of a ``k8s://`` engine, asked of the Kubernetes API (the one
  step that reaches the network, called by the command that probes);
- ``for_saved``: the analysis a saved bundle is re-read with (its recorded settings under an
  explicit ``--config`` and the flags), for ``analyze``, ``compare`` and a baseline;
- ``with_lab``: ``demo``'s targets, known once its lab runs.

The order is the same for every command; a command simply has no value for a step it does not
take: the config file; how the run repeats (``watch``, ``sweep``); the probe plan and its evidence
source; the report's outputs; the bundle; the report files; the metrics outputs; the baseline; the
price; the analysis and the check catalogue; what a comparison calls a regression. So a typo is a
usage error (exit 2) before the first request, and the flags are read by name here only.

Fastapi-cli resolves its settings the same way (``FastAPIConfig.resolve`` -> one validated model);
Lighthouse keeps one typed ``Settings`` per run.
"""

from __future__ import annotations

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
from doctor.settings.load_plan import MAX_CONCURRENCY, SweepPlan, build_load_config, build_price, build_sweep_plan
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

#: The commands that probe a target, and the verb their "nothing to ..." error uses.
PROBING = {"diagnose": "diagnose", "demo": "diagnose", "watch": "watch", "collect": "collect", "probe": "probe",
           "load": "load", "sweep": "sweep", "verify": "verify"}
#: The commands that write a report (``--json``, ``--html``, ``--md``, ``--format``, ``--fail-on``).
REPORTING = ("diagnose", "demo", "watch", "load", "sweep", "analyze", "verify")
#: The commands that analyse what they collect, and so check ``--select``/``--ignore``/``--set`` first.
ANALYSING = ("diagnose", "demo", "watch", "load", "sweep")
#: The commands that export metrics (``--metrics-textfile``, ``--pushgateway``).
EXPORTING = ("diagnose", "watch", "load", "sweep", "analyze")
#: The report files a command checks before it probes (``watch`` writes them each round).
CHECKED_FILES = {"diagnose": ("json", "html", "md"), "demo": ("json", "html", "md"), "analyze": ("json", "html", "md"),
                 "load": ("json", "html"), "sweep": ("json", "html"), "verify": ("json", "html", "md")}
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


def resolve(command: str, flags: Flags, file: FileConfig | None = None) -> RunSettings:
    """The settings of one ``command`` run from its ``flags`` and the config ``file`` (None: the
    ``--config`` flag's, else ``./llm-doctor.toml`` when present; ``demo`` passes an empty one, so a
    stray file never changes the lab). A bad value is a ``UsageError`` naming the flag or key."""
    cfg = load_config(flags.get("config")) if file is None else file
    if command == "verify":
        flags = _verify_targets(flags)
    if command == "diagnose" and not any(flags.get(key) for key in ("json", "html", "md")):
        flags = {**flags, "html": DEFAULT_REPORT}
    return _resolve(command, MappingProxyType(dict(flags)), cfg, probe=command != "demo")


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


def _resolve(command: str, flags: Flags, cfg: FileConfig, *, probe: bool) -> RunSettings:
    """The steps in their one order (the module's docstring); a command skips those it has no flags
    for. ``probe``: resolve the probe plan and the analysis (``demo`` only once its lab runs)."""
    run = RunSettings(command=command, file=cfg, flags=flags, bundle=_path(flags.get("bundle")),
                      bundle_dir=_path(flags.get("bundle_dir")), region=flags.get("region") if command == "analyze" else None)
    if command == "watch":
        run = replace(run, watch=build_watch_plan(
            flags.get("every") or "5m", flags.get("count"), flags.get("listen"), _path(flags.get("history")),
            WatchPlan.keep if flags.get("keep") is None else flags["keep"],
            retries=WatchPlan.retries if flags.get("retries") is None else flags["retries"],
            canary_engine=flags.get("canary_engine"), canary_gateway=flags.get("canary_gateway")))
    elif command in ("diagnose", "demo"):
        run = replace(run, watch=ONE_ROUND)
    in_flight = flags.get("max_concurrency")
    if command == "sweep":
        by = flags.get("by") or "concurrency"
        run = replace(run, sweep=build_sweep_plan(flags, by, flags.get("max_rate") if by == "rate" else in_flight, flags.get("start")),
                      max_in_flight=int(in_flight or MAX_CONCURRENCY))
        in_flight = in_flight if by == "rate" else None
    if command in PROBING and probe:
        run = _probe_plan(run, flags, cfg, in_flight)
    if command in REPORTING:
        run = replace(run, outputs=build_outputs(flags, cfg))
    if command in ("diagnose", "load"):
        check_bundle_path(run.bundle)
    elif command == "collect":
        check_output_paths(run.bundle)
    if command in CHECKED_FILES and (probe or command != "demo"):
        check_output_paths(*(run.outputs.paths()[key] for key in CHECKED_FILES[command]))
    if command == "sweep":
        check_output_folder(run.bundle_dir, "--bundle-dir")
    if command in EXPORTING:
        run = replace(run, exports=check_export_options(flags))
    if command in ("diagnose", "watch"):
        run = replace(run, baseline=check_baseline_folder(flags))
    if command in ("load", "sweep"):
        run = replace(run, price=build_price(flags))
    if command in ANALYSING and probe:
        assert run.collect is not None
        analysis = build_analyze_options(flags, cfg, run.collect.run_fields.get("region"))
        run = replace(run, analysis=analysis, registry=checked_registry(analysis))
    if command in ("diagnose", "watch", "compare", "verify"):
        run = replace(run, practical=build_practical(flags, cfg))
    return run


def _path(value: object) -> Path | None:
    return None if value is None else Path(str(value))


def _probe_plan(run: RunSettings, flags: Flags, cfg: FileConfig, in_flight: int | None) -> RunSettings:
    """The probe plan and the engines as given; refused when it would read nothing."""
    command = run.command
    engines = given_engines(flags, cfg)
    pending = any(is_kubernetes(e) for e in engines)
    if command in ("load", "sweep"):
        config = build_load_config(flags, cfg, command, in_flight, pending=pending)
    else:
        config = build_collect_config(flags, cfg, command)
    if command == "probe":  # only the stream probe: no log, Prometheus, host, GPU or /metrics
        if not config.targets() and not pending:
            raise UsageError("give --engine and/or --gateway")
        config = replace(config, log=None, prometheus=None, gpu=False, host=False, metrics=False)
    elif command not in ("load", "sweep") and not (config.targets() or pending or config.log or config.prometheus):
        raise UsageError(f"nothing to {PROBING[command]}: give --engine and/or --gateway, --log, or --prometheus")
    return replace(run, collect=config, engines=engines)


def lookup_targets(run: RunSettings) -> RunSettings:
    """``run`` with each ``k8s://namespace/service:port`` engine replaced by its Service's ready
    endpoints (a call to the Kubernetes API: the command calls this before it probes), checked
    as any engines are (several only for a fleet command, none with the inputs of one engine).
    Without such an engine, ``run`` itself."""
    if run.collect is None or not any(is_kubernetes(e) for e in run.engines):
        return run
    config = run.collect
    inputs = {"log": config.log, "model_dir": config.model_dir, "metrics_url": config.metrics_url, "prometheus": config.prometheus}
    fleet = check_fleet(lookup_engines(run.engines), inputs, run.command)
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
