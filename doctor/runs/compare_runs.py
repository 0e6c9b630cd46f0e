"""Two runs side by side: whether they may be compared at all, and what changed enough to matter.

Runs compare only when their run records agree on what shapes latency besides the change
under test (``LIKE_FIELDS``): a different region, request shape or concurrency moves every
percentile, and reading that as a model or engine improvement is the mistake scheduled checks
exist to avoid. Engine settings are compared key by key, because "change one setting at a time"
is what makes a difference attributable to a setting.

A difference of one metric on one path is a regression only when it is both (``judge``):

- **beyond noise**: a two-sided Mann-Whitney U test over the per-request samples both reports
  carry (their ``stream_stats`` view) at ``ALPHA``. It assumes no distribution shape, which
  latency never has, and it compares whole distributions rather than one percentile that a
  single slow request can move. Exact for small runs (``mann_whitney``), where the normal
  approximation errs towards "within noise", so that 4 requests a side which all moved
  several-fold are a regression, not untested;
- **practical**: the typical request moved by more than ``Practical``'s thresholds, relative
  *and* absolute. A deterministic server makes a 0.25 ms change "significant" at a dozen
  requests, and nobody should be paged for it; the shift is the Hodges-Lehmann estimate, the median of every
  current-minus-base difference, which is the shift the U test is about.

A shift large enough to matter that the test cannot tell from noise (or samples too few to
test at all) is *undecided*, never a silent "no regression": ``Row.needed`` says about how many
requests per run would settle it, and ``decision_code`` exits 2 ("could not decide").

The statistics themselves (the U test, the shift, the sample sizes) are in
``doctor.runs.rank_tests``; this module holds the rule that reads them.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from doctor.derive.stream_stats import RequestStats, StreamStats
from doctor.derive.view_json import view
from doctor.evidence import ProbePath, RunRecord
from doctor.exit_codes import ExitCode
from doctor.foundation.stats import quantile
from doctor.foundation.strenum import StrEnum
from doctor.model import Practical, Report
from doctor.runs.rank_tests import ALPHA, SMALLEST_TESTABLE, exact_test, hodges_lehmann, mann_whitney, needed_requests, testable

#: Run-record fields that must agree, as the report names them.
LIKE_FIELDS: dict[str, Callable[[RunRecord], Any]] = {
    "model": lambda r: r.model,
    "revision": lambda r: r.model_revision,
    "engine version": lambda r: r.vllm_version,
    "route": lambda r: r.route,
    "request shape": lambda r: {"prompt_tokens": r.prompt_tokens, "max_tokens": r.max_tokens, "streaming": r.streaming,
                                "lengths": r.lengths},
    "concurrency": lambda r: r.concurrency,
    "scenario": lambda r: r.arrival if r.scenario is None else f"{r.scenario}, {r.arrival}",
    "provider": lambda r: r.provider,
    "region": lambda r: r.region,
    "client location": lambda r: r.client_location,
}

#: The ``LIKE_FIELDS`` that say where and how a run measured rather than what it measured: a
#: baseline is kept per value of these (``baseline_key``), so a run is only ever judged against
#: its own region's, provider's and client location's latency at its own request shape. What is
#: left (model, revision, engine version and config) is what a baseline exists to watch change.
PLACE_AND_SHAPE = ("provider", "region", "client location", "route", "request shape", "concurrency", "scenario")

#: Engine-config facts that change on every launch without being a setting.
VOLATILE_ENGINE_KEYS = frozenset({"host", "port", "init_engine_s", "model_tag"})

#: What one request contributes to each metric's noise test. ITL uses each request's median gap:
#: the gaps of one request share its batch and its scheduler, so pooling them would count one slow
#: request's hundred gaps as a hundred independent witnesses. The ITL percentiles shown are still
#: the pooled gaps'.
SAMPLE: dict[str, Callable[[RequestStats], float | None]] = {
    "TTFT": lambda r: r.ttft,
    "TPOT": lambda r: r.tpot,
    "ITL": lambda r: r.median_gap,
    "E2E": lambda r: r.e2e,
}

#: The metrics a comparison judges, in the order its rows show them.
METRICS = tuple(SAMPLE)


class Decision(StrEnum):
    """What one row's difference is, by ``judge``."""

    REGRESSION = "regression"  # slower beyond noise, by more than the practical threshold
    IMPROVEMENT = "improvement"  # faster beyond noise, by more than the practical threshold
    UNDER_THRESHOLD = "under threshold"  # beyond noise, but smaller than anyone should act on
    NOISE = "within noise"  # no shift the test can see, and none seen large enough to matter
    UNDECIDED = "undecided"  # a slowdown large enough to matter that the samples cannot confirm, or too few to test
    UNMEASURED = "not measured"  # neither run has a value (TPOT of one-token answers)


@dataclass
class FieldDiff:
    """One field that differs between two runs: a run-record field (``LIKE_FIELDS``) or an engine
    setting, with the base and current values as printed.
    """

    field: str
    base: Any
    current: Any


@dataclass
class Row:
    """One metric of one path: percentiles side by side, the test's answer and the decision."""

    path: str
    metric: str
    base_p50: float | None
    base_p90: float | None
    current_p50: float | None
    current_p90: float | None
    n_base: int
    n_current: int
    p_value: float | None = None  # None: too few samples to test
    slower: float | None = None  # P(a current request is slower than a base one); 0.5 = no shift
    exact: bool = False  # p_value from the exact distribution, not the normal approximation
    shift: float | None = None  # Hodges-Lehmann: the median current-minus-base difference, seconds
    shift_relative: float | None = None  # ``shift`` over the base run's median
    threshold: float | None = None  # the shift that counts (``Practical.floor``), seconds
    decision: Decision = Decision.UNMEASURED
    needed: int | None = None  # UNDECIDED: about how many requests per run would decide it

    @property
    def change(self) -> float | None:
        """Relative change of the p90 (current / base - 1)."""
        if self.base_p90 is None or self.current_p90 is None or self.base_p90 == 0:
            return None
        return self.current_p90 / self.base_p90 - 1

    @property
    def beyond_noise(self) -> bool:
        return self.p_value is not None and self.p_value < ALPHA

    @property
    def regression(self) -> bool:
        return self.decision is Decision.REGRESSION

    @property
    def label(self) -> str:
        """How a sentence names the row: ``TTFT (direct)``."""
        return f"{self.metric} ({self.path})"


@dataclass
class Comparison:
    """What ``compare``, ``--baseline`` and a canary print and exit on: the run-record fields that make the
    runs unlike (any refuses the comparison unless allowed), the engine settings that changed, and
    one judged ``Row`` per metric and path.
    """

    unlike: list[FieldDiff] = field(default_factory=list)
    engine_changes: list[FieldDiff] = field(default_factory=list)  # one per engine setting that differs
    rows: list[Row] = field(default_factory=list)
    practical: Practical = field(default_factory=Practical)

    @property
    def attributable(self) -> bool:
        """At most one engine setting changed: a difference can be pinned on it."""
        return len(self.engine_changes) <= 1

    @property
    def regressions(self) -> list[Row]:
        return [r for r in self.rows if r.decision is Decision.REGRESSION]

    @property
    def undecided(self) -> list[Row]:
        return [r for r in self.rows if r.decision is Decision.UNDECIDED]


def decision_code(comparison: Comparison) -> ExitCode:
    """The one exit rule of a comparison (``compare``, ``--baseline``, a canary): 1 for a
    regression, else 2 when a row is undecided, else 0."""
    if comparison.regressions:
        return ExitCode.SYMPTOM
    return ExitCode.NO_DIAGNOSIS if comparison.undecided else ExitCode.HEALTHY


def engine_setting_changes(base: RunRecord, current: RunRecord) -> list[FieldDiff]:
    """Each engine setting that differs, once: the engine version, then the config's keys.

    ``non_default_args`` repeats most parsed keys as the flags were typed; its entries count
    only where no parsed key carries them, so one changed flag is one change, not two.
    """
    changes = []
    if base.vllm_version != current.vllm_version:
        changes.append(FieldDiff("engine version", base.vllm_version, current.vllm_version))
    b, c = _engine_settings(base.engine_config), _engine_settings(current.engine_config)
    changes += [FieldDiff(key, b.get(key), c.get(key)) for key in sorted(b.keys() | c.keys()) if b.get(key) != c.get(key)]
    return changes


def _engine_settings(config: dict[str, Any]) -> dict[str, Any]:
    flags = config.get("non_default_args")
    settings = {k: v for k, v in (flags.items() if isinstance(flags, dict) else ()) if k not in config}
    settings.update({k: v for k, v in config.items() if k != "non_default_args"})
    return {k: v for k, v in settings.items() if k not in VOLATILE_ENGINE_KEYS}


def run_differences(base: RunRecord, current: RunRecord) -> list[FieldDiff]:
    """Every ``LIKE_FIELDS`` entry that differs, plus "engine config" when any setting does."""
    diffs = [FieldDiff(name, get(base), get(current)) for name, get in LIKE_FIELDS.items() if get(base) != get(current)]
    config = [d for d in engine_setting_changes(base, current) if d.field != "engine version"]
    if config:
        diffs.append(FieldDiff("engine config", {d.field: d.base for d in config}, {d.field: d.current for d in config}))
    return diffs


def baseline_key(run: RunRecord) -> str:
    """A file-name-safe key of the run's ``PLACE_AND_SHAPE``: the region (readable), then a digest of all."""
    values = json.dumps({name: LIKE_FIELDS[name](run) for name in PLACE_AND_SHAPE}, sort_keys=True, default=str)
    region = re.sub(r"[^A-Za-z0-9_.-]+", "_", run.region or "no-region")[:64]
    return f"{region}-{hashlib.sha256(values.encode('utf-8')).hexdigest()[:16]}"


def judge(row: Row, base: list[float], current: list[float], practical: Practical) -> None:
    """Fill ``row``'s test, shift and ``decision`` from the two runs' per-request samples: the
    one rule of ``compare``, ``--baseline`` and a canary (see the module's docstring)."""
    if not base and not current:
        row.decision = Decision.UNMEASURED
        return
    if not base or not current:  # one run has values the other lacks: nothing to test them against
        row.decision, row.needed = Decision.UNDECIDED, SMALLEST_TESTABLE
        return
    median = quantile(sorted(base), 0.5)
    row.shift = hodges_lehmann(base, current)
    row.shift_relative = row.shift / median if median else None
    row.threshold = practical.floor(row.metric, median)
    p_value, row.slower = mann_whitney(base, current)
    if not testable(len(base), len(current)):  # sized for the shift seen when it matters, else to test at all
        row.decision = Decision.UNDECIDED
        sized = needed_requests(row.slower) if row.shift > row.threshold else None
        row.needed = max(sized or 0, SMALLEST_TESTABLE)
        return
    row.p_value, row.exact = p_value, exact_test(len(base), len(current))
    if row.beyond_noise:
        if row.slower > 0.5 and row.shift > row.threshold:
            row.decision = Decision.REGRESSION
        elif row.slower < 0.5 and -row.shift > row.threshold:
            row.decision = Decision.IMPROVEMENT
        else:
            row.decision = Decision.UNDER_THRESHOLD
    elif row.shift > row.threshold:
        row.decision, row.needed = Decision.UNDECIDED, needed_requests(row.slower)
    else:
        row.decision = Decision.NOISE


def _measured(stats: StreamStats | None, path: ProbePath) -> tuple[list[RequestStats], list[float]]:
    """A path's measured, answered requests and its pooled gaps (as ``stream_stats`` counts them)."""
    path_stats = stats.paths.get(path) if stats else None
    reqs = [r for r in path_stats.requests if not r.warmup and r.outcome == "ok"] if path_stats else []
    return reqs, [g for r in reqs for g in r.gaps]


def _request_samples(reqs: list[RequestStats], metric: str) -> list[float]:
    """One value per request (``SAMPLE``): the unit the test needs to be independent."""
    return [value for r in reqs if (value := SAMPLE[metric](r)) is not None]


def request_samples(report: Report, path: ProbePath, metric: str) -> list[float]:
    """One value of ``metric`` (``METRICS``) per measured, answered request of ``path``: what the noise test takes."""
    return _request_samples(_measured(view(report, "stream_stats")[0], path)[0], metric)


def p50_p90(values: list[float]) -> tuple[float | None, float | None]:
    """The median and 90th percentile a row shows (None, None without values)."""
    vals = sorted(values)
    return (quantile(vals, 0.5), quantile(vals, 0.9)) if vals else (None, None)


def compare_reports(base: Report, current: Report, practical: Practical | None = None) -> Comparison:
    """The comparison of two analysed runs, over the paths both probed, each row ``judge``d
    against ``practical`` (the defaults unless the flags or the config file set them)."""
    comparison = Comparison(
        unlike=run_differences(base.bundle.run, current.bundle.run),
        engine_changes=engine_setting_changes(base.bundle.run, current.bundle.run),
        practical=practical or Practical(),
    )
    base_stats, current_stats = view(base, "stream_stats")[0], view(current, "stream_stats")[0]
    base_paths = base_stats.paths if base_stats else {}
    current_paths = current_stats.paths if current_stats else {}
    for path in [p for p in base_paths if p in current_paths]:
        (b_reqs, b_gaps), (c_reqs, c_gaps) = _measured(base_stats, path), _measured(current_stats, path)
        for metric in METRICS:
            b_tested, c_tested = _request_samples(b_reqs, metric), _request_samples(c_reqs, metric)
            b_shown, c_shown = (b_gaps, c_gaps) if metric == "ITL" else (b_tested, c_tested)
            row = Row(path, metric, *p50_p90(b_shown), *p50_p90(c_shown), n_base=len(b_tested), n_current=len(c_tested))
            judge(row, b_tested, c_tested, comparison.practical)
            comparison.rows.append(row)
    return comparison
