"""Run the selected checks over a bundle and assemble the report. Pure: never touches the network.

Each check gets only the evidence it declared (narrowing). A missing kind gives
``missing-evidence`` with the reason; a check that raises gives ``error`` and the run goes on.
The report's bundle carries the analysis settings used (``RunRecord.analysis``), so that a
saved report re-analyses to its own verdict.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from doctor import __version__
from doctor.checking.contract import CheckSpec, Fire, NotApplicable, Pass
from doctor.checking.registry import Registry, load_registry
from doctor.derive import DERIVED, Evidence, Missing
from doctor.evidence import RAW_KINDS, Bundle
from doctor.evidence.run import AnalysisRecord
from doctor.foundation.errors import UsageError
from doctor.foundation.serial import to_jsonable
from doctor.model import Budgets, CheckResult, FailOn, Finding, Outcome, Report
from doctor.verdict import classify

REPORT_VERSION = 1

#: Check options that are the run's latency budget under another name: they default to the
#: effective ``Budgets`` field, not to the declared default, so that a check's target and the
#: verdict's budget cannot disagree (``--set`` still overrides them for one check).
BUDGET_OPTIONS: dict[str, str] = {"ttft_target_s": "ttft_s", "tpot_target_s": "tpot_s"}


@dataclass
class AnalyzeOptions:
    """What an analysis is asked for besides the bundle: selection, per-check settings, budgets.

    Recorded in the report's bundle (``analysis_record``) so that a saved report re-analyses to its
    own verdict; ``fail_on`` rides along as provenance only.
    """

    select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    settings: dict[str, dict[str, Any]] = field(default_factory=dict)  # check code/name/alias -> option -> value
    budgets: Budgets = field(default_factory=Budgets)
    fail_on: FailOn = FailOn.FELT  # not used by the analysis; recorded as provenance (analyze takes the caller's)


def known_kinds() -> set[str]:
    """Every evidence kind a check may name: ``bundle``, the raw kinds and the derived views."""
    return {"bundle", *RAW_KINDS, *DERIVED}


def coerce_option(default: Any, raw: Any) -> Any:
    """Turn a ``--set`` string into the type of the option's default."""
    if not isinstance(raw, str) or isinstance(default, str) or default is None:
        return raw
    if isinstance(default, bool):
        if raw.lower() in ("1", "true", "yes", "on"):
            return True
        if raw.lower() in ("0", "false", "no", "off"):
            return False
        raise UsageError(f"expected a boolean, got {raw!r}")
    try:
        return type(default)(raw)
    except ValueError:
        raise UsageError(f"expected a {type(default).__name__}, got {raw!r}") from None


def settings_for(spec: CheckSpec, settings: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The values addressed to this check under any of its keys; a later key wins (``--set``
    is merged after the config file, so it comes later)."""
    out: dict[str, Any] = {}
    for key, values in settings.items():
        if spec.is_named(key):
            out.update(values)
    return out


def resolve_options(
    spec: CheckSpec, settings: dict[str, dict[str, Any]], budgets: Budgets | None = None
) -> dict[str, Any]:
    """The check's thresholds: its defaults (a budget for ``BUDGET_OPTIONS``) overridden by
    ``--set`` / config values (by code, name or alias)."""
    options = dict(spec.options)
    if budgets is not None:
        options.update({opt: getattr(budgets, BUDGET_OPTIONS[opt]) for opt in options if opt in BUDGET_OPTIONS})
    for opt, raw in settings_for(spec, settings).items():
        if opt not in options:
            raise UsageError(
                f"{spec.code} ({spec.name}) has no option {opt!r}; options: {', '.join(options) or 'none'}"
            )
        options[opt] = coerce_option(spec.options[opt], raw)
    return options


def known_analysis(record: AnalysisRecord | None, registry: Registry) -> tuple[AnalysisRecord | None, list[str]]:
    """The recorded analysis without what this installation lacks, and a warning for each drop.

    A report made where a plugin check was installed, or by a version whose check or option has
    since been renamed, must still re-analyse: what the user types is checked strictly, but a
    recorded key this installation does not know is dropped and said, not a usage error.
    """
    if record is None:
        return None, []
    warnings: list[str] = []

    def known(key: str) -> bool:
        ok = key.upper() == "ALL" or any(s.code.startswith(key.upper()) or s.is_named(key) for s in registry.checks)
        if not ok:
            warnings.append(f"the report's recorded analysis names {key!r}, which this llm-doctor lacks: left out")
        return ok

    settings: dict[str, dict[str, Any]] = {}
    for key, values in record.settings.items():
        spec = registry.find(key)
        if spec is None:
            known(key)
            continue
        kept = {opt: v for opt, v in values.items() if opt in spec.options}
        warnings += [f"the report's recorded analysis sets {spec.code}.{opt}, an option this llm-doctor lacks: left out"
                     for opt in values if opt not in spec.options]
        if kept:
            settings[key] = kept
    pruned = dataclasses.replace(record, settings=settings, select=[k for k in record.select if known(k)],
                                 ignore=[k for k in record.ignore if known(k)])
    return pruned, warnings


def validate_settings(registry: Registry, settings: dict[str, dict[str, Any]]) -> None:
    """Fail before any check runs when a ``--set`` names an unknown check or option."""
    for key in settings:
        spec = registry.find(key)
        if spec is None:
            raise UsageError(f"--set (or a [checks.*] table of the config) names an unknown check {key!r} (see `llm-doctor checks`)")
        resolve_options(spec, settings)


def run_check(
    spec: CheckSpec, evidence: Evidence, settings: dict[str, dict[str, Any]], budgets: Budgets | None = None
) -> CheckResult:
    """Run one check on only the evidence it declared; never raises (errors become results)."""
    result = CheckResult(code=spec.code, name=spec.name, outcome=Outcome.PASS, symptom=spec.symptom)
    start = time.perf_counter()
    try:
        args = []
        for kind in spec.requires:
            args.append(evidence.get(kind))
        # an absent kind leaves the parameter's default: None, or what says "absent" for it (UNIDENTIFIED)
        kwargs: dict[str, Any] = {kind: value for kind in spec.optional if (value := evidence.maybe(kind)) is not None}
        kwargs.update(resolve_options(spec, settings, budgets))
    except Missing as exc:
        result.outcome = Outcome.MISSING_EVIDENCE
        result.message = str(exc)
        return result
    try:
        out = spec(*args, **kwargs)  # a raised NotApplicable comes back as the result (CheckSpec.__call__)
    except Exception as exc:  # noqa: BLE001 - isolate a broken check: its error is a result, the run goes on
        result.outcome = Outcome.ERROR
        result.message = f"{type(exc).__name__}: {exc}"
        return result
    finally:
        result.duration_ms = (time.perf_counter() - start) * 1000
    if isinstance(out, Fire):
        result.outcome = Outcome.FINDING
        result.message = out.summary
        result.finding = Finding(
            code=spec.code,
            name=spec.name,
            title=out.title,
            severity=out.severity,
            symptom=spec.symptom,
            summary=out.summary,
            remediation=out.remediation,
            evidence=out.evidence,
            cause=spec.cause,
            felt=out.felt,
        )
    elif isinstance(out, NotApplicable):
        result.outcome = Outcome.NOT_APPLICABLE
        result.message = out.message
    elif isinstance(out, Pass):
        result.message = out.message
    else:
        result.outcome = Outcome.ERROR
        result.message = f"check returned {type(out).__name__}, expected Fire, Pass or NotApplicable"
    return result


def views_of(evidence: Evidence) -> dict[str, Any]:
    """The derived views, as JSON, for renderers (which never compute evidence themselves)."""
    views: dict[str, Any] = {}
    for kind in DERIVED:
        value = evidence.maybe(kind)
        views[kind] = to_jsonable(value) if value is not None else {"missing": evidence.missing_reason(kind)}
    return views


def analysis_record(options: AnalyzeOptions, registry: Registry) -> AnalysisRecord:
    """What to store so that re-analysing gives this verdict; settings keyed by check code."""
    settings = {spec.code: values for spec in registry.checks if (values := settings_for(spec, options.settings))}
    return AnalysisRecord(
        ttft_budget_s=options.budgets.ttft_s,
        tpot_budget_s=options.budgets.tpot_s,
        settings=settings,
        select=list(options.select),
        ignore=list(options.ignore),
        fail_on=options.fail_on.value,
    )


def recorded_budgets(bundle: Bundle) -> Budgets:
    """The budgets ``bundle`` was analysed with (``analysis_record`` read back), the defaults where
    none is recorded: what a load report judges its summary by, live or re-analysed alike."""
    record, defaults = bundle.run.analysis, Budgets()
    if record is None:
        return defaults
    return Budgets(ttft_s=defaults.ttft_s if record.ttft_budget_s is None else record.ttft_budget_s,
                   tpot_s=defaults.tpot_s if record.tpot_budget_s is None else record.tpot_budget_s)


def with_analysis(bundle: Bundle, options: AnalyzeOptions, registry: Registry) -> Bundle:
    """A shallow copy of ``bundle`` whose run record says how it is analysed (the input is untouched)."""
    run = dataclasses.replace(bundle.run, analysis=analysis_record(options, registry))
    return dataclasses.replace(bundle, run=run)


def analyze(bundle: Bundle, options: AnalyzeOptions | None = None, registry: Registry | None = None) -> Report:
    """The offline half of ``diagnose``: checks, verdict and report from a bundle alone.

    The report's bundle records ``options`` (``RunRecord.analysis``), so an HTML or JSON report
    written from it re-analyses with the same budgets, thresholds and selection.
    """
    options = options or AnalyzeOptions()
    registry = registry or load_registry()
    validate_settings(registry, options.settings)
    bundle = with_analysis(bundle, options, registry)
    evidence = Evidence(bundle)
    specs = registry.select(options.select, options.ignore)
    results = [run_check(spec, evidence, options.settings, options.budgets) for spec in specs]
    findings = sorted(
        (r.finding for r in results if r.finding is not None),
        key=lambda f: (-f.severity.rank, f.code),
    )
    verdict = classify(evidence, results, options.budgets)
    return Report(
        report_version=REPORT_VERSION,
        tool_version=__version__,
        generated_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        verdict=verdict,
        findings=findings,
        results=results,
        bundle=bundle,
        views=views_of(evidence),
        warnings=list(registry.warnings),
    )
