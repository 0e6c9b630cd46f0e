"""Inter-token latency grows with the number of running sequences: the batch is too deep.

What it detects:
Batch too deep: with no preemption, the streams' steady token gaps grow with the number of
streams decoding at the same time, and at the deepest batch seen they exceed the TPOT target.

Why it matters:
Every decode step serves all running sequences; its cost grows with their number (weights are
read once, but attention reads every sequence's KV cache). A larger ``max_num_seqs`` buys
throughput and less queueing at the price of every user's reading speed. When the deepest
batch misses the TPOT budget, the batch limit is set for throughput, not for interactivity.

A batch above the largest captured CUDA graph is a different lever: vLLM replays a captured
graph only for decode batches up to ``max_cudagraph_capture_size`` and runs larger ones without
(sglang PR#33900: ~4x per token past ``cuda_graph_max_bs``), so the gaps step up where the batch
crosses it. Lowering ``max_num_seqs`` would hide that step by queueing users; raising the capture
size to the batch cap removes it.

Evidence:
stream and stream_stats: each steady gap (stalls left out) on the engine path, grouped by how
many probe streams were decoding at its midpoint; a least-squares line through the groups'
median gaps. metrics_window: preemptions (must be none), running peak, and the engine's own
inter-token histogram: when its mean stays at the shallowest gap while the client's gaps grow,
the engine's steps did not slow (a saturated front end, LD211), and it passes. Startup log / run
record: ``max_num_seqs``, and the CUDA-graph capture sizes (the engine config's
``compilation_config``, or vLLM's "Capping cudagraph capture sizes" warning; SGLang's
``cuda_graph_max_bs`` argument, overruled by the sizes it captured: "Capture cuda graph bs [...]",
tqdm's "Capturing batches (bs=N").

Remediation:
Lower ``max_num_seqs`` to the depth at which the fitted line meets ``tpot_target_s`` (by
default your ``--tpot-budget``); expect more queueing at peak load (watch TTFT), so pair it with
capacity if the queue grows. When the batch ran above the largest captured CUDA graph and
``max_num_seqs`` allows more: raise ``max_cudagraph_capture_size`` to ``max_num_seqs`` instead
(vLLM ``--max-cudagraph-capture-size``, or ``cudagraph_capture_sizes`` in
``--compilation-config``; SGLang ``--cuda-graph-max-bs``), at the cost of the graphs' memory.

Options:
tpot_target_s: the inter-token target (defaults to --tpot-budget)
growth: deepest / shallowest median gap that counts as growing
min_gaps: gaps a depth needs to count

Example:
direct: median gap 22 ms at depth 1, 61 ms at depth 8 (2.8x); fitted 16 ms + 5.6 ms per
sequence -> max_num_seqs 6 meets 50 ms.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from dataclasses import dataclass

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import Setting, engine_flag, engine_path, engine_setting, metric_read, rerun
from doctor.derive.engine import UNIDENTIFIED, EngineIdentity
from doctor.derive.log_facts import LogFacts
from doctor.derive.metrics_window import MetricsWindow
from doctor.derive.stream_stats import PathStats, StreamStats
from doctor.engines.names import SGLANG, VLLM
from doctor.evidence import RunRecord, StreamEvidence
from doctor.foundation.units import fmt_seconds
from doctor.model import Cause, EvidenceValue, Remediation, SymptomClass

#: Where each engine lists its captured batch sizes one by one, beside the largest (the lever).
SIZE_LISTS: dict[str, str] = {
    VLLM: "; or list the sizes in --compilation-config '{\"cudagraph_capture_sizes\": [...]}'",
    SGLANG: "; or list the sizes in --cuda-graph-bs",
}


@dataclass(frozen=True)
class Found:
    """Token gaps by batch depth on ``path``: the depths with enough gaps, their medians and gap
    counts, the growth from the shallowest to the deepest (``ratio``) and the least-squares line;
    the batch limit and running peak; and, when the batch ran above the largest captured CUDA graph
    (``capture``), the deepest batch and the median gaps within and above the captured sizes."""

    engine: str
    path: str
    depths: tuple[int, ...]
    medians: tuple[float, ...]
    gaps: tuple[int, ...]
    ratio: float
    slope: float
    intercept: float
    max_seqs: Setting | None
    running: float | None
    running_metric: str
    capture: Setting | None
    deepest: int
    step: tuple[float, float] | None


@check(code="LD203", name="batch-too-deep", symptom=SymptomClass.INTER_TOKEN, cause=Cause.BATCH_DEPTH)
def batch_too_deep(
    stream_stats: StreamStats,
    stream: StreamEvidence,
    metrics_window: MetricsWindow | None = None,
    log_facts: LogFacts | None = None,
    run: RunRecord | None = None,
    engine: EngineIdentity = UNIDENTIFIED,
    *,
    tpot_target_s: float = 0.05,
    growth: float = 1.5,
    min_gaps: int = 5,
) -> Result:
    if metrics_window is not None and metrics_window.preemptions:
        return Pass(_preempted(metrics_window.preemptions))
    path = engine_path(stream_stats)
    if path is None:
        return NotApplicable("no successful streamed request")
    by_depth = _gaps_by_depth(path, stream)
    depths = sorted(d for d, gaps in by_depth.items() if len(gaps) >= min_gaps)
    if len(depths) < 2:
        return NotApplicable(_one_depth(path.path))
    medians = [statistics.median(by_depth[d]) for d in depths]
    fit = statistics.linear_regression([float(d) for d in depths], medians)
    max_seqs = engine_setting("max_num_seqs", log_facts, run)
    running = metrics_window.running.max if metrics_window is not None and metrics_window.running else None
    capture = engine_setting("max_cudagraph_capture_size", log_facts, run)
    deepest = max(depths[-1], int(running or 0))
    above_captured = capture is not None and isinstance(capture.value, int) and deepest > capture.value and (
        max_seqs is None or not isinstance(max_seqs.value, int) or max_seqs.value > capture.value)
    found = Found(
        engine=engine.id, path=path.path, depths=tuple(depths), medians=tuple(medians),
        gaps=tuple(len(by_depth[d]) for d in depths), ratio=medians[-1] / medians[0] if medians[0] > 0 else 0.0,
        slope=fit.slope, intercept=fit.intercept, max_seqs=max_seqs, running=running,
        running_metric=metric_read(metrics_window, "running"), capture=capture if above_captured else None,
        deepest=deepest, step=_step(by_depth, depths, capture) if above_captured and capture is not None else None,
    )
    if fit.slope <= 0 or found.ratio < growth:
        return Pass(_trend(found))
    if medians[-1] <= tpot_target_s:
        return Pass(_within_target(found, tpot_target_s))
    itl = metrics_window.itl if metrics_window is not None else None
    if itl is not None and itl.count and itl.mean is not None and itl.mean <= medians[0] and itl.mean * growth <= medians[-1]:
        # the engine times its own steps: they did not slow with depth, what hands their tokens on did
        return Pass(_steps_kept_pace(found, itl.mean, itl.count))
    if found.capture is not None:
        return Fire(
            title="Decode batches run above the largest captured CUDA graph",
            summary=_captured_summary(found),
            remediation=_captured_remediation(found),
            evidence=_evidence(found),
        )
    return Fire(
        title="Token gaps grow with the number of running sequences",
        summary=_summary(found),
        remediation=_remediation(found, math.floor((tpot_target_s - fit.intercept) / fit.slope), tpot_target_s),
        evidence=_evidence(found),
    )


def _step(by_depth: dict[int, list[float]], depths: list[int], capture: Setting) -> tuple[float, float] | None:
    """The median gap within the captured sizes and above them, when the gaps fall on both sides."""
    within = [g for d in depths if d <= capture.value for g in by_depth[d]]
    above = [g for d in depths if d > capture.value for g in by_depth[d]]
    return (statistics.median(within), statistics.median(above)) if within and above else None


def _gaps_by_depth(path: PathStats, stream: StreamEvidence) -> dict[int, list[float]]:
    """Steady gaps (no stalls) grouped by how many probe streams were decoding at the gap's midpoint."""
    windows = [(r.tokens[0].t, r.tokens[-1].t) for r in stream.requests if r.ok and r.tokens]
    traces = {r.index: r for r in stream.requests if r.path == path.path and r.ok and r.tokens}
    out: dict[int, list[float]] = defaultdict(list)
    for rs in path.requests:
        trace = traces.get(rs.index)
        if trace is None or rs.warmup or not rs.median_gap or rs.stall_above is None:
            continue
        for token, gap in zip(trace.tokens, rs.gaps, strict=False):  # the last token has no gap after it
            if gap > rs.stall_above:
                continue
            mid = token.t + gap / 2
            out[sum(1 for first, last in windows if first <= mid <= last)].append(gap)
    return out


def _preempted(preemptions: float) -> str:
    return f"{preemptions:.0f} preemptions: the stalls are KV pressure (LD201), not depth"


def _one_depth(path: str) -> str:
    return f"{path}: the streams ran at one depth only; TPOT cannot be related to batch size"


def _trend(found: Found) -> str:
    depths, medians = found.depths, found.medians
    return (f"{found.path}: median gap {fmt_seconds(medians[0])} at depth {depths[0]} (streams decoding), "
            f"{fmt_seconds(medians[-1])} at depth {depths[-1]} ({found.ratio:.1f}x)")


def _within_target(found: Found, tpot_target_s: float) -> str:
    return _trend(found) + f"; within the {fmt_seconds(tpot_target_s)} target"


def _steps_kept_pace(found: Found, itl_mean: float, itl_count: float) -> str:
    return _trend(found) + (f"; but the engine's own inter-token mean stayed at {fmt_seconds(itl_mean)} "
                            f"(n={itl_count:.0f}): its steps did not slow, what serves them did (the front end, LD211)")


def _summary(found: Found) -> str:
    return _trend(found) + f"; {fmt_seconds(found.slope)} per extra sequence, no preemption"


def _evidence(found: Found) -> list[EvidenceValue]:
    evidence = [
        EvidenceValue(f"median gap at depth {d}", m, "s", f"stream: {found.path}, n={n} gaps")
        for d, m, n in zip(found.depths, found.medians, found.gaps, strict=True)
    ]
    evidence.append(EvidenceValue("fitted cost per sequence", found.slope, "s", "least squares over the depths' medians"))
    if found.max_seqs is not None:
        evidence.append(found.max_seqs.evidence("max_num_seqs"))
    if found.running is not None:
        evidence.append(EvidenceValue("running max", found.running, "requests", f"metrics: {found.running_metric}"))
    if found.capture is not None:
        limit = found.capture.value
        if found.step is not None:
            evidence += [EvidenceValue("median gap within the captured sizes", found.step[0], "s",
                                       f"stream: depths <= {limit}"),
                         EvidenceValue("median gap above them", found.step[1], "s", f"stream: depths > {limit}")]
        evidence.append(found.capture.evidence("max_cudagraph_capture_size", "sequences"))
    return evidence


def _remediation(found: Found, depth: int, tpot_target_s: float) -> Remediation:
    if depth >= 1:
        suggested = (f"{depth} (fitted {fmt_seconds(found.intercept)} + {fmt_seconds(found.slope)} per sequence "
                     f"meets {fmt_seconds(tpot_target_s)})")
    else:
        suggested = (f"lower it; even one sequence is predicted at {fmt_seconds(found.intercept + found.slope)}, "
                     "so look at the GPU checks too")
    return Remediation(
        setting="max_num_seqs",
        suggested=suggested,
        why=("each decode step serves every running sequence; at the depth seen the step is longer than the "
             "TPOT target, and nothing else (preemption, stalls) explains it"),
        verify=rerun("TPOT p90 under the target at full load; watch TTFT, which rises if requests now queue"),
        current=str(found.max_seqs.value) if found.max_seqs is not None else None,
        where=engine_flag(found.engine, "max_num_seqs"),
    )


def _captured_summary(found: Found) -> str:
    """The finding when the batch ran above the largest captured CUDA graph: the step, and the capture size."""
    limit = found.capture.value if found.capture is not None else None
    step = ""
    if found.step is not None:
        step = f"; median gap {fmt_seconds(found.step[0])} up to {limit} sequences, {fmt_seconds(found.step[1])} above"
    return _trend(found) + f"{step}; the batch reached {found.deepest}, the largest captured graph is {limit}"


def _captured_remediation(found: Found) -> Remediation:
    """The capture size as the lever: up to max_num_seqs when known, else the peak batch seen."""
    limit = found.capture.value if found.capture is not None else None
    max_seqs = found.max_seqs
    known = max_seqs is not None and isinstance(max_seqs.value, int)
    target = (f"{max_seqs.value} (max_num_seqs)" if max_seqs is not None and known
              else f"{found.deepest} (the peak batch seen)")
    return Remediation(
        setting="max_cudagraph_capture_size",
        suggested=f"{target}, so every decode batch replays a captured graph{SIZE_LISTS.get(found.engine, '')}",
        why=(f"decode batches above {limit} sequences run without a captured CUDA graph, so the step cost jumps "
             "where the batch crosses it; lowering max_num_seqs would queue users to hide it"),
        verify=rerun("the gaps at the deepest batch near those below the old capture size; the startup log's "
                     "capture sizes reaching max_num_seqs, and the graphs' memory within the KV budget"),
        current=str(limit),
        where=engine_flag(found.engine, "max_cudagraph_capture_size"),
    )
