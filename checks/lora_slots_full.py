"""Requests wait for a LoRA adapter slot: every GPU slot holds another adapter.

What it detects:
LoRA slots full: in the scrapes of the probe window, requests for an adapter were waiting while
all ``max_lora`` GPU adapter slots held other adapters (``vllm:lora_requests_info``), in at
least ``min_scrapes`` scrapes. vLLM v1 lists no adapter as waiting (its two label lists are the
same adapters, those being served: ``doctor.engine_readers.vllm_lora``), so there the check reads the
turns instead: more adapters served over the window than ``max_lora`` slots, while requests
waited with batch seats free (running below ``max_num_seqs``).

Why it matters:
vLLM batches requests of at most ``--max-loras`` distinct adapters at once; a request for
another adapter waits until a slot frees, then its adapter is loaded (from CPU memory when it
is among the ``--max-cpu-loras`` cached, else from disk) before its prefill. With more adapters
in use than slots, adapters are swapped in and out and TTFT grows with the churn (sglang
PR#13349: median TTFT 40 ms with 8 adapters on 8 slots, 6.3 s with 16), while the engine's
``waiting`` looks like ordinary queueing and ``max_num_seqs`` is not the limit.

Evidence:
metrics (the raw scrapes): ``vllm:lora_requests_info``, the latest series of each scrape
(``max_lora``, ``running_lora_adapters``, ``waiting_lora_adapters``); an adapter both running
and waiting is already loaded and does not count. metrics_window: the waiting and running peaks
and the engine's TTFT histogram; log_facts: ``max_num_seqs`` (the batch seats, for the v1 form); stream_stats: the client's TTFT p90, which decides whether users felt
the wait (over ``ttft_target_s``) or it is a risk (requests waited for a slot, TTFT within budget).
Not exposed by SGLang in this form (its ``sglang:lora_pool_*`` metrics count the pool, not which
adapters wait): on SGLang the check names the pool size its startup log gives
(``max_loras_per_batch``) and says so; nor by llama.cpp.

Remediation:
Raise ``--max-loras`` to the number of adapters in use at once (each slot costs GPU memory:
the KV cache shrinks), and keep ``--max-cpu-loras`` at least as large so a swapped-out adapter
reloads from CPU memory, not disk; or route each adapter to a subset of replicas so each
replica's adapters fit its slots.

Options:
min_scrapes: scrapes with an adapter shut out of the slots at which it fires
ttft_target_s: the first-token target (defaults to --ttft-budget): a slot wait that keeps TTFT within
    it is a risk, not felt latency

Example:
3 of 5 scrapes: requests for adapter sql-lora waited while the 2 slots held chat-lora and
code-lora; 3 adapters in use -> --max-loras 3.
2 adapters (alpha, beta) took turns in 1 slot while up to 4 requests waited with 4 of 128 batch
seats taken -> --max-loras 2 (a real vLLM 0.32, fixtures/bundles/realvllm-users-lora.json.gz).
"""

from __future__ import annotations

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import engine_flag, engine_path, engine_setting, max_num_seqs_stated, metric_read, rerun
from doctor.derive.engine import UNIDENTIFIED, EngineIdentity
from doctor.derive.log_facts import LogFacts
from doctor.derive.metrics_window import MetricsWindow
from doctor.derive.stream_stats import StreamStats
from doctor.engine_readers.vllm_lora import FAMILY, LoraSlots, lora_slots, served
from doctor.engines.names import SGLANG
from doctor.evidence import MetricsEvidence, RunRecord
from doctor.foundation.units import fmt_seconds
from doctor.model import Cause, EvidenceValue, Remediation, SymptomClass


@check(code="LD109", name="lora-slots-full", symptom=SymptomClass.PRE_FIRST_TOKEN, cause=Cause.QUEUE)
def lora_slots_full(
    metrics: MetricsEvidence,
    metrics_window: MetricsWindow | None = None,
    log_facts: LogFacts | None = None,
    stream_stats: StreamStats | None = None,
    run: RunRecord | None = None,
    engine: EngineIdentity = UNIDENTIFIED,
    *,
    min_scrapes: int = 2,
    ttft_target_s: float = 0.5,
) -> Result:
    states = lora_slots(metrics.scrapes)
    if not states:
        pool = engine_setting("max_loras", log_facts)
        if engine.id == SGLANG and pool is not None:
            return NotApplicable(f"SGLang's LoRA pool holds {pool.value} adapters per batch (max_loras_per_batch, "
                                 f"{pool.source}); which adapters wait for a slot is not exposed by SGLang "
                                 "(its sglang:lora_pool_slots_used / _total count the pool, not the waiting adapters)")
        return NotApplicable(f"no {FAMILY} in the scrapes: LoRA is off, or the engine does not expose it "
                             "(SGLang's lora_pool metrics are not read)")
    shut = [s for s in states if s.shut_out]
    in_use = sorted({a for s in states for a in (*s.running, *s.waiting)})
    slots = max((s.max_lora for s in states if s.max_lora is not None), default=None)
    evidence = [EvidenceValue("max_lora", slots, "slots", f"metrics: {FAMILY} label max_lora"),
                EvidenceValue("adapters in use", len(in_use), "adapters", f"metrics: {FAMILY}: {', '.join(in_use)}")]
    if len(shut) >= min_scrapes:
        worst = max(shut, key=lambda s: len(s.shut_out))
        evidence.insert(0, EvidenceValue("scrapes with an adapter shut out", len(shut), "scrapes",
                                         f"metrics: {FAMILY}, of {len(states)}"))
        if metrics_window is not None and metrics_window.waiting is not None:
            evidence.append(EvidenceValue("waiting max", metrics_window.waiting.max, "requests",
                                          f"metrics: {metric_read(metrics_window, 'waiting')}"))
        summary = (f"{len(shut)} of {len(states)} scrapes: requests for {', '.join(worst.shut_out)} waited while the "
                   f"{slots} slot(s) held {', '.join(worst.running)}; {len(in_use)} adapters in use")
    else:
        turns = _turns(states, slots, metrics_window, log_facts, run)
        if isinstance(turns, str):
            return Pass(f"{len(shut)} of {len(states)} scrapes with a request waiting for an adapter slot "
                        f"({len(in_use)} adapter(s) in use, max_lora {slots}); {turns}")
        summary, seats = turns
        evidence += seats
    ttft = _ttft(stream_stats, metrics_window)
    if ttft is not None:
        evidence.append(ttft[1])
        summary += f"; {ttft[1].name} {fmt_seconds(ttft[0])} against the {fmt_seconds(ttft_target_s)} budget"
    return Fire(
        title="Requests wait for a LoRA adapter slot",
        summary=summary,
        remediation=Remediation(
            setting="max_loras",
            suggested=(f"{len(in_use)} (the adapters in use at once here), with --max-cpu-loras at least as many so "
                       "a swapped-out adapter reloads from CPU memory; or route each adapter to fewer replicas"),
            why=("waiting requests were for adapters outside the full GPU slots: they wait for a slot and an adapter "
                 "load, which more batch seats (max_num_seqs) or replicas sharing every adapter would not cure"),
            verify=rerun("TTFT p90 down for the adapters that waited, and no request left waiting while batch seats "
                         "are free; the KV cache shrinks by the slots' memory"),
            current=str(slots) if slots is not None else None,
            where=engine_flag(engine.id, "max_loras"),
        ),
        # a slot wait is felt only past the first-token budget (docs/verdict.md); unmeasured, a risk
        felt=ttft is not None and ttft[0] > ttft_target_s,
        evidence=evidence,
    )


def _turns(states: list[LoraSlots], slots: int | None, metrics_window: MetricsWindow | None,
           log_facts: LogFacts | None, run: RunRecord | None) -> tuple[str, list[EvidenceValue]] | str:
    """vLLM v1's form (no adapter ever listed as waiting): more adapters served over the window than
    slots while requests waited with batch seats free; (summary, evidence), else why it does not hold.

    Free seats are what tell a slot wait from plain queueing: with every seat taken, requests wait
    for a seat whatever their adapter (LD101's case). The seats are those stated
    (``max_num_seqs_stated``), never inferred from a flat ``running`` gauge."""
    turned = served(states)
    if slots is None or len(turned) <= slots:
        return f"{len(turned)} adapter(s) served over the window, within the {slots} slot(s)"
    waiting = metrics_window.waiting if metrics_window is not None else None
    running = metrics_window.running if metrics_window is not None else None
    if waiting is None or not waiting.max:
        return f"{len(turned)} adapters took turns in {slots} slot(s), but no request waited"
    seats = max_num_seqs_stated(log_facts, run)
    if seats is None or running is None or running.max is None:
        return (f"{len(turned)} adapters took turns in {slots} slot(s) while requests waited, but without "
                "max_num_seqs (--log) a wait for a slot cannot be told from a full batch")
    if running.max >= float(seats.value):
        return (f"{len(turned)} adapters took turns in {slots} slot(s), but every batch seat was taken "
                f"(running up to {running.max:g} of max_num_seqs {seats.value}): queueing for a seat")
    summary = (f"{len(turned)} adapters ({', '.join(turned)}) took turns in {slots} slot(s) while up to "
               f"{waiting.max:g} requests waited with {running.max:g} of {seats.value} batch seats taken: "
               "they waited for a slot (vLLM v1 lists no adapter as waiting)")
    return summary, [
        EvidenceValue("adapters served", len(turned), "adapters", f"metrics: {FAMILY} running_lora_adapters, every scrape"),
        EvidenceValue("waiting max", waiting.max, "requests", f"metrics: {metric_read(metrics_window, 'waiting')}"),
        EvidenceValue("running max", running.max, "requests", f"metrics: {metric_read(metrics_window, 'running')}"),
        EvidenceValue("max_num_seqs", seats.value, "seats", seats.source),
    ]


def _ttft(stream_stats: StreamStats | None, metrics_window: MetricsWindow | None) -> tuple[float, EvidenceValue] | None:
    """The TTFT users got over the window, with its evidence: the client's p90, else the engine's
    TTFT histogram mean; ``None`` when neither was measured."""
    path = engine_path(stream_stats) if stream_stats is not None else None
    if path is not None and path.ttft.p90 is not None:
        return path.ttft.p90, EvidenceValue("TTFT p90", path.ttft.p90, "s", f"stream: {path.path}, n={path.ttft.n}")
    hist = metrics_window.ttft if metrics_window is not None else None
    if hist is not None and hist.mean is not None and hist.count:
        return hist.mean, EvidenceValue("engine TTFT mean", hist.mean, "s", f"metrics: {hist.metric} mean, n={hist.count:.0f}")
    return None
