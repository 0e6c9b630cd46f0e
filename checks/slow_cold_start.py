"""The first (warm-up) requests are much slower than the steady ones.

What it detects:
Slow cold start: a warm-up request's time to first token is many times the steady requests'
median, on some path.

Why it matters:
The first requests after a start (or after an idle spell) pay for lazy initialisation:
CUDA graph capture and kernel autotuning, compilation caches, connection pools, a cold prefix
cache. Users of a replica that scales from zero feel it, and a scheduled check that measures
without a warm-up reports it as a regression that is not there. The statistics already leave
warm-up requests out; this check says what they cost.

Evidence:
stream_stats: ``warmup_ttft`` (the warm-up requests, excluded from every other number) against
the measured ``ttft`` median, per path. metrics_window (scrapes, which share the probe's clock):
the running and waiting gauges while the slow warm-up waited. A warm-up that waited beside other
users' requests (more requests in the engine than the probe had in flight) queued behind them:
that is load, which the latency checks weigh, not a cold start, and this check passes saying so.
stream ``controls``: with a constrained ``--payload`` the probe's first requests are its
unconstrained twins, so the engine's first request is the first twin, and its TTFT is the one
compared; the constrained warm-up's own wait is then the schema's compile (LD108).

Remediation:
Keep a warm floor: scheduled checks send at least one warm-up request before measuring
(``--warmup``), and serving keeps replicas warm (a minimum replica count above zero, a
warm-up request after each start).

Options:
cold_factor: warm-up TTFT / steady median TTFT that fires (info)
warning_factor: the ratio at which it becomes a warning

Example:
direct: warm-up TTFT 4.10 s vs steady median 120 ms (34x) -> keep --warmup >= 1 and a warm floor.
"""

from __future__ import annotations

from doctor.check import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import rerun
from doctor.derive.metrics_window import MetricsWindow
from doctor.derive.stream_stats import PathStats, StreamStats
from doctor.evidence import StreamEvidence
from doctor.model import Cause, EvidenceValue, Remediation, Severity, SymptomClass
from doctor.units import fmt_seconds


@check(code="LD103", name="slow-cold-start", symptom=SymptomClass.PRE_FIRST_TOKEN, cause=Cause.COLD_START,
       aliases=("cold-start",))
def slow_cold_start(
    stream_stats: StreamStats,
    stream: StreamEvidence | None = None,
    metrics_window: MetricsWindow | None = None,
    *,
    cold_factor: float = 3.0,
    warning_factor: float = 10.0,
) -> Result:
    compared = [ps for ps in stream_stats.paths.values() if ps.warmup_ttft.n and ps.ttft.p50]
    if not compared:
        return NotApplicable("no successful warm-up request to compare with (the probe ran with --warmup 0?)")
    worst = max(compared, key=_ratio)
    ratio = _ratio(worst)
    slow, steady = worst.warmup_ttft.max or 0.0, worst.ttft.p50 or 0.0
    first = "warm-up"
    twin = _first_twin_ttft(worst.path, stream)
    if twin is not None:  # the engine's first request was the twin; the constrained warm-up's own wait is LD108's
        first, slow, ratio = "first unconstrained twin", twin, twin / steady
    if ratio < cold_factor:
        return Pass(f"{worst.path}: {first} TTFT {fmt_seconds(slow)} vs steady median {fmt_seconds(steady)}")
    others = _others_in_engine(worst.path, stream, metrics_window)
    if others:
        return Pass(f"{worst.path}: {first} TTFT {fmt_seconds(slow)} is {ratio:.0f}x the steady median, but up to "
                    f"{others:.0f} other request(s) were running or waiting in the engine while it waited: queued "
                    "behind other users (load, which the latency checks weigh), not a cold start")
    return Fire(
        title="The first requests are much slower than the steady ones",
        summary=(f"{worst.path}: {first} TTFT {fmt_seconds(slow)} (n={worst.warmup_ttft.n}) vs steady median "
                 f"{fmt_seconds(steady)} (n={worst.ttft.n}), {ratio:.0f}x"),
        remediation=Remediation(
            setting="warmup",
            suggested="keep >= 1 warm-up request before measuring, and a warm floor in serving (min replicas >= 1)",
            why=(f"the first request on {worst.path} took {ratio:.0f}x the steady TTFT: lazy initialisation "
                 "that a scheduled check would report as a regression and a scaled-from-zero replica shows users"),
            verify=rerun("the measured TTFT to match the steady median, with the warm-up excluded"),
            current=str(worst.n_warmup),
            where="llm-doctor --warmup (scheduled checks); autoscaler minimum replicas (serving)",
        ),
        severity=Severity.WARNING if ratio >= warning_factor else Severity.INFO,
        evidence=[
            EvidenceValue(f"{first} TTFT max", slow, "s", f"stream: {worst.path} {first}, n={worst.warmup_ttft.n}"),
            EvidenceValue("steady TTFT p50", steady, "s", f"stream: {worst.path} TTFT p50, n={worst.ttft.n}"),
            EvidenceValue("ratio", round(ratio, 1), "x", "warm-up max / steady p50"),
        ],
    )


def _others_in_engine(path: str, stream: StreamEvidence | None, mw: MetricsWindow | None) -> float:
    """The most requests in the engine (running + waiting) beyond the probe's own in flight, at the
    scrapes taken while a warm-up of ``path`` waited for its first token; 0 when none was taken."""
    if stream is None or mw is None or mw.source != "scrape" or mw.running is None:
        return 0.0
    waiting: dict[float, float] = {s[0]: s[1] for s in mw.waiting.samples} if mw.waiting is not None else {}
    spans = [(r.t_sent, r.t_first_token) for r in stream.requests
             if r.path == path and r.warmup and r.ok and r.t_sent is not None and r.t_first_token is not None]
    most = 0.0
    for t, running in mw.running.samples:
        if any(a <= t <= b for a, b in spans):
            ours = sum(1 for r in stream.requests if r.t_sent is not None and r.t_sent <= t <= (r.t_end or t))
            most = max(most, running + waiting.get(t, 0.0) - ours)
    return most


def _first_twin_ttft(path: str, stream: StreamEvidence | None) -> float | None:
    """TTFT of the first unconstrained twin the probe sent on ``path`` (``StreamEvidence.controls``), if it answered."""
    first = next((r for r in stream.controls if r.path == path), None) if stream is not None else None
    if first is None or not first.ok or first.t_sent is None or first.t_first_token is None:
        return None
    return first.t_first_token - first.t_sent


def _ratio(ps: PathStats) -> float:
    return (ps.warmup_ttft.max or 0.0) / (ps.ttft.p50 or 1.0)
