"""The KV cache cannot hold a full batch.

What it detects:
The engine admits more sequences than its KV cache can hold: KV capacity in tokens is below
`max_num_seqs` x `max_model_len` (the log's "Maximum concurrency for N tokens per request: X"
is below `max_num_seqs`). With the probe's own request size (usage trailers, else its shape),
it also says whether requests of that size fit `max_num_seqs` at once.

Why it matters:
When the batch fills with long requests, the scheduler runs out of KV blocks and preempts
running sequences: they stall mid-answer and are recomputed later. `max_num_seqs` then promises
a concurrency the memory cannot deliver. With requests far shorter than `max_model_len` this is
only a ceiling (info); when the probe's own requests do not fit, preemption is one busy minute
away (warning).

Evidence:
Startup log (or run record): KV cache size in tokens, "Maximum concurrency" and its tokens per
request, `max_num_seqs` (when a V1 log's non-default args omit it, `vllm serve`'s default: 128 on
CPU builds, at least 256 on GPUs), `max_model_len` (else /v1/models `max_model_len`). Stream: tokens per
request (prompt + completion from the usage trailers, else the probe's prompt_tokens +
max_tokens).

Remediation:
Lower `max_num_seqs` to what the cache holds at the request size you serve: KV tokens x 0.9 /
tokens per request (or raise `gpu_memory_utilization` / lower `max_model_len` to grow the cache
per request instead). With the model's config (`--model-dir`), it also says how many more
sequences an fp8 KV cache would hold in the same memory, and the `llm-doctor verify --long-context`
gate to pass before switching (fp8 changes the answers).

Options:
min_ratio: fires when full-length requests that fit / max_num_seqs is below this
kv_target: the share of the cache the suggestion fills

Example:
LD401 kv-capacity-short: KV cache 4,096 tokens < max_num_seqs 8 x max_model_len 1,024 = 8,192
tokens: 4.0 full-length requests fit; at 768 tokens per request (n=8) 5.3 fit -> max_num_seqs 4.
"""

from __future__ import annotations

import math
from typing import Any

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import (
    engine_flag,
    engine_metric,
    engine_setting,
    gate_command,
    max_num_seqs_in_use,
    model_len,
    rerun,
    sequences_that_fit,
    tokens_per_request,
)
from doctor.derive.engine import UNIDENTIFIED, EngineIdentity
from doctor.derive.log_facts import LogFacts
from doctor.evidence import EndpointsEvidence, RunRecord, StreamEvidence
from doctor.model import Cause, EvidenceValue, Remediation, Severity, SymptomClass


@check(code="LD401", name="kv-capacity-short", symptom=SymptomClass.CAPACITY_CONFIG, cause=Cause.CAPACITY)
def kv_capacity_short(
    log_facts: LogFacts,
    endpoints: EndpointsEvidence | None = None,
    stream: StreamEvidence | None = None,
    run: RunRecord | None = None,
    sizing: dict[str, Any] | None = None,
    engine: EngineIdentity = UNIDENTIFIED,
    *,
    min_ratio: float = 1.0,
    kv_target: float = 0.9,
) -> Result:
    seqs = max_num_seqs_in_use(log_facts, run)
    if seqs is None:
        return NotApplicable("max_num_seqs is not in the log or the run record, and its default is unknown")
    kv = engine_setting("kv_cache_tokens", log_facts, run)
    mml = model_len(log_facts, run, endpoints)
    conc = engine_setting("max_concurrency", log_facts, run)
    if kv is not None and mml is not None:
        fit_full, capacity_tokens = kv.value / mml.value, float(kv.value)
        fit_source = "KV tokens / max_model_len"
        arithmetic = (
            f"KV cache {kv.value:,} tokens vs max_num_seqs {seqs.value} x max_model_len {mml.value:,} = "
            f"{seqs.value * mml.value:,} tokens: {fit_full:.1f} full-length requests fit"
        )
    elif conc is not None:
        fit_full = float(conc.value)
        per = engine_setting("max_concurrency_tokens", log_facts, run) or mml
        capacity_tokens = fit_full * per.value if per is not None else 0.0
        fit_source = conc.source
        arithmetic = (
            f"log: Maximum concurrency {fit_full:.2f}x for {per.value if per else 'max_model_len'} tokens per "
            f"request vs max_num_seqs {seqs.value}"
        )
    else:
        return NotApplicable("neither the KV cache size nor the maximum concurrency is in the log")
    if fit_full >= min_ratio * seqs.value:
        if seqs.lower_bound:  # the limit in use may be larger than the default's floor
            return NotApplicable(f"{arithmetic}; max_num_seqs in use is unknown: {seqs.current()}")
        return Pass(f"{arithmetic}: the cache holds a full batch")

    evidence = [seqs.evidence("max_num_seqs")]
    evidence += [
        s.evidence(n, "tokens") for n, s in (("KV cache", kv), ("max_model_len", mml)) if s is not None
    ]
    if conc is not None:
        evidence.append(conc.evidence("maximum concurrency (log)", "x"))
    evidence.append(EvidenceValue("full-length requests that fit", round(fit_full, 2), "", fit_source))
    per_request = tokens_per_request(stream)
    severity, summary = Severity.INFO, arithmetic
    if per_request is not None and capacity_tokens:
        tokens, source = per_request
        fit_now = capacity_tokens / tokens
        evidence.append(EvidenceValue("tokens per request", round(tokens, 1), "tokens", source))
        summary += f"; at {tokens:,.0f} tokens per request {fit_now:.1f} fit"
        if fit_now < seqs.value:
            severity = Severity.WARNING
            summary += f" (< max_num_seqs {seqs.value})"
        suggested = max(1, sequences_that_fit(capacity_tokens, tokens, kv_target))
        holds = f"about {fit_now:.1f} requests of {tokens:,.0f} tokens"
        basis = f"{capacity_tokens:,.0f} KV tokens x {kv_target} / {tokens:,.0f} tokens per request"
    else:
        suggested = max(1, math.floor(fit_full))
        holds = f"{fit_full:.1f} full-length requests"
        basis = "the full-length requests the cache holds"
    fp8 = (sizing or {}).get("with_fp8")
    fp8_note = ""
    if fp8 and capacity_tokens:  # --model-dir: what the same budget holds with an fp8 KV cache, a numerics change
        fp8_note = (f" With kv_cache_dtype fp8 the same memory holds {fp8['kv_cache_tokens']:,} tokens, "
                    f"{fp8['kv_cache_tokens'] / capacity_tokens:.1f}x as many sequences, but it changes the answers: "
                    f"switch only once `{gate_command(long_context=True)}` passes.")
    engine_id = engine.id
    if suggested >= seqs.value:
        if seqs.lower_bound:
            return NotApplicable(f"{arithmetic}; max_num_seqs in use is unknown: {seqs.current()}")
        return Pass(f"{arithmetic}; the requests served fit max_num_seqs {seqs.value}")
    counter = engine_metric("preemptions", engine_id)
    return Fire(
        felt=False,  # a capacity that has not run out yet (preemptions, when it does, are LD201's)
        title="The KV cache cannot hold a full batch",
        summary=summary,
        remediation=Remediation(
            setting="max_num_seqs",
            suggested=str(suggested),
            current=seqs.current(),
            where=engine_flag(engine_id, "max_num_seqs"),
            why=(
                f"max_num_seqs admits {seqs.value} sequences but the KV cache holds {holds}: a full batch "
                f"preempts. Suggested from {basis}. Raising gpu_memory_utilization or lowering max_model_len "
                "grows the room per request instead." + fp8_note
            ),
            verify=rerun((f"{counter}_total unchanged over the probe and " if counter else "") + "no mid-answer stalls"),
        ),
        severity=severity,
        evidence=evidence,
    )
