"""The SLO knee of a load sweep, why it is where it is, and the setting that follows (pure).

A sweep measures levels of offered load (closed-loop concurrency 1, 2, 4, ..., or Poisson
rates) and asks, at each, whether the TTFT p90 and the TPOT p90 are within their budgets (the
early-stopping bound once a level has the 64 requests it needs, else the p90: MLPerf's rule,
``doctor.derive.load_summary``). ``Ladder`` says which level to run next: doubling until the
first level over budget (the sweep stops early past the knee), then bisection between the
last level within and the first over, to one stream (or ``RATE_TOLERANCE`` of a rate).

The knee is the highest level within both budgets below the first level over; a level whose
client was the bottleneck (``client_bottleneck``: the client, not the server, set its timings) is
never the knee, and counts as over for the bisection, so the knee is always one the server
earned. The budget that *binds* is the one the first level over exceeds by the larger factor.

Why: the engine's own evidence at that first level over (``EngineFacts`` from its /metrics
scrapes and startup log): requests waiting while ``running`` sat at ``max_num_seqs`` (the
engine's admission limit is the knee), KV-cache pressure and preemptions, TPOT growing with
batch depth, or TTFT growing with the streams while no request waited (compute: each prefill
shares the engine's steps with the running decodes; seen on a real vLLM on 2 CPU cores, whose
knee was 3 streams of 4 slots). The recommendation (seed 004: raise ``max_num_seqs`` to the edge of the
budget, no further) is ``max_num_seqs`` = the knee when the engine's limit is what binds or no
engine evidence says otherwise (marked inferred then), and capacity, more replicas, when the
knee sits below the engine's current limit because the KV cache or the GPU's compute ran out:
a lower limit would only move the queue from the engine to the client.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any

from doctor.bundle import SWEEP_KIND
from doctor.checklib.engine_settings import max_num_seqs_in_use
from doctor.derive import Evidence
from doctor.derive.load_summary import LoadSummary
from doctor.evidence import Bundle, ClientHealth
from doctor.foundation.serial import to_jsonable
from doctor.model import Budgets
from doctor.probes.selfcheck import CPU_LIMIT_PERCENT

#: A rate bisection stops when the first rate over is within this fraction of the last one within.
RATE_TOLERANCE = 0.1
#: TPOT at the first level over at least this multiple of the lightest level's: batch depth raised it.
DEPTH_GROWTH = 1.5
#: KV usage at or above this is pressure (as LD201 reads it).
KV_PRESSURE = 0.9


@dataclass
class EngineFacts:
    """What the engine said during one level; ``None`` where it did not say."""

    running_max: float | None = None
    waiting_max: float | None = None
    kv_usage_max: float | None = None
    preemptions: float | None = None
    max_num_seqs: int | None = None
    max_num_seqs_source: str | None = None
    max_num_seqs_inferred: bool = False
    missing: str | None = None  # why there is no /metrics window

    @property
    def known(self) -> bool:
        return self.missing is None


def engine_facts(bundle: Bundle) -> EngineFacts:
    """The level's /metrics window and the engine's ``max_num_seqs`` (log, run record, or inferred)."""
    evidence = Evidence(bundle)
    window = evidence.maybe("metrics_window")
    setting = max_num_seqs_in_use(evidence.maybe("log_facts"), bundle.run, window)
    out = EngineFacts()
    if setting is not None and not setting.lower_bound:
        out.max_num_seqs, out.max_num_seqs_source, out.max_num_seqs_inferred = int(setting.value), setting.source, setting.inferred
    if window is None:
        out.missing = evidence.missing_reason("metrics_window") or "no /metrics window"
        return out
    out.running_max = window.running.max if window.running is not None else None
    out.waiting_max = window.waiting.max if window.waiting is not None else None
    out.kv_usage_max = window.kv_usage.max if window.kv_usage is not None else None
    out.preemptions = window.preemptions
    return out


@dataclass
class Level:
    """One measured level: its load (``value``: concurrency or rate), summary and engine facts."""

    value: float
    summary: LoadSummary
    engine: EngineFacts
    findings: list[dict[str, str]] = field(default_factory=list)  # code, name, title of what fired
    interrupted: bool = False

    client: str | None = None  # why the client was the bottleneck (``client_bottleneck``); None: it kept up
    bundle: str | None = None  # where the level's evidence bundle was kept (``sweep --bundle-dir``)

    @property
    def suspect(self) -> bool:
        return self.client is not None

    def over(self, budgets: Budgets) -> dict[str, float]:
        """Budget name -> judged p90 / budget, for each budget this level exceeds (``LoadSummary.over``)."""
        return self.summary.over(budgets)

    def within(self, budgets: Budgets) -> bool:
        """Within both budgets, as measured by a client that kept up, over a whole level."""
        return not self.over(budgets) and not self.suspect and not self.interrupted


#: The client's event-loop lag p99 may be at most this share of the TTFT budget: each token is
#: stamped up to that late, so beyond it the stamps, not the server, could move a p90 a quarter of
#: the way to its budget and decide the verdict. (The self-check's own 10 ms limit marks far more:
#: on a shared 2-core host the loop lags 10-30 ms whenever a neighbour compiles.)
LAG_SHARE_OF_BUDGET = 0.25


def client_bottleneck(client: ClientHealth, budgets: Budgets) -> str | None:
    """Why the client, not the server, set a level's timings: its CPU saturated a core, or its
    event loop lagged (p99) by more than ``LAG_SHARE_OF_BUDGET`` of the TTFT budget. None when it
    kept up. A client sharded over worker processes is judged per worker (``ClientHealth.shards``):
    one saturated worker delays every stamp of its streams, whatever the others did. A one-off
    freeze is not enough: freezes are taken out of every latency already
    (``doctor.derive.stream_stats``), and on a shared host they come and go."""
    for shard, health in enumerate(client.shards):
        why = client_bottleneck(health, budgets)
        if why is not None:
            return f"client worker {shard} of {len(client.shards)}: {why.removeprefix('client ')}"
    if client.shards:
        return None
    if client.cpu_percent_max is not None and client.cpu_percent_max >= CPU_LIMIT_PERCENT:
        return f"client CPU {client.cpu_percent_max:.0f} % of a core"
    limit_ms = LAG_SHARE_OF_BUDGET * budgets.ttft_s * 1000
    if client.loop_lag_p99_ms is not None and client.loop_lag_p99_ms > limit_ms:
        return (f"client event-loop lag p99 {client.loop_lag_p99_ms:.1f} ms > {limit_ms:.0f} ms "
                f"({LAG_SHARE_OF_BUDGET:.0%} of the TTFT budget)")
    return None


class Ladder:
    """Which level to measure next: doubling from ``start`` to ``maximum``, then bisection."""

    def __init__(self, by: str, start: float, maximum: float) -> None:
        self.by, self.start, self.maximum = by, start, maximum

    def _rounded(self, value: float) -> float:
        return float(int(value)) if self.by == "concurrency" else float(f"{value:.3g}")

    def next(self, levels: list[Level], budgets: Budgets) -> float | None:
        """The next level, or None when the knee is found, the first level is over, or ``maximum`` passed."""
        if not levels:
            return self.start
        if any(level.interrupted for level in levels):
            return None
        tried = {level.value for level in levels}
        knee = find_knee(levels, budgets)
        if knee.first_over is None:
            top = max(tried)
            return None if top >= self.maximum else min(self._rounded(top * 2), self.maximum)
        if knee.value is None:
            return None  # the lightest level is already over: no knee
        lo, hi = knee.value, knee.first_over
        done = hi - lo <= 1 if self.by == "concurrency" else hi <= lo * (1 + RATE_TOLERANCE)
        middle = self._rounded((lo + hi) / 2)
        return None if done or middle in tried or not lo < middle < hi else middle


@dataclass
class Knee:
    """The highest level within both budgets, and what the first level over broke."""

    value: float | None
    binding: str | None = None  # "ttft" | "tpot" | "client" | "interrupted": what the first level over broke first
    first_over: float | None = None


def find_knee(levels: list[Level], budgets: Budgets) -> Knee:
    """The knee so far: the highest level within budget below the lightest level that is not."""
    failing = sorted((lv for lv in levels if not lv.within(budgets)), key=lambda lv: lv.value)
    hi = failing[0] if failing else None
    passing = [lv.value for lv in levels if lv.within(budgets) and (hi is None or lv.value < hi.value)]
    knee = Knee(max(passing) if passing else None, first_over=hi.value if hi else None)
    if hi is not None:
        over = hi.over(budgets)
        knee.binding = "interrupted" if hi.interrupted else max(over, key=lambda k: over[k]) if over else "client"
    return knee


@dataclass
class Recommendation:
    """The one setting to change (JSON ``recommendation``)."""

    setting: str  # "max_num_seqs" | "replicas"
    suggested: int | None
    current: int | None = None
    why: list[str] = field(default_factory=list)
    inferred: bool = False  # no engine evidence backs it: the knee alone


def causes(levels: list[Level], knee: Knee, budgets: Budgets) -> list[tuple[str, str]]:
    """(cause, sentence) pairs that the first level over's engine evidence shows, strongest first:
    ``queue`` (waiting while running sat at max_num_seqs), ``kv`` (pressure, preemptions),
    ``batch-depth`` (TPOT grew with the batch, when TPOT binds), ``prefill`` (TTFT grew with the streams
    while none waited, when TTFT binds: compute), ``client`` (the client could not keep up)."""
    over = next((lv for lv in levels if lv.value == knee.first_over), None)
    if over is None:
        return []
    out: list[tuple[str, str]] = []
    e = over.engine
    if over.suspect:
        out.append(("client", f"the client itself was the bottleneck at this level ({over.client}): its timings are not the server's"))
    limit = e.max_num_seqs
    if e.waiting_max and e.waiting_max > 0 and limit is not None and e.running_max is not None and e.running_max >= limit:
        out.append(("queue", (f"requests queued in the engine (waiting up to {e.waiting_max:g}) while running sat at "
                              f"{e.running_max:g} = max_num_seqs {limit} ({e.max_num_seqs_source}): the queue adds to TTFT")))
    if (e.preemptions or 0) > 0 or (e.kv_usage_max or 0) >= KV_PRESSURE:
        kv = f"KV cache up to {e.kv_usage_max * 100:.0f} %" if e.kv_usage_max is not None else "the KV cache"
        out.append(("kv", f"{kv}, {e.preemptions or 0:g} preemption(s): the cache, not the sequence limit, runs out"))
    lightest = min(levels, key=lambda lv: lv.value)
    base, top = lightest.summary.tpot_p90_s, over.summary.tpot_p90_s
    if knee.binding == "tpot" and base and top and top >= DEPTH_GROWTH * base and lightest is not over:
        out.append(("batch-depth", (f"TPOT p90 grew from {base * 1000:.1f} ms at {lightest.value:g} to {top * 1000:.1f} ms "
                                    f"at {over.value:g} ({top / base:.1f}x): each decode step carries a deeper batch")))
    first, last = lightest.summary.ttft_p90_s, over.summary.ttft_p90_s
    unqueued = e.waiting_max is not None and e.waiting_max == 0
    if (knee.binding == "ttft" and unqueued and first and last and last >= DEPTH_GROWTH * first
            and lightest is not over):
        out.append(("prefill", (f"TTFT p90 grew from {first * 1000:.0f} ms at {lightest.value:g} to {last * 1000:.0f} ms "
                                f"at {over.value:g} ({last / first:.1f}x) with no request waiting in the engine: each new "
                                "prompt's prefill shares the engine's steps with the running decodes (compute), "
                                "before the sequence limit is reached")))
    if not e.known:
        out.append(("unknown", f"no engine evidence at this level ({e.missing}): the cause is not measured"))
    return out


def recommend(levels: list[Level], knee: Knee, budgets: Budgets, by: str, maximum: float) -> Recommendation:
    """``max_num_seqs`` = the knee (concurrency; at a rate, the streams running at the knee), or
    replicas when the knee is below the engine's current limit because of KV or compute."""
    found = causes(levels, knee, budgets)
    names = [name for name, _ in found]
    at_knee = next((lv for lv in levels if lv.value == knee.value), None)
    current = next((lv.engine.max_num_seqs for lv in levels if lv.engine.max_num_seqs is not None), None)
    why = [sentence for _, sentence in found]
    if knee.value is None or at_knee is None:
        lightest = min((lv.value for lv in levels), default=None)
        head = f"even the lightest level ({lightest:g}) is over budget: add capacity, or relax the budget"
        return Recommendation("replicas", None, current, [head, *why], inferred=not names)
    streams = _streams_at(at_knee, by)
    inferred = not any(lv.engine.known for lv in levels)
    compute = "batch-depth" in names or "prefill" in names
    if current is not None and streams < current and ("kv" in names or compute) and "queue" not in names:
        need = math.ceil(maximum / knee.value) if knee.value else None
        head = (f"the knee ({knee.value:g}) is below max_num_seqs {current}: the engine runs out of "
                f"{'KV cache' if 'kv' in names else 'compute'} first, so serving {maximum:g} within budget takes "
                f"{need} replica(s) of this one (or max_num_seqs {streams} to keep each within budget)")
        return Recommendation("replicas", need, current, [head, *why])
    if "queue" in names and current is not None and streams >= current and knee.binding == "ttft":
        raised = _raise_limit(levels, knee, budgets, current)
        if raised is not None:
            return Recommendation("max_num_seqs", raised[0], current, [raised[1], *why])
    head = (f"the knee is {knee.value:g} {'streams' if by == 'concurrency' else 'requests/s'}: set max_num_seqs to "
            f"{streams} so the engine admits no more than it can serve within budget")
    if current is not None and streams > current:
        head += f" (the engine's limit {current} admitted fewer than the budgets allow)"
    return Recommendation("max_num_seqs", streams, current, [head, *why], inferred=inferred)


def _raise_limit(levels: list[Level], knee: Knee, budgets: Budgets, current: int) -> tuple[int, str] | None:
    """When the engine's own limit is the knee (requests queue at it, TTFT binds) and TPOT has
    headroom, the seed's advice: raise ``max_num_seqs`` towards the TPOT budget. TPOT grows about
    linearly with batch depth, so a line through the levels within budget says where it meets the
    budget; the step is at most a doubling, and the sweep is to be run again after it."""
    points = [(lv.value, lv.summary.tpot_p90_s) for lv in levels
              if knee.value is not None and lv.value <= knee.value and lv.summary.tpot_p90_s is not None]
    if len({x for x, _ in points}) < 2:
        return None
    slope, intercept = statistics.linear_regression([x for x, _ in points], [y for _, y in points])
    tpot = next(y for x, y in points if x == knee.value)
    reach = math.floor((budgets.tpot_s - intercept) / slope) if slope > 0 else None
    suggested = min(reach, 2 * current) if reach is not None else 2 * current
    if suggested <= current:
        return None
    fit = (f"TPOT p90 grows {slope * 1000:.2f} ms per stream and meets the {budgets.tpot_s * 1000:.0f} ms budget near "
           f"{reach} streams" if reach is not None else "TPOT p90 does not grow with the batch here")
    return suggested, (f"the engine's limit is the knee: requests queue at max_num_seqs {current} while TPOT p90 is "
                       f"{tpot * 1000:.1f} ms of {budgets.tpot_s * 1000:.0f} ms; {fit}: raise max_num_seqs to {suggested} "
                       "(at most a doubling per step) and sweep again")


def _streams_at(level: Level, by: str) -> int:
    """Streams in flight at a level: its concurrency, or at a rate the engine's running peak,
    else Little's law (rate x mean time in the system)."""
    if by == "concurrency":
        return int(level.value)
    if level.engine.running_max:
        return int(level.engine.running_max)
    e2e = level.summary.e2e_p50_s or 0.0
    return max(1, math.ceil(level.value * e2e))


def level_dict(level: Level, by: str, budgets: Budgets) -> dict[str, Any]:
    """One ``levels[]`` entry of the JSON document."""
    return {by: level.value if by == "rate" else int(level.value), "within": level.within(budgets),
            "over": sorted(level.over(budgets)), "suspect": level.suspect, "interrupted": level.interrupted,
            "summary": to_jsonable(level.summary), "engine": to_jsonable(level.engine), "findings": level.findings,
            "bundle": level.bundle}


@dataclass
class SweepResult:
    """A whole sweep: what renderers receive (``reports.sweep_report``)."""

    by: str
    budgets: Budgets
    maximum: float
    levels: list[Level]
    knee: Knee
    recommendation: Recommendation
    run: dict[str, Any] = field(default_factory=dict)  # the first level's run record, as JSON
    interrupted: bool = False


def conclude(levels: list[Level], budgets: Budgets, by: str, maximum: float, run: dict[str, Any],
             interrupted: bool = False) -> SweepResult:
    """The knee and the recommendation of the levels measured, in the order of their load."""
    ordered = sorted(levels, key=lambda lv: lv.value)
    knee = find_knee(ordered, budgets)
    return SweepResult(by, budgets, maximum, ordered, knee, recommend(ordered, knee, budgets, by, maximum), run, interrupted)


def sweep_dict(result: SweepResult) -> dict[str, Any]:
    """The JSON document: ``levels[]``, ``knee.concurrency`` (or ``knee.rate``), ``knee.binding``, ``recommendation``."""
    knee = result.knee
    by = result.by

    def level(value: float | None) -> float | int | None:
        return None if value is None else value if by == "rate" else int(value)

    return {
        "kind": SWEEP_KIND, "version": 1, "by": by, "maximum": result.maximum,
        "budgets": {"ttft_s": result.budgets.ttft_s, "tpot_s": result.budgets.tpot_s},
        "interrupted": result.interrupted,
        "levels": [level_dict(lv, by, result.budgets) for lv in result.levels],
        "knee": {by: level(knee.value), "binding": knee.binding, "first_over": level(knee.first_over)},
        "recommendation": to_jsonable(result.recommendation),
        "run": result.run,
    }
