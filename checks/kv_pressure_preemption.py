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
from dataclasses import dataclass

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


@dataclass(frozen=True)
class Stalls:
    """The engine path's stalls: how many, the largest gap and the median gap beside it (with their counts)."""

    path: str
    count: int
    longest_s: float
    longest_n: int
    median_s: float
    median_n: int


@dataclass(frozen=True)
class Waiting:
    """The waiting gauge's peak and when it was read: ``stalls`` (in ``scrapes`` scrapes inside them),
    ``probe`` (no scrape fell inside a stall) or ``prometheus`` (history, on another clock)."""

    peak: float
    during: str
    scrapes: int = 0


@dataclass(frozen=True)
class Found:
    """What the window and the streams showed: preemptions, KV usage, stalls, and the metrics read."""

    engine: str
    preemptions_metric: str
    finished_metric: str
    waiting_metric: str
    preempted: float | None
    finished: float
    share: float | None
    logged: int
    kv_max: float | None
    stalls: Stalls | None
    waiting: Waiting | None


@dataclass(frozen=True)
class Lowering:
    """A lower ``max_num_seqs``: the limit in use, the running peak, and the fit (when it lowers the
    limit) from the KV capacity and the tokens per request (read only beside the capacity)."""

    max_seqs: Setting | None
    running_max: float | None
    kv_tokens: Setting | None
    per_request: tuple[float, str] | None
    fit: int | None


@dataclass(frozen=True)
class Cure:
    """The lever and the numbers behind it.

    ``lever``: ``raise`` (NVML shows free memory: ``gpu_memory_utilization`` to ``target``, the KV
    capacity growing to ``grown`` tokens when known), ``unknown-headroom`` (no NVML: raise it if
    memory is free, else ``lowering``), ``bytes`` (the cache is sized by ``explicit``) or
    ``no-headroom`` (NVML shows too little free): both of the last lower ``max_num_seqs``.
    """

    lever: str
    kv_tokens: Setting | None
    memory: tuple[float, float] | None
    explicit: Setting | None = None
    utilisation: Setting | None = None
    target: float | None = None
    grown: float | None = None
    lowering: Lowering | None = None


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
        return NotApplicable(_no_signal(metric_read(mw, "preemptions")))
    finished = sum(mw.finished_by_reason.values())
    path = engine_path(stream_stats) if stream_stats is not None else None
    stalls = path.stalls if path is not None else 0
    seen = None
    if path is not None and stalls and path.max_gap.max is not None and path.itl.p50:
        seen = Stalls(path.path, stalls, path.max_gap.max, path.max_gap.n, path.itl.p50, path.itl.n)
    found = Found(
        engine=engine.id,
        preemptions_metric=metric_read(mw, "preemptions"),
        finished_metric=metric_read(mw, "finished_by_reason"),
        waiting_metric=metric_read(mw, "waiting"),
        preempted=preempted,
        finished=finished,
        share=preempted / finished if preempted and finished else None,
        logged=logged,
        kv_max=kv_max,
        stalls=seen,
        waiting=_waiting(mw, path, stream) if path is not None and stalls else None,
    )
    was_preempted = bool(preempted) or bool(logged)
    if not was_preempted and not (kv_max is not None and kv_max >= kv_full and stalls):
        return Pass(_no_preemption(found))
    cure = _cure(mw, stream, log_facts, gpu, run, gpu_headroom)
    return Fire(
        title="The KV cache ran full and running requests were preempted",
        summary=_summary(found),
        remediation=_remediation(found, cure),
        severity=(Severity.CRITICAL if was_preempted and (stalls or (found.share is not None
                                                                    and found.share >= critical_share))
                  else Severity.WARNING),
        evidence=_evidence(found) + _cure_evidence(cure),
    )


def _waiting(mw: MetricsWindow, path: PathStats, stream: StreamEvidence | None) -> Waiting | None:
    """The waiting gauge's peak in the scrapes taken during a stall, else during the probe.

    A preempted request goes back to the waiting queue: requests waiting while a stream is stalled
    are the preemption seen from the scheduler's side. Before / after scrapes see an idle engine.
    Only scrapes share the probe's clock: Prometheus history counts its sample times from the start
    of the range it was asked for, so its peak over that window is all it can give.
    """
    if mw.waiting is None:
        return None
    if mw.source != "scrape":
        return Waiting(mw.waiting.max, "prometheus") if mw.waiting.max is not None else None
    spans = _stall_spans(path, stream) if stream is not None else []
    during = [v for t, v in mw.waiting.samples if any(a <= t <= b for a, b in spans)]
    if during:
        return Waiting(max(during), "stalls", len(during))
    if len(mw.waiting.samples) > 2 and mw.waiting.max is not None:
        return Waiting(mw.waiting.max, "probe")
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


def _cure(mw: MetricsWindow, stream: StreamEvidence | None, log_facts: LogFacts | None, gpu: GpuEvidence | None,
          run: RunRecord | None, gpu_headroom: float) -> Cure:
    """Grow the cache where the GPU has memory for it, else admit fewer sequences."""
    memory = _free_memory(gpu)
    kv_tokens = engine_setting("kv_cache_tokens", log_facts, run)
    explicit = engine_setting("kv_cache_memory_bytes", log_facts, run)
    if explicit is not None:
        return Cure("bytes", kv_tokens, memory, explicit=explicit,
                    lowering=_lowering(mw, stream, log_facts, run, kv_tokens))
    if memory is None:
        utilisation = engine_setting("gpu_memory_utilization", log_facts, run)
        target = capped_utilization(float(utilisation.value) + UTILISATION_MARGIN) if utilisation is not None else None
        return Cure("unknown-headroom", kv_tokens, memory, utilisation=utilisation, target=target,
                    lowering=_lowering(mw, stream, log_facts, run, kv_tokens))
    if memory[0] < gpu_headroom:
        return Cure("no-headroom", kv_tokens, memory, lowering=_lowering(mw, stream, log_facts, run, kv_tokens))
    utilisation = engine_setting("gpu_memory_utilization", log_facts, run)
    if utilisation is None:
        return Cure("raise", kv_tokens, memory)
    current = float(utilisation.value)
    target = capped_utilization(round(current + memory[0] - UTILISATION_MARGIN, 2))
    grown = None
    kv_gib = engine_setting("kv_cache_memory_gib", log_facts, run)
    if kv_tokens is not None and kv_gib is not None and float(kv_gib.value) > 0:
        # KV capacity scales with the memory given to it: tokens per GiB stay the same.
        added_gib = (target - current) * memory[1]
        grown = float(kv_tokens.value) * (1 + added_gib / float(kv_gib.value))
    return Cure("raise", kv_tokens, memory, utilisation=utilisation, target=target, grown=grown)


def _lowering(mw: MetricsWindow, stream: StreamEvidence | None, log_facts: LogFacts | None, run: RunRecord | None,
              kv_tokens: Setting | None) -> Lowering:
    """Admit only as many sequences as fit at full length."""
    max_seqs = max_num_seqs_in_use(log_facts, run)
    current = int(max_seqs.value) if max_seqs is not None else None
    per_request = tokens_per_request(stream) if kv_tokens is not None else None
    running_max = mw.running.max if mw.running else None
    if max_seqs is not None and max_seqs.lower_bound and current is not None:
        # A lower-bound default: the limit in use is at least it, and at least what was seen running;
        # only a fit below both is sure to lower it.
        current = max(current, math.floor(running_max or 0))
    fit = None
    if kv_tokens is not None and per_request is not None:
        # the whole cache (target 1.0): a lower limit must keep every admitted sequence from preemption
        fit = max(sequences_that_fit(float(kv_tokens.value), per_request[0], target=1.0), 1)
        if current is not None and fit >= current:
            fit = None
    return Lowering(max_seqs, running_max, kv_tokens, per_request, fit)


def _no_signal(preemptions_metric: str) -> str:
    return f"/metrics has neither {preemptions_metric} nor a KV usage gauge"


def _no_preemption(found: Found) -> str:
    return "no preemption" + (f"; KV usage up to {fmt_pct(found.kv_max)}" if found.kv_max is not None else "")


def _waiting_where(waiting: Waiting) -> str:
    return {"prometheus": "during the Prometheus window", "stalls": "during the stalls"}.get(
        waiting.during, "during the probe")


def _summary(found: Found) -> str:
    parts: list[str] = []
    if found.preempted is not None:
        if found.share is not None:
            parts.append(f"{found.preempted:.0f} preemptions in the window, {found.share:.2f} per finished request "
                         f"(n={found.finished:.0f})")
        elif found.preempted > 0:
            parts.append(f"{found.preempted:.0f} preemptions in the window")
    if found.logged:
        parts.append(f"{found.logged} preemption warnings in the log")
    if found.kv_max is not None:
        parts.append(f"KV usage up to {fmt_pct(found.kv_max)}")
    if (stalls := found.stalls) is not None:
        parts.append(f"{stalls.count} stalls on {stalls.path}, longest gap {fmt_seconds(stalls.longest_s)} "
                     f"vs median {fmt_seconds(stalls.median_s)}")
    if found.waiting is not None:
        parts.append(f"up to {found.waiting.peak:.0f} waiting {_waiting_where(found.waiting)}")
    return "; ".join(parts)


def _evidence(found: Found) -> list[EvidenceValue]:
    evidence: list[EvidenceValue] = []
    if found.preempted is not None:
        evidence.append(EvidenceValue("preemptions", found.preempted, "", f"metrics: {found.preemptions_metric} delta"))
        if found.share is not None:
            evidence.append(EvidenceValue("requests finished", found.finished, "",
                                          f"metrics: {found.finished_metric} delta"))
    if found.logged:
        evidence.append(EvidenceValue("preemption warnings", found.logged, "", "log: 'is preempted by' lines"))
    if found.kv_max is not None:
        evidence.append(EvidenceValue("KV usage max", found.kv_max, "fraction", "metrics: KV cache usage gauge"))
    if (stalls := found.stalls) is not None:
        evidence += [
            EvidenceValue("stalls", stalls.count, "gaps", f"stream: {stalls.path}, gaps > 5x the request's median"),
            EvidenceValue("largest gap", stalls.longest_s, "s", f"stream: {stalls.path} max gap, n={stalls.longest_n}"),
            EvidenceValue("median gap", stalls.median_s, "s", f"stream: {stalls.path} ITL p50, n={stalls.median_n}"),
        ]
    if (waiting := found.waiting) is not None:
        source = {
            "prometheus": (f"metrics: {found.waiting_metric}, Prometheus history (its clock is not the probe's, "
                           "so the stalls cannot be matched)"),
            "stalls": f"metrics: {found.waiting_metric}, {waiting.scrapes} scrapes inside stalls",
        }.get(waiting.during, f"metrics: {found.waiting_metric} (no scrape fell inside a stall)")
        evidence.append(EvidenceValue(f"waiting max {_waiting_where(waiting)}", waiting.peak, "requests", source))
    return evidence


def _cure_evidence(cure: Cure) -> list[EvidenceValue]:
    """The settings and readings the remediation rests on, in the order it reads them."""
    evidence: list[EvidenceValue] = []
    if cure.kv_tokens is not None:
        evidence.append(cure.kv_tokens.evidence("KV cache capacity", "tokens"))
    if cure.memory is not None:
        evidence.append(EvidenceValue("GPU memory free", cure.memory[0], "fraction", "gpu: NVML, least free device"))
    if cure.explicit is not None:
        evidence.append(cure.explicit.evidence("kv_cache_memory_bytes", "bytes"))
    if cure.utilisation is not None:
        evidence.append(cure.utilisation.evidence("gpu_memory_utilization"))
    if (lowering := cure.lowering) is not None:
        if lowering.max_seqs is not None:
            evidence.append(lowering.max_seqs.evidence("max_num_seqs"))
        if lowering.per_request is not None:
            evidence.append(EvidenceValue("tokens per request", lowering.per_request[0], "tokens",
                                          lowering.per_request[1]))
    return evidence


def _remediation(found: Found, cure: Cure) -> Remediation:
    lowering, engine_id = cure.lowering, found.engine
    if cure.lever == "bytes" and cure.explicit is not None and lowering is not None:
        return _lower_max_num_seqs(
            found, lowering,
            reason=(f"the KV cache is sized explicitly (kv_cache_memory_bytes = {cure.explicit.value}), which "
                    "gpu_memory_utilization does not change"),
            alternative="Raising kv_cache_memory_bytes instead grows the cache, if the GPU has memory to spare.",
        )
    if cure.lever == "unknown-headroom" and lowering is not None:
        fallback = _lower_max_num_seqs(found, lowering, reason="if no GPU memory is free, the KV cache cannot grow")
        target = f"{cure.target:.2f}" if cure.target is not None else f"raise it (at most {MAX_GPU_MEMORY_UTILIZATION})"
        advice = ("vLLM's guidance is to give it more GPU memory first" if engine_id == VLLM
                  else "giving it more GPU memory comes first")
        return Remediation(
            setting="gpu_memory_utilization",
            suggested=(f"{target} if nvidia-smi on the engine host shows free GPU memory; otherwise lower "
                       f"max_num_seqs: {fallback.suggested}"),
            why=(f"the KV cache ran out of blocks; {advice}. No NVML "
                 "evidence was collected here, so the headroom is unknown"),
            verify=fallback.verify,
            current=_utilisation_now(cure),
            where=_or_max_num_seqs(engine_id),
        )
    if cure.lever == "raise" and cure.memory is not None:
        free = cure.memory[0]
        if cure.target is None:
            suggested = f"raise it by {free - UTILISATION_MARGIN:.2f} (at most {MAX_GPU_MEMORY_UTILIZATION})"
        else:
            suggested = f"{cure.target:.2f}"
            if cure.grown is not None and cure.kv_tokens is not None:
                suggested += f" (KV capacity from {int(cure.kv_tokens.value):,} to about {cure.grown:,.0f} tokens)"
        return Remediation(
            setting="gpu_memory_utilization",
            suggested=suggested,
            why=(f"NVML shows {fmt_pct(free)} of GPU memory free: {display(engine_id)} can give it to the KV cache, "
                 "so running sequences stop running out of blocks"),
            verify=_verify(found),
            current=_utilisation_now(cure),
            where=engine_flag(engine_id, "gpu_memory_utilization"),
        )
    assert cure.memory is not None and lowering is not None  # the no-headroom lever
    return _lower_max_num_seqs(
        found, lowering, reason=f"NVML shows only {fmt_pct(cure.memory[0])} of GPU memory free, so the KV cache cannot grow")


def _utilisation_now(cure: Cure) -> str | None:
    return f"{float(cure.utilisation.value):.2f}" if cure.utilisation is not None else None


def _verify(found: Found) -> str:
    return rerun(f"{found.preemptions_metric} to stay flat after the streams end, and no stalls in the streams")


def _or_max_num_seqs(engine: str) -> str:
    """Where memory is raised, with the sequence limit as the alternative, in the engine's flags (once
    for both on an unidentified engine: one list of spellings, not one inside the other)."""
    if engine == UNKNOWN:
        return engine_flag(engine, "gpu_memory_utilization", "max_num_seqs")
    memory = engine_flag(engine, "gpu_memory_utilization")
    if engine == VLLM:
        return memory + " (or --max-num-seqs)"
    return f"{memory} (or {engine_flag(engine, 'max_num_seqs')})"


def _lower_max_num_seqs(found: Found, lowering: Lowering, *, reason: str, alternative: str = "") -> Remediation:
    """Admit only as many sequences as fit at full length.

    ``reason`` says why the cache stays the size it is; ``alternative`` names another lever, if any.
    """
    if lowering.fit is not None and lowering.kv_tokens is not None and lowering.per_request is not None:
        suggested = (f"{lowering.fit} ({int(lowering.kv_tokens.value):,} KV tokens / "
                     f"{lowering.per_request[0]:,.0f} tokens per request: every admitted sequence fits at full length)")
    elif lowering.running_max:
        suggested = f"lower it below the {lowering.running_max:.0f} sequences running at the peak"
    else:
        suggested = "lower it"
    return Remediation(
        setting="max_num_seqs",
        suggested=suggested,
        why=(f"{reason}: with fewer concurrent sequences sharing it, each keeps its blocks to the end of its "
             "answer (lowering max_num_batched_tokens also limits how much a step allocates). " + alternative).strip(),
        verify=_verify(found),
        current=lowering.max_seqs.current() if lowering.max_seqs is not None else None,
        where=engine_flag(found.engine, "max_num_seqs"),
    )
