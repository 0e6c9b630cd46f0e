"""Other requests' prefills interrupt running streams.

What it detects:
Prefill interference: large gaps inside running streams (several times the stream's median
gap) that end as another request gets its first token, i.e. while that request's prompt was
being computed in the same engine steps. Prompts from other users are invisible to the probe,
so a gap also counts when several concurrent streams freeze at the same moment, no request was
preempted, /metrics shows more prompt tokens prefilled in the window than the probe sent, and
the prompt-token counter moved between the scrapes around that freeze (a freeze with no prompt
arriving is an engine-wide pause, LD210's, not a prefill).
When the probe's own streams were not hit, the server's histograms still show it: inter-token
gaps of ``server_gap_s`` or more while the median gap is milliseconds, holding at least
``time_share`` of all decode time, long prefills (prefill time mean of ``min_prefill_s`` or
more), and no preemption to explain the freezes instead.
Either way, only where the change cuts something: with no engine step in the window (the server's
tokens-per-step histogram) larger than the step budget it would set, or the budget at its floor,
the stalls are each short prompt's whole prefill, and the check passes saying so
(``checklib.step_budget``).

Why it matters:
vLLM runs prefill chunks and decodes in the same step. A step that carries a large prefill
chunk (up to ``max_num_batched_tokens`` tokens) takes much longer than a decode-only step, so
every running stream stutters whenever a long prompt arrives. The larger the step budget, the
longer each stutter; users see answers pause when someone else starts a request.

Evidence:
stream (token times) and stream_stats (per-request median gap): each large gap is matched
with the first tokens of the other requests on the same path, and with large gaps of the other
streams. metrics_window: prompt tokens and preemptions over the window (prompt tokens beyond
the probe's own, from its usage trailers, are other users' prefills); metrics: the prompt-token
counter at the scrapes that bracket each shared freeze; without a hit stream, the
inter-token histogram (median and tail bucket bounds), prefill-time histogram and prompt tokens
per finished request, the tokens-per-step histogram (the largest step). Startup log / run record:
``chunked_prefill``, ``max_num_batched_tokens``.

Remediation:
Lower ``max_num_batched_tokens`` (to 2048 when above it, else halve it, at least 512) so a
prefill is cut into smaller chunks that each delay the running streams less (TTFT of long
prompts rises a little). With chunked prefill off, turn it on (``enable_chunked_prefill``).

Options:
gap_factor: a gap this many times its stream's median is large
coincide_share: share of large gaps that must end at another request's first token
min_gaps: at least this many such gaps
time_share: the large gaps' excess (the probe's streams), or the long gaps (the server's histograms), must hold
    at least this share of decode time
min_streams: a freeze other users' prefill explains stops at least this many other streams
server_gap_s: from the server's histograms alone: gaps of at least this long
server_median_s: from the server's histograms alone: while the median gap is at most this
min_prefill_s: from the server's histograms alone: with prefills at least this long

Example:
direct: 9 of 11 large gaps (median 240 ms vs 25 ms) end at another request's first token;
they are 38 % of decode time; chunked prefill with max_num_batched_tokens 16384 -> 2048.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import (
    StepBudget,
    engine_path,
    foreign_prompt_tokens,
    metric_read,
    prompt_tokens_around,
    step_budget,
    step_budget_evidence,
    step_budget_idle,
    step_budget_in_use,
    step_budget_remediation,
)
from doctor.derive.engine import UNIDENTIFIED, EngineIdentity
from doctor.derive.log_facts import LogFacts
from doctor.derive.metrics_window import MetricsWindow
from doctor.derive.stream_stats import PathStats, StreamStats
from doctor.engine_metrics.runtime import Reading, readings
from doctor.evidence import MetricsEvidence, RunRecord, StreamEvidence
from doctor.foundation.units import fmt_pct, fmt_seconds
from doctor.model import Cause, EvidenceValue, SymptomClass


@dataclass(frozen=True)
class StreamGaps:
    """The probe's streams on ``path``: its large gaps (over ``gap_factor`` x the stream's median),
    those another request's prefill explains (their excess over the median against all decode
    time: ``time_frac``), other users' prompt tokens (``foreign``) and the prompt throughput."""

    path: str
    gap_factor: float
    large: int
    coinciding: tuple[float, ...]
    time_frac: float
    median_s: float
    median_n: int
    foreign: float | None
    prompt_metric: str
    prompt_rate: float | None


@dataclass(frozen=True)
class ServerGaps:
    """Every user's streams from the server's histograms: ``gaps`` inter-token gaps over ``le``
    beside a median bound of ``median_le`` (of ``count`` gaps), the prefill mean, no preemption."""

    itl_metric: str | None
    count: float
    median_le: float
    le: float
    gaps: float
    prefill_s: float
    prefill_metric: str | None
    prefill_n: float
    preemptions: float
    preemptions_metric: str
    prompt_per_request: float | None
    prompt_metric: str
    finished_metric: str


@check(code="LD202", name="prefill-interference", symptom=SymptomClass.INTER_TOKEN, cause=Cause.PREFILL_INTERFERENCE)
def prefill_interference(
    stream_stats: StreamStats | None = None,
    stream: StreamEvidence | None = None,
    metrics_window: MetricsWindow | None = None,
    log_facts: LogFacts | None = None,
    run: RunRecord | None = None,
    metrics: MetricsEvidence | None = None,
    engine: EngineIdentity = UNIDENTIFIED,
    *,
    gap_factor: float = 3.0,
    coincide_share: float = 0.5,
    min_gaps: int = 2,
    time_share: float = 0.1,
    min_streams: int = 2,
    server_gap_s: float = 0.5,
    server_median_s: float = 0.2,
    min_prefill_s: float = 0.2,
) -> Result:
    series = readings(metrics.scrapes) if metrics is not None else []
    stream_result = (_from_streams(stream_stats, stream, metrics_window, series, gap_factor=gap_factor,
                                   coincide_share=coincide_share, min_gaps=min_gaps, time_share=time_share,
                                   min_streams=min_streams)
                     if stream_stats is not None and stream is not None else None)
    found: StreamGaps | ServerGaps
    if isinstance(stream_result, StreamGaps):
        found = stream_result
    else:
        server = _from_server(metrics_window, min_gaps=min_gaps, server_gap_s=server_gap_s,
                              server_median_s=server_median_s, min_prefill_s=min_prefill_s, time_share=time_share)
        if not isinstance(server, ServerGaps):
            return stream_result if isinstance(stream_result, Pass) else server
        found = server
    steps = metrics_window.step_tokens if metrics_window is not None else None
    budget = step_budget(log_facts, run, steps.max_le if steps is not None else None)
    if not budget.cuts:
        return Pass(step_budget_idle(budget, _steps_source(metrics_window)))
    return Fire(
        title="Other requests' prefills stall running streams",
        summary=_summary(found, budget),
        remediation=step_budget_remediation(budget, engine.id, "the large gaps to shrink"),
        evidence=_evidence(found, budget),
    )


def _from_streams(
    stream_stats: StreamStats, stream: StreamEvidence, metrics_window: MetricsWindow | None, series: list[Reading],
    *, gap_factor: float, coincide_share: float, min_gaps: int, time_share: float, min_streams: int,
) -> StreamGaps | Result:
    """The probe's own streams: large gaps that end at another request's first token."""
    path = engine_path(stream_stats)
    if path is None:
        return NotApplicable("no successful streamed request")
    # a preempted stream freezes too (LD201): other users' prompts are the cause only without preemptions
    foreign = None if metrics_window is None or metrics_window.preemptions else foreign_prompt_tokens(stream, metrics_window)
    gaps = _large_gaps(path, stream, gap_factor, min_streams if foreign else None, series)
    if gaps is None:
        return NotApplicable(_no_overlap(path.path))
    large, coinciding, excess_s, decode_s = gaps
    share = len(coinciding) / len(large) if large else 0.0
    time_frac = excess_s / decode_s if decode_s else 0.0
    rate = None
    if metrics_window is not None and metrics_window.prompt_tokens is not None and metrics_window.window_s:
        rate = metrics_window.prompt_tokens / metrics_window.window_s
    found = StreamGaps(path.path, gap_factor, len(large), tuple(coinciding), time_frac, path.itl.p50 or 0.0,
                       path.itl.n, foreign, metric_read(metrics_window, "prompt_tokens"), rate)
    if len(coinciding) < min_gaps or share < coincide_share or time_frac < time_share:
        return Pass(_few_coincide(found))
    return found


def _from_server(
    mw: MetricsWindow | None, *, min_gaps: int, server_gap_s: float, server_median_s: float, min_prefill_s: float,
    time_share: float,
) -> ServerGaps | Result:
    """Every user's streams, from the server's histograms: a tail of long gaps beside a
    millisecond median, long prefills, and no preemption that would explain the freezes."""
    itl = mw.itl if mw is not None else None
    if mw is None or itl is None or not itl.count or itl.p50_le is None:
        return NotApplicable("no measured stream and no inter-token histogram in /metrics")
    if mw.preemptions:
        return Pass(_preempted(mw.preemptions))
    if itl.p50_le > server_median_s:
        return Pass(_no_fast_median(itl.p50_le))
    # the longest bound at or above server_gap_s that at least min_gaps gaps passed
    passed = [(le, itl.count - cumulative) for le, cumulative in itl.buckets
              if le >= server_gap_s and itl.count - cumulative >= min_gaps]
    bound = passed[-1] if passed else None
    prefill = mw.prefill.mean if mw.prefill is not None else None
    if bound is None:
        return Pass(_few_long_gaps(min_gaps, server_gap_s, itl.count))
    if prefill is None or prefill < min_prefill_s or mw.prefill is None:
        return Pass(_short_prefill(bound[1], bound[0], prefill, min_prefill_s))
    le, gaps = bound
    frozen_share = le * gaps / itl.sum if itl.sum > 0 else 0.0  # at least this share of all decode time
    if frozen_share < time_share:
        # a few long pauses among many gaps (a CPU engine's own prefill of a single request) are not
        # other users' prompts stopping the streams
        return Pass(_small_share(gaps, le, frozen_share, time_share))
    finished = sum(mw.finished_by_reason.values())
    return ServerGaps(
        itl.metric, itl.count, itl.p50_le, le, gaps, prefill, mw.prefill.metric, mw.prefill.count,
        mw.preemptions or 0.0, metric_read(mw, "preemptions"),
        mw.prompt_tokens / finished if mw.prompt_tokens is not None and finished else None,
        metric_read(mw, "prompt_tokens"), metric_read(mw, "finished_by_reason"),
    )


def _steps_source(mw: MetricsWindow | None) -> str:
    return f"{metric_read(mw, 'step_tokens')} histogram"


def _no_overlap(path: str) -> str:
    return f"{path}: no request got its first token while another was streaming"


def _few_coincide(found: StreamGaps) -> str:
    return (f"{found.path}: {len(found.coinciding)} of {found.large} large gaps coincide with another request's "
            f"prefill ({fmt_pct(found.time_frac)} of decode time)")


def _preempted(preemptions: float) -> str:
    return f"{preemptions:.0f} preemptions explain gaps in the window (see LD201)"


def _no_fast_median(median_le: float) -> str:
    return f"server: median inter-token gap <= {fmt_seconds(median_le)}: no millisecond stream to interrupt"


def _few_long_gaps(min_gaps: int, server_gap_s: float, count: float) -> str:
    return f"server: fewer than {min_gaps} inter-token gaps over {fmt_seconds(server_gap_s)} (n={count:.0f} gaps)"


def _short_prefill(gaps: float, le: float, prefill: float | None, min_prefill_s: float) -> str:
    return (f"server: {gaps:.0f} gaps over {fmt_seconds(le)}, but prefill time mean "
            f"{fmt_seconds(prefill)} is below {fmt_seconds(min_prefill_s)}: no long prefill to blame")


def _small_share(gaps: float, le: float, frozen_share: float, time_share: float) -> str:
    return (f"server: {gaps:.0f} gaps over {fmt_seconds(le)} hold at least {fmt_pct(frozen_share)} of decode "
            f"time, below {fmt_pct(time_share)}")


def _summary(found: StreamGaps | ServerGaps, budget: StepBudget) -> str:
    if isinstance(found, StreamGaps):
        where = "end at another request's first token"
        if found.foreign:
            where += " or freeze several streams at once"
        summary = (f"{found.path}: {len(found.coinciding)} of {found.large} large gaps (median "
                   f"{fmt_seconds(statistics.median(found.coinciding))} vs stream median {fmt_seconds(found.median_s)}, "
                   f"n={found.median_n}) {where}; {fmt_pct(found.time_frac)} of decode time")
        if found.foreign:
            summary += f"; {found.foreign:,.0f} prompt tokens from other requests were prefilled meanwhile"
        if found.prompt_rate is not None:
            summary += f"; prompt throughput {found.prompt_rate:,.0f} tokens/s"
    else:
        summary = (f"server: {found.gaps:.0f} inter-token gaps over {fmt_seconds(found.le)} while the median gap is "
                   f"<= {fmt_seconds(found.median_le)} (n={found.count:.0f} gaps); prefill time mean "
                   f"{fmt_seconds(found.prefill_s)}; no preemption")
        if found.prompt_per_request is not None:
            summary += f"; {found.prompt_per_request:,.0f} prompt tokens per request"
    in_use = step_budget_in_use(budget)
    return f"{summary}; {in_use}" if in_use else summary


def _evidence(found: StreamGaps | ServerGaps, budget: StepBudget) -> list[EvidenceValue]:
    if isinstance(found, StreamGaps):
        evidence = [
            EvidenceValue("large gaps", found.large, "gaps",
                          f"stream: {found.path}, gaps > {found.gap_factor:g}x the stream's median"),
            EvidenceValue("coinciding with a prefill", len(found.coinciding), "gaps",
                          f"stream: {found.path}, gap ends at another request's first token"),
            EvidenceValue("interference share of decode time", found.time_frac, "fraction",
                          "stream: sum(gap - median) of coinciding gaps / sum of all gaps"),
        ]
        if found.foreign:
            evidence.append(EvidenceValue("other users' prompt tokens", found.foreign, "tokens",
                                          f"metrics: {found.prompt_metric} delta minus the probe's own (usage trailers)"))
        if found.prompt_rate is not None:
            evidence.append(EvidenceValue("prompt throughput", found.prompt_rate, "tokens/s",
                                          f"metrics: {found.prompt_metric} delta / window"))
    else:
        evidence = [
            EvidenceValue("gaps over the bound", found.gaps, "gaps", f"metrics: {found.itl_metric}, above le={found.le:g}"),
            EvidenceValue("median gap bound", found.median_le, "s",
                          f"metrics: {found.itl_metric} p50 bucket bound, n={found.count:.0f}"),
            EvidenceValue("prefill time mean", found.prefill_s, "s",
                          f"metrics: {found.prefill_metric} mean, n={found.prefill_n:.0f}"),
            EvidenceValue("preemptions", found.preemptions, "", f"metrics: {found.preemptions_metric} delta"),
        ]
        if found.prompt_per_request is not None:
            evidence.append(EvidenceValue("prompt tokens per finished request", found.prompt_per_request, "tokens",
                                          f"metrics: {found.prompt_metric} delta / {found.finished_metric} delta"))
    return evidence + step_budget_evidence(budget)


def _large_gaps(
    path: PathStats, stream: StreamEvidence, gap_factor: float, min_streams: int | None, series: list[Reading]
) -> tuple[list[float], list[float], float, float] | None:
    """(large gaps, those a prefill explains, their excess, total decode time).

    ``None`` when no other stream ran alongside any request (nothing overlapped). A prefill's
    step emits the new request's first token together with the running streams' next token, so
    a gap it caused ends within about one median gap of that first token. With ``min_streams``
    (other users' prompts were prefilled), a gap that this many other streams share also counts,
    unless the scrapes around it say no prompt arrived (the counter did not move between them).
    """
    traces = {r.index: r for r in stream.requests if r.path == path.path and r.ok and r.tokens}
    firsts = {i: t.tokens[0].t for i, t in traces.items()}
    measured = [rs for rs in path.requests
                if rs.index in traces and not rs.warmup and rs.gaps and rs.median_gap]
    freezes = {
        rs.index: [(t, t + g) for t, g in zip((e.t for e in traces[rs.index].tokens), rs.gaps, strict=False)
                   if g > gap_factor * (rs.median_gap or 0.0)]
        for rs in measured
    }
    large: list[float] = []
    coinciding: list[float] = []
    excess = decode = 0.0
    overlapped = False
    for rs in measured:
        times = [t.t for t in traces[rs.index].tokens]
        others = [f for i, f in firsts.items() if i != rs.index and times[0] < f <= times[-1]]
        overlapped = overlapped or bool(others) or any(
            i != rs.index and traces[i].tokens[0].t < times[-1] and times[0] < traces[i].tokens[-1].t for i in freezes
        )
        decode += sum(rs.gaps)
        for start, end in freezes[rs.index]:
            gap = end - start
            large.append(gap)
            own_prefill = any(start < f <= end + (rs.median_gap or 0.0) for f in others)
            # a prompt arrived, or no two scrapes bracket the freeze (None: unknown, counted)
            shared = min_streams is not None and sum(
                1 for i, spans in freezes.items()
                if i != rs.index and any(s < end and start < e for s, e in spans)
            ) >= min_streams and prompt_tokens_around(series, stream, start, end) != 0
            if own_prefill or shared:
                coinciding.append(gap)
                excess += gap - (rs.median_gap or 0.0)
    return (large, coinciding, excess, decode) if overlapped else None

