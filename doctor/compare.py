"""Two runs side by side: whether they may be compared at all, and what changed beyond noise.

Runs compare only when their run records agree on what shapes latency besides the change
under test (``LIKE_FIELDS``): a different region, request shape or concurrency moves every
percentile, and reading that as a model or engine improvement is the mistake scheduled checks
exist to avoid. Engine settings are compared key by key, because "change one setting at a time"
is what makes a difference attributable to a setting.

Noise is judged from the per-request samples both reports carry (their ``stream_stats`` view),
with a two-sided Mann-Whitney U test (normal approximation with tie and continuity
corrections): it assumes no distribution shape, which latency never has, and it compares the
whole distributions rather than one percentile that a single slow request can move. A fixed
percentage would call a 10 % change significant at n=3 and miss it at n=1000. A metric is
beyond noise at ``ALPHA``; a regression is such a change towards slower.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from doctor.evidence import RunRecord
from doctor.model import Report
from doctor.stats import quantile

#: Two-sided significance per metric. Strict because one comparison tests up to 8 metrics
#: (4 statistics x 2 paths) and a false "regression" pages someone.
ALPHA = 0.01
#: Below this many samples on either side, no difference can reach ALPHA: said, not tested.
MIN_SAMPLES = 6

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

#: metric -> what one request contributes to its noise test (see ``_request_samples``).
METRICS = ("TTFT", "TPOT", "ITL", "E2E")


@dataclass
class FieldDiff:
    field: str
    base: Any
    current: Any


@dataclass
class Row:
    """One metric of one path: percentiles side by side, and the test's answer."""

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
        return self.beyond_noise and self.slower is not None and self.slower > 0.5


@dataclass
class Comparison:
    unlike: list[FieldDiff] = field(default_factory=list)
    engine_changes: list[FieldDiff] = field(default_factory=list)  # one per engine setting that differs
    rows: list[Row] = field(default_factory=list)

    @property
    def attributable(self) -> bool:
        """At most one engine setting changed: a difference can be pinned on it."""
        return len(self.engine_changes) <= 1

    @property
    def regressions(self) -> list[Row]:
        return [r for r in self.rows if r.regression]


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


def mann_whitney(base: list[float], current: list[float]) -> tuple[float, float]:
    """Two-sided p-value and P(current > base) of the Mann-Whitney U test.

    Hand-written (a dozen lines) rather than taking scipy for one function. Ranks are averaged
    over ties, the variance is tie-corrected, and the normal approximation is continuity
    corrected, which errs towards "within noise" at small n: 6 against 6 fully separated gives
    p = 0.005 where the exact test gives 0.002.
    """
    n1, n2 = len(base), len(current)
    pooled = sorted([(v, 0) for v in base] + [(v, 1) for v in current])
    ranks = [0.0] * len(pooled)
    ties = 0.0
    i = 0
    while i < len(pooled):
        j = i
        while j + 1 < len(pooled) and pooled[j + 1][0] == pooled[i][0]:
            j += 1
        for k in range(i, j + 1):
            ranks[k] = (i + j) / 2 + 1
        ties += (j - i + 1) ** 3 - (j - i + 1)
        i = j + 1
    u_current = sum(r for r, (_, side) in zip(ranks, pooled, strict=True) if side) - n2 * (n2 + 1) / 2
    mean = n1 * n2 / 2
    n = n1 + n2
    variance = n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1)))
    if variance <= 0:  # every value equal: no evidence of any shift
        return 1.0, 0.5
    z = max(abs(u_current - mean) - 0.5, 0.0) / math.sqrt(variance)
    return math.erfc(z / math.sqrt(2)), u_current / (n1 * n2)


def _measured(report: Report, path: str) -> tuple[list[dict[str, Any]], list[float]]:
    """A path's measured, answered requests and its pooled gaps (as ``stream_stats`` counts them)."""
    stats = ((report.views.get("stream_stats") or {}).get("paths") or {}).get(path) or {}
    reqs = [r for r in stats.get("requests") or [] if not r.get("warmup") and r.get("outcome") == "ok"]
    return reqs, [g for r in reqs for g in r.get("gaps") or []]


def _request_samples(reqs: list[dict[str, Any]], metric: str) -> list[float]:
    """One value per request: the unit the test needs to be independent.

    ITL uses each request's median gap: the gaps of one request share its batch and its
    scheduler, so pooling them would count one slow request's hundred gaps as a hundred
    independent witnesses. The ITL percentiles shown are still the pooled gaps'.
    """
    key = {"TTFT": "ttft", "TPOT": "tpot", "ITL": "median_gap", "E2E": "e2e"}[metric]
    return [r[key] for r in reqs if r.get(key) is not None]


def request_samples(report: Report, path: str, metric: str) -> list[float]:
    """One value of ``metric`` (``METRICS``) per measured, answered request of ``path``: what the noise test takes."""
    return _request_samples(_measured(report, path)[0], metric)


def _p50_p90(values: list[float]) -> tuple[float | None, float | None]:
    vals = sorted(values)
    return (quantile(vals, 0.5), quantile(vals, 0.9)) if vals else (None, None)


def compare_reports(base: Report, current: Report) -> Comparison:
    """The comparison of two analysed runs, over the paths both probed."""
    comparison = Comparison(
        unlike=run_differences(base.bundle.run, current.bundle.run),
        engine_changes=engine_setting_changes(base.bundle.run, current.bundle.run),
    )
    base_paths = (base.views.get("stream_stats") or {}).get("paths") or {}
    current_paths = (current.views.get("stream_stats") or {}).get("paths") or {}
    for path in [p for p in base_paths if p in current_paths]:
        (b_reqs, b_gaps), (c_reqs, c_gaps) = _measured(base, path), _measured(current, path)
        for metric in METRICS:
            b_tested, c_tested = _request_samples(b_reqs, metric), _request_samples(c_reqs, metric)
            b_shown, c_shown = (b_gaps, c_gaps) if metric == "ITL" else (b_tested, c_tested)
            row = Row(path, metric, *_p50_p90(b_shown), *_p50_p90(c_shown), n_base=len(b_tested), n_current=len(c_tested))
            if min(len(b_tested), len(c_tested)) >= MIN_SAMPLES:
                row.p_value, row.slower = mann_whitney(b_tested, c_tested)
            comparison.rows.append(row)
    return comparison
