"""The KV cache ran full and vLLM preempted running requests.

What it detects:
KV pressure with preemption: ``vllm:num_preemptions`` grew over the window (or a V0 log printed
"preempted ... not enough KV cache space"), or KV usage was near full while running streams
stalled for many times their usual gap.

Why it matters:
When a running sequence needs a new KV block and none is free, vLLM evicts a running request
and recomputes it later: that stream stops for seconds, then resumes, while everything else
looks normal. Users see an answer freeze mid-sentence. On a real vLLM 0.32 the counter moved
only when the preempted requests *resumed*, not during their stall, so the scrape taken after
the streams ended is the one that counts, and KV usage / waiting sampled during them say why.

Evidence:
metrics_window: preemption delta, KV usage peak, running peak, and the waiting gauge in the
scrapes taken during the stalls (preempted requests go back to the queue; else its peak during
the probe, or over the window when it comes from Prometheus history, whose clock is not the
probe's). stream_stats: stalls (gaps > 5x the request's median gap) and the largest gap. gpu
(NVML): free GPU memory. Startup log / run record: ``gpu_memory_utilization``,
``kv_cache_tokens``, ``kv_cache_memory_gib``, ``max_num_seqs``.
Critical when requests were preempted and either the probe's own streams stalled or the
preemptions reach ``critical_share`` of the requests the engine finished in the window (every
user's: a probe whose few requests were spared does not make it a warning); else a warning.

Remediation:
As vLLM's guidance says: when NVML shows free GPU memory (at least ``gpu_headroom`` of it),
raise ``gpu_memory_utilization`` to use it for KV cache (suggested: today's value plus the free
fraction, minus a 5 % margin, at most 0.95). When NVML shows none, or the KV cache is sized in
bytes (``kv_cache_memory_bytes``, which ``gpu_memory_utilization`` does not change), lower
``max_num_seqs`` so that the admitted sequences fit at their full length: KV capacity tokens /
tokens per request.
Without NVML evidence (a remote engine), ``gpu_memory_utilization`` if ``nvidia-smi`` shows
free memory, with the ``max_num_seqs`` value as the fallback in the same suggestion.

Options:
kv_full: KV usage at or above which the cache counts as full
gpu_headroom: free GPU memory fraction (NVML) above which raising gpu_memory_utilization is
    suggested
critical_share: preemptions per finished request at or above which preemption is critical even
    when the probe's own streams did not stall

Example:
3 preemptions in the window; KV usage up to 97 %; 4 stalls, longest gap 13.0 s vs median 30 ms;
no GPU memory headroom -> lower max_num_seqs from 32 to 13 (245,760 KV tokens / 18,000 tokens
per request).
"""

from __future__ import annotations

import itertools
import math

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import (
    MAX_GPU_MEMORY_UTILIZATION,
    Setting,
    capped_utilization,
    engine_flag,
    engine_path,
    engine_setting,
    max_num_seqs_in_use,
    metric_read,
    rerun,
    sequences_that_fit,
    tokens_per_request,
)
from doctor.derive.engine import UNIDENTIFIED, EngineIdentity
from doctor.derive.log_facts import LogFacts
from doctor.derive.metrics_window import MetricsWindow
from doctor.derive.stream_stats import PathStats, StreamStats
from doctor.engines.names import UNKNOWN, VLLM, display
from doctor.evidence import GpuEvidence, RunRecord, StreamEvidence
from doctor.foundation.units import fmt_pct, fmt_seconds
from doctor.model import Cause, EvidenceValue, Remediation, Severity, SymptomClass

#: Free memory left unclaimed when suggesting a higher utilisation.
UTILISATION_MARGIN = 0.05


@check(code="LD201", name="kv-pressure-preemption", symptom=SymptomClass.INTER_TOKEN, cause=Cause.PREEMPTION)
def kv_pressure_preemption(
    metrics_window: MetricsWindow,
    stream_stats: StreamStats | None = None,
    stream: StreamEvidence | None = None,
    log_facts: LogFacts | None = None,
    gpu: GpuEvidence | None = None,
    run: RunRecord | None = None,
    engine: EngineIdentity = UNIDENTIFIED,
    *,
    kv_full: float = 0.95,
    gpu_headroom: float = 0.1,
    critical_share: float = 0.1,
) -> Result:
    mw = metrics_window
    preempted = mw.preemptions
    logged = log_facts.preemption_warnings if log_facts is not None else 0
    kv_max = mw.kv_usage.max if mw.kv_usage else None
    if preempted is None and kv_max is None and not logged:
        return NotApplicable(f"/metrics has neither {metric_read(mw, 'preemptions')} nor a KV usage gauge")
    evidence: list[EvidenceValue] = []
    parts: list[str] = []
    finished = sum(mw.finished_by_reason.values())
    share = preempted / finished if preempted and finished else None
    if preempted is not None:
        evidence.append(EvidenceValue("preemptions", preempted, "", f"metrics: {metric_read(metrics_window, 'preemptions')} delta"))
        if share is not None:
            evidence.append(EvidenceValue("requests finished", finished, "", f"metrics: {metric_read(metrics_window, 'finished_by_reason')} delta"))
            parts.append(f"{preempted:.0f} preemptions in the window, {share:.2f} per finished request "
                         f"(n={finished:.0f})")
        elif preempted > 0:
            parts.append(f"{preempted:.0f} preemptions in the window")
    if logged:
        evidence.append(EvidenceValue("preemption warnings", logged, "", "log: 'is preempted by' lines"))
        parts.append(f"{logged} preemption warnings in the log")
    if kv_max is not None:
        evidence.append(EvidenceValue("KV usage max", kv_max, "fraction", "metrics: KV cache usage gauge"))
        parts.append(f"KV usage up to {fmt_pct(kv_max)}")
    path = engine_path(stream_stats) if stream_stats is not None else None
    stalls = path.stalls if path is not None else 0
    if path is not None and stalls and path.max_gap.max is not None and path.itl.p50:
        evidence += [
            EvidenceValue("stalls", stalls, "gaps", f"stream: {path.path}, gaps > 5x the request's median"),
            EvidenceValue("largest gap", path.max_gap.max, "s", f"stream: {path.path} max gap, n={path.max_gap.n}"),
            EvidenceValue("median gap", path.itl.p50, "s", f"stream: {path.path} ITL p50, n={path.itl.n}"),
        ]
        parts.append(f"{stalls} stalls on {path.path}, longest gap {fmt_seconds(path.max_gap.max)} "
                     f"vs median {fmt_seconds(path.itl.p50)}")
    waiting = _waiting(mw, path, stream) if path is not None and stalls else None
    if waiting is not None:
        evidence.append(waiting[0])
        parts.append(f"up to {waiting[0].value:.0f} waiting {waiting[1]}")
    was_preempted = bool(preempted) or bool(logged)
    if not was_preempted and not (kv_max is not None and kv_max >= kv_full and stalls):
        return Pass("no preemption" + (f"; KV usage up to {fmt_pct(kv_max)}" if kv_max is not None else ""))
    return Fire(
        title="The KV cache ran full and running requests were preempted",
        summary="; ".join(parts),
        remediation=_remediation(mw, stream, log_facts, gpu, run, engine.id, gpu_headroom, evidence),
        severity=(Severity.CRITICAL if was_preempted and (stalls or (share is not None and share >= critical_share))
                  else Severity.WARNING),
        evidence=evidence,
    )


def _waiting(mw: MetricsWindow, path: PathStats, stream: StreamEvidence | None) -> tuple[EvidenceValue, str] | None:
    """The waiting gauge's peak in the scrapes taken during a stall, else during the probe.

    A preempted request goes back to the waiting queue: requests waiting while a stream is stalled
    are the preemption seen from the scheduler's side. Before / after scrapes see an idle engine.
    Only scrapes share the probe's clock: Prometheus history counts its sample times from the start
    of the range it was asked for, so its peak over that window is all it can give.
    """
    if mw.waiting is None:
        return None
    if mw.source != "scrape":
        if mw.waiting.max is None:
            return None
        where = "during the Prometheus window"
        return EvidenceValue(f"waiting max {where}", mw.waiting.max, "requests",
                             f"metrics: {metric_read(mw, 'waiting')}, Prometheus history (its clock is not the probe's, "
                             "so the stalls cannot be matched)"), where
    spans = _stall_spans(path, stream) if stream is not None else []
    during = [v for t, v in mw.waiting.samples if any(a <= t <= b for a, b in spans)]
    if during:
        where = "during the stalls"
        return EvidenceValue(f"waiting max {where}", max(during), "requests",
                             f"metrics: {metric_read(mw, 'waiting')}, {len(during)} scrapes inside stalls"), where
    if len(mw.waiting.samples) > 2 and mw.waiting.max is not None:
        where = "during the probe"
        return EvidenceValue(f"waiting max {where}", mw.waiting.max, "requests",
                             f"metrics: {metric_read(mw, 'waiting')} (no scrape fell inside a stall)"), where
    return None


def _stall_spans(path: PathStats, stream: StreamEvidence) -> list[tuple[float, float]]:
    """When the measured requests of ``path`` stalled, on the probe's clock (which scrapes share).

    A stall is what ``stream_stats`` counts as one (a gap above the request's ``stall_above``);
    the view keeps the gaps but not their times, so the token stamps give them.
    """
    above = {rs.index: rs.stall_above for rs in path.requests if not rs.warmup}
    spans: list[tuple[float, float]] = []
    for req in stream.requests:
        limit = above.get(req.index) if req.path == path.path and req.ok and not req.warmup else None
        if limit:
            times = [e.t for e in req.tokens if math.isfinite(e.t)]
            spans += [(a, b) for a, b in itertools.pairwise(times) if b - a > limit]
    return spans


def _free_memory(gpu: GpuEvidence | None) -> tuple[float, float] | None:
    """(free fraction, total GiB) of the device with the least free memory: vLLM needs the headroom on every one."""
    if gpu is None or not gpu.available:
        return None
    devices = [(d.memory_free_bytes / d.memory_total_bytes, d.memory_total_bytes / 2**30)
               for d in gpu.devices if d.memory_free_bytes is not None and d.memory_total_bytes]
    return min(devices) if devices else None


def _remediation(
    mw: MetricsWindow,
    stream: StreamEvidence | None,
    log_facts: LogFacts | None,
    gpu: GpuEvidence | None,
    run: RunRecord | None,
    engine_id: str,
    gpu_headroom: float,
    evidence: list[EvidenceValue],
) -> Remediation:
    memory = _free_memory(gpu)
    kv_tokens = engine_setting("kv_cache_tokens", log_facts, run)
    if kv_tokens is not None:
        evidence.append(kv_tokens.evidence("KV cache capacity", "tokens"))
    if memory is not None:
        evidence.append(EvidenceValue("GPU memory free", memory[0], "fraction", "gpu: NVML, least free device"))
    explicit = engine_setting("kv_cache_memory_bytes", log_facts, run)
    if explicit is not None:
        evidence.append(explicit.evidence("kv_cache_memory_bytes", "bytes"))
        return _lower_max_num_seqs(
            mw, stream, log_facts, run, engine_id, kv_tokens, evidence,
            reason=(f"the KV cache is sized explicitly (kv_cache_memory_bytes = {explicit.value}), which "
                    "gpu_memory_utilization does not change"),
            alternative="Raising kv_cache_memory_bytes instead grows the cache, if the GPU has memory to spare.",
        )
    if memory is None:
        return _raise_utilisation_if_free(mw, stream, log_facts, run, engine_id, kv_tokens, evidence)
    if memory[0] >= gpu_headroom:
        return _raise_utilisation(mw, memory, kv_tokens, log_facts, run, engine_id, evidence)
    return _lower_max_num_seqs(mw, stream, log_facts, run, engine_id, kv_tokens, evidence,
                               reason=f"NVML shows only {fmt_pct(memory[0])} of GPU memory free, so the KV cache cannot grow")


def _raise_utilisation(
    mw: MetricsWindow,
    memory: tuple[float, float],
    kv_tokens: Setting | None,
    log_facts: LogFacts | None,
    run: RunRecord | None,
    engine_id: str,
    evidence: list[EvidenceValue],
) -> Remediation:
    free, total_gib = memory
    extra = free - UTILISATION_MARGIN
    utilisation = engine_setting("gpu_memory_utilization", log_facts, run)
    if utilisation is None:
        suggested, current = f"raise it by {extra:.2f} (at most {MAX_GPU_MEMORY_UTILIZATION})", None
    else:
        evidence.append(utilisation.evidence("gpu_memory_utilization"))
        current = float(utilisation.value)
        target = capped_utilization(round(current + extra, 2))
        suggested = f"{target:.2f}"
        kv_gib = engine_setting("kv_cache_memory_gib", log_facts, run)
        if kv_tokens is not None and kv_gib is not None and float(kv_gib.value) > 0:
            # KV capacity scales with the memory given to it: tokens per GiB stay the same.
            added_gib = (target - current) * total_gib
            grown = float(kv_tokens.value) * (1 + added_gib / float(kv_gib.value))
            suggested += f" (KV capacity from {int(kv_tokens.value):,} to about {grown:,.0f} tokens)"
    return Remediation(
        setting="gpu_memory_utilization",
        suggested=suggested,
        why=(f"NVML shows {fmt_pct(free)} of GPU memory free: {display(engine_id)} can give it to the KV cache, so "
             "running sequences stop running out of blocks"),
        verify=_verify(mw),
        current=f"{current:.2f}" if current is not None else None,
        where=engine_flag(engine_id, "gpu_memory_utilization"),
    )


def _raise_utilisation_if_free(
    mw: MetricsWindow,
    stream: StreamEvidence | None,
    log_facts: LogFacts | None,
    run: RunRecord | None,
    engine_id: str,
    kv_tokens: Setting | None,
    evidence: list[EvidenceValue],
) -> Remediation:
    """No NVML evidence (a remote engine, no driver here): vLLM's own first advice, with the fallback spelled out."""
    utilisation = engine_setting("gpu_memory_utilization", log_facts, run)
    if utilisation is not None:
        evidence.append(utilisation.evidence("gpu_memory_utilization"))
    current = float(utilisation.value) if utilisation is not None else None
    target = (f"{capped_utilization(current + UTILISATION_MARGIN):.2f}" if current is not None
              else f"raise it (at most {MAX_GPU_MEMORY_UTILIZATION})")
    fallback = _lower_max_num_seqs(mw, stream, log_facts, run, engine_id, kv_tokens, evidence,
                                   reason="if no GPU memory is free, the KV cache cannot grow")
    advice = ("vLLM's guidance is to give it more GPU memory first" if engine_id == VLLM
              else "giving it more GPU memory comes first")
    return Remediation(
        setting="gpu_memory_utilization",
        suggested=(f"{target} if nvidia-smi on the engine host shows free GPU memory; otherwise lower "
                   f"max_num_seqs: {fallback.suggested}"),
        why=(f"the KV cache ran out of blocks; {advice}. No NVML "
             "evidence was collected here, so the headroom is unknown"),
        verify=fallback.verify,
        current=f"{current:.2f}" if current is not None else None,
        where=_or_max_num_seqs(engine_id),
    )


def _verify(mw: MetricsWindow) -> str:
    return rerun(f"{metric_read(mw, 'preemptions')} to stay flat after the streams end, and no stalls in the streams")


def _or_max_num_seqs(engine: str) -> str:
    """Where memory is raised, with the sequence limit as the alternative, in the engine's flags (once
    for both on an unidentified engine: one list of spellings, not one inside the other)."""
    if engine == UNKNOWN:
        return engine_flag(engine, "gpu_memory_utilization", "max_num_seqs")
    memory = engine_flag(engine, "gpu_memory_utilization")
    if engine == VLLM:
        return memory + " (or --max-num-seqs)"
    return f"{memory} (or {engine_flag(engine, 'max_num_seqs')})"


def _lower_max_num_seqs(
    mw: MetricsWindow,
    stream: StreamEvidence | None,
    log_facts: LogFacts | None,
    run: RunRecord | None,
    engine_id: str,
    kv_tokens: Setting | None,
    evidence: list[EvidenceValue],
    *,
    reason: str,
    alternative: str = "",
) -> Remediation:
    """Admit only as many sequences as fit at full length.

    ``reason`` says why the cache stays the size it is; ``alternative`` names another lever, if any.
    """
    max_seqs = max_num_seqs_in_use(log_facts, run)
    current = int(max_seqs.value) if max_seqs is not None else None
    if max_seqs is not None:
        evidence.append(max_seqs.evidence("max_num_seqs"))
    per_request = tokens_per_request(stream)
    running_max = mw.running.max if mw.running else None
    if max_seqs is not None and max_seqs.lower_bound and current is not None:
        # A lower-bound default: the limit in use is at least it, and at least what was seen running;
        # only a fit below both is sure to lower it.
        current = max(current, math.floor(running_max or 0))
    suggested = f"lower it below the {running_max:.0f} sequences running at the peak" if running_max else "lower it"
    if kv_tokens is not None and per_request is not None:
        evidence.append(EvidenceValue("tokens per request", per_request[0], "tokens", per_request[1]))
        # the whole cache (target 1.0): a lower limit must keep every admitted sequence from preemption
        fit = max(sequences_that_fit(float(kv_tokens.value), per_request[0], target=1.0), 1)
        if current is None or fit < current:
            suggested = (f"{fit} ({int(kv_tokens.value):,} KV tokens / {per_request[0]:,.0f} tokens per request: "
                         "every admitted sequence fits at full length)")
    return Remediation(
        setting="max_num_seqs",
        suggested=suggested,
        why=(f"{reason}: with fewer concurrent sequences sharing it, each keeps its blocks to the end of its "
             "answer (lowering max_num_batched_tokens also limits how much a step allocates). " + alternative).strip(),
        verify=_verify(mw),
        current=max_seqs.current() if max_seqs is not None else None,
        where=engine_flag(engine_id, "max_num_seqs"),
    )
