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
the measured ``ttft`` median, per path. It holds only when nothing else explains a slow first
request, and passes saying what does:
- other users' requests in the engine while the warm-up waited (metrics_window: the running and
  waiting gauges beyond the probe's own in flight, from scrapes on the probe's clock), or other
  users' prompts prefilled in the window (/metrics prompt tokens beyond the probe's own usage
  trailers): the warm-up queued behind them, which is load (LD202 and the latency checks weigh it);
- an engine already serving when the warm-up was sent (metrics, the last scrape before it):
  requests finished before the probe's first (``request_success`` above zero), or a process up
  for ``warm_uptime_s`` or more (``process_start_time_seconds`` against the scrape's clock).
- with a constrained ``--payload`` (stream ``controls``), the probe's first requests are its
  unconstrained twins, so the engine's first request is the first twin, and its TTFT is the one
  compared; the constrained warm-up's own wait is then the schema's compile (LD108).

Remediation:
Keep a warm floor: scheduled checks send at least one warm-up request before measuring
(``--warmup``), and serving keeps replicas warm (a minimum replica count above zero, a
warm-up request after each start).

Options:
cold_factor: warm-up TTFT / steady median TTFT that fires (info)
warning_factor: the ratio at which it becomes a warning
warm_uptime_s: an engine process up this long before the warm-up is no longer cold

Example:
direct: warm-up TTFT 4.10 s vs steady median 120 ms (34x) -> keep --warmup >= 1 and a warm floor.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import foreign_prompt_tokens, rerun
from doctor.derive.metrics_window import MetricsWindow
from doctor.derive.stream_stats import PathStats, StreamStats
from doctor.engine_metrics.window import parse_scrape
from doctor.evidence import MetricsEvidence, StreamEvidence
from doctor.foundation.units import fmt_seconds
from doctor.model import Cause, EvidenceValue, Remediation, Severity, SymptomClass


@dataclass(frozen=True)
class Warm:
    """What says the engine was serving before the probe: the requests it had ``finished`` (at the
    scrape taken at ``t``), else how long its process had been up (``uptime``)."""

    finished: float = 0.0
    t: float = 0.0
    uptime: float | None = None


@dataclass(frozen=True)
class Found:
    """The path whose first request was slowest against its steady median (``first``: the warm-up,
    or the first unconstrained twin when the probe sent twins), and what else may have held it: other
    requests in the engine, other users' prefills (``foreign`` tokens at ``foreign_rate``), or an
    engine already warm."""

    path: PathStats
    first: str
    slow: float
    steady: float
    ratio: float
    others: float
    foreign: float | None
    foreign_rate: float | None
    warm: Warm | None


@check(code="LD103", name="slow-cold-start", symptom=SymptomClass.PRE_FIRST_TOKEN, cause=Cause.COLD_START,
       aliases=("cold-start",))
def slow_cold_start(
    stream_stats: StreamStats,
    stream: StreamEvidence | None = None,
    metrics_window: MetricsWindow | None = None,
    metrics: MetricsEvidence | None = None,
    *,
    cold_factor: float = 3.0,
    warning_factor: float = 10.0,
    warm_uptime_s: float = 120.0,
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
    foreign = foreign_prompt_tokens(stream, metrics_window) if stream is not None else None
    window_s = metrics_window.window_s if metrics_window is not None else None
    found = Found(worst, first, slow, steady, ratio, _others_in_engine(worst.path, stream, metrics_window), foreign,
                  foreign / window_s if foreign and window_s else None,
                  _already_serving(worst.path, stream, metrics, warm_uptime_s))
    if ratio < cold_factor:
        return Pass(_not_slow(found))
    if found.others:
        return Pass(_queued_behind_others(found))
    if found.foreign_rate is not None:
        return Pass(_behind_prefills(found))
    if found.warm is not None:
        return Pass(_already_warm(found))
    return Fire(
        title="The first requests are much slower than the steady ones",
        summary=_summary(found),
        remediation=_remediation(found),
        severity=Severity.WARNING if ratio >= warning_factor else Severity.INFO,
        evidence=_evidence(found),
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


def _already_serving(path: str, stream: StreamEvidence | None, metrics: MetricsEvidence | None,
                     warm_uptime_s: float) -> Warm | None:
    """What says the engine was serving before the probe's first request on ``path`` was sent (its
    first unconstrained twin, else its first warm-up), from the last usable scrape taken before it:
    requests it had finished, or how long its process had been up; ``None`` when no such scrape says so.
    (The twins come before the warm-up: a scrape between them counts the probe's own twins.)"""
    if stream is None or metrics is None:
        return None
    sent = [r.t_sent for r in (*stream.controls, *stream.requests)
            if r.path == path and (r.warmup or r in stream.controls) and r.t_sent is not None]
    if not sent:
        return None
    for scrape in sorted((s for s in metrics.scrapes if s.t <= min(sent)), key=lambda s: -s.t):
        parsed, _ = parse_scrape(scrape)
        if parsed is None:
            continue
        finished = sum(s.value for s in parsed.samples if s.family == "finished_by_reason")
        if finished > 0:
            return Warm(finished=finished, t=scrape.t)
        started = _PROCESS_START.search(scrape.text)
        uptime = scrape.wall - float(started.group(1)) if started else None
        if uptime is not None and uptime >= warm_uptime_s:
            return Warm(uptime=uptime)
        return None
    return None


#: The standard process collector's start time (prometheus_client, which vLLM's /metrics includes).
_PROCESS_START = re.compile(r"^process_start_time_seconds\s+(\d+(?:\.\d*)?(?:[eE]\+?\d+)?)\s*$", re.MULTILINE)


def _first_twin_ttft(path: str, stream: StreamEvidence | None) -> float | None:
    """TTFT of the first unconstrained twin the probe sent on ``path`` (``StreamEvidence.controls``), if it answered."""
    first = next((r for r in stream.controls if r.path == path), None) if stream is not None else None
    if first is None or not first.ok or first.t_sent is None or first.t_first_token is None:
        return None
    return first.t_first_token - first.t_sent


def _ratio(ps: PathStats) -> float:
    return (ps.warmup_ttft.max or 0.0) / (ps.ttft.p50 or 1.0)


def _first_ttft(found: Found) -> str:
    return f"{found.path.path}: {found.first} TTFT {fmt_seconds(found.slow)}"


def _not_slow(found: Found) -> str:
    return f"{_first_ttft(found)} vs steady median {fmt_seconds(found.steady)}"


def _queued_behind_others(found: Found) -> str:
    return (f"{_first_ttft(found)} is {found.ratio:.0f}x the steady median, but up to "
            f"{found.others:.0f} other request(s) were running or waiting in the engine while it waited: queued "
            "behind other users (load, which the latency checks weigh), not a cold start")


def _behind_prefills(found: Found) -> str:
    return (f"{_first_ttft(found)} is {found.ratio:.0f}x the steady median, but the engine "
            f"prefilled {found.foreign:,.0f} prompt tokens of other requests in the window "
            f"({found.foreign_rate:,.0f} tokens/s): the warm-up waited behind other users' "
            "prefills (LD202 weighs them), not a cold start")


def _warm_said(warm: Warm) -> str:
    if warm.finished > 0:
        return f"it had finished {warm.finished:.0f} request(s) before the probe's first (/metrics at t={warm.t:+.1f} s)"
    return f"its process had been up {fmt_seconds(warm.uptime)} (process_start_time_seconds)"


def _already_warm(found: Found) -> str:
    said = _warm_said(found.warm) if found.warm is not None else ""
    return (f"{_first_ttft(found)} is {found.ratio:.0f}x the steady median, but {said}: "
            "the engine was warm, so something else held the first request (load, a long prefill)")


def _summary(found: Found) -> str:
    ps = found.path
    return (f"{_first_ttft(found)} (n={ps.warmup_ttft.n}) vs steady median "
            f"{fmt_seconds(found.steady)} (n={ps.ttft.n}), {found.ratio:.0f}x")


def _remediation(found: Found) -> Remediation:
    return Remediation(
        setting="warmup",
        suggested="keep >= 1 warm-up request before measuring, and a warm floor in serving (min replicas >= 1)",
        why=(f"the first request on {found.path.path} took {found.ratio:.0f}x the steady TTFT: lazy initialisation "
             "that a scheduled check would report as a regression and a scaled-from-zero replica shows users"),
        verify=rerun("the measured TTFT to match the steady median, with the warm-up excluded"),
        current=str(found.path.n_warmup),
        where="llm-doctor --warmup (scheduled checks); autoscaler minimum replicas (serving)",
    )


def _evidence(found: Found) -> list[EvidenceValue]:
    ps = found.path
    return [
        EvidenceValue(f"{found.first} TTFT max", found.slow, "s", f"stream: {ps.path} {found.first}, n={ps.warmup_ttft.n}"),
        EvidenceValue("steady TTFT p50", found.steady, "s", f"stream: {ps.path} TTFT p50, n={ps.ttft.n}"),
        EvidenceValue("ratio", round(found.ratio, 1), "x", "warm-up max / steady p50"),
    ]
