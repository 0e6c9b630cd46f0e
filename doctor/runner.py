"""Run the selected checks over a bundle and assemble the report. Pure: never touches the network.

Each check gets only the evidence it declared (narrowing). A missing kind gives
``missing-evidence`` with the reason; a check that raises gives ``error`` and the run goes on.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from doctor import __version__
from doctor.check import CheckSpec, Fire, NotApplicable, Pass
from doctor.classify import Budgets, classify
from doctor.derive import DERIVED, Missing
from doctor.errors import UsageError
from doctor.evidence import RAW_KINDS, Bundle
from doctor.model import CheckResult, Finding, Outcome, Report
from doctor.registry import Registry, load_registry
from doctor.serial import to_jsonable

REPORT_VERSION = 1


@dataclass
class AnalyzeOptions:
    select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    settings: dict[str, dict[str, Any]] = field(default_factory=dict)  # check code/name -> option -> value
    budgets: Budgets = field(default_factory=Budgets)


class Evidence:
    """Lazy, memoised access to raw kinds and derived views of one bundle."""

    def __init__(self, bundle: Bundle) -> None:
        self.bundle = bundle
        self._cache: dict[str, Any] = {}
        self._missing: dict[str, str] = {}

    def get(self, kind: str) -> Any:
        """The evidence of that kind; raises ``Missing`` with the reason when there is none."""
        if kind in self._missing:
            raise Missing(self._missing[kind])
        if kind in self._cache:
            return self._cache[kind]
        try:
            value = self._resolve(kind)
        except Missing as exc:
            self._missing[kind] = str(exc)
            raise
        self._cache[kind] = value
        return value

    def maybe(self, kind: str) -> Any:
        try:
            return self.get(kind)
        except Missing:
            return None

    def _resolve(self, kind: str) -> Any:
        if kind == "bundle":
            return self.bundle
        if kind in RAW_KINDS:
            value = getattr(self.bundle, kind)
            if value is None:
                errors = [e.message for e in self.bundle.errors_for(kind) if e.fatal]
                raise Missing("; ".join(errors) if errors else f"no {kind} evidence was collected")
            return value
        if kind in DERIVED:
            try:
                return DERIVED[kind](self.bundle)
            except Missing:
                raise
            except Exception as exc:  # a parser bug must not take the run down
                raise Missing(f"could not derive {kind}: {type(exc).__name__}: {exc}") from exc
        raise Missing(f"unknown evidence kind {kind!r}")


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


def resolve_options(spec: CheckSpec, settings: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The check's thresholds: its defaults overridden by ``--set`` / config values (by code or name)."""
    options = dict(spec.options)
    for key in (spec.code, spec.name):
        for opt, raw in settings.get(key, {}).items():
            if opt not in options:
                raise UsageError(
                    f"{spec.code} ({spec.name}) has no option {opt!r}; options: {', '.join(options) or 'none'}"
                )
            options[opt] = coerce_option(spec.options[opt], raw)
    return options


def validate_settings(registry: Registry, settings: dict[str, dict[str, Any]]) -> None:
    """Fail before any check runs when a ``--set`` names an unknown check or option."""
    for key in settings:
        spec = registry.find(key)
        if spec is None:
            raise UsageError(f"--set (or a [checks.*] table of the config) names an unknown check {key!r} (see `llm-doctor checks`)")
        resolve_options(spec, settings)


def run_check(spec: CheckSpec, evidence: Evidence, settings: dict[str, dict[str, Any]]) -> CheckResult:
    """Run one check on only the evidence it declared; never raises (errors become results)."""
    result = CheckResult(code=spec.code, name=spec.name, outcome=Outcome.PASS, symptom=spec.symptom)
    start = time.perf_counter()
    try:
        args = []
        for kind in spec.requires:
            args.append(evidence.get(kind))
        kwargs: dict[str, Any] = {kind: evidence.maybe(kind) for kind in spec.optional}
        kwargs.update(resolve_options(spec, settings))
    except Missing as exc:
        result.outcome = Outcome.MISSING_EVIDENCE
        result.message = str(exc)
        return result
    try:
        out = spec.func(*args, **kwargs)
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
        views[kind] = to_jsonable(value) if value is not None else {"missing": evidence._missing.get(kind)}
    return views


def analyze(bundle: Bundle, options: AnalyzeOptions | None = None, registry: Registry | None = None) -> Report:
    """The offline half of ``diagnose``: checks, verdict and report from a bundle alone."""
    options = options or AnalyzeOptions()
    registry = registry or load_registry()
    validate_settings(registry, options.settings)
    evidence = Evidence(bundle)
    specs = registry.select(options.select, options.ignore)
    results = [run_check(spec, evidence, options.settings) for spec in specs]
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
