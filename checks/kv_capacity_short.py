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
from dataclasses import dataclass
from typing import Any

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import (
    Setting,
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


@dataclass(frozen=True)
class Found:
    """The KV cache against the batch limit: full-length requests that fit (from the KV size over
    max_model_len, else the log's maximum concurrency for ``per`` tokens per request), the cache in
    tokens, the probe's tokens per request and how many of those fit (``fit_now``), the batch limit
    to suggest, and what an fp8 KV cache would hold (``--model-dir``)."""

    engine: str
    seqs: Setting
    kv: Setting | None
    mml: Setting | None
    conc: Setting | None
    per: Setting | None
    from_concurrency: bool
    fit_full: float
    capacity_tokens: float
    per_request: tuple[float, str] | None
    fit_now: float
    suggested: int
    fp8_tokens: int | None


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
    per = None
    if kv is not None and mml is not None:
        fit_full, capacity_tokens = kv.value / mml.value, float(kv.value)
    elif conc is not None:
        fit_full = float(conc.value)
        per = engine_setting("max_concurrency_tokens", log_facts, run) or mml
        capacity_tokens = fit_full * per.value if per is not None else 0.0
    else:
        return NotApplicable("neither the KV cache size nor the maximum concurrency is in the log")
    per_request = tokens_per_request(stream) if capacity_tokens else None
    if per_request is not None:
        suggested = max(1, sequences_that_fit(capacity_tokens, per_request[0], kv_target))
    else:
        suggested = max(1, math.floor(fit_full))
    fp8 = (sizing or {}).get("with_fp8")
    found = Found(
        engine=engine.id, seqs=seqs, kv=kv, mml=mml, conc=conc, per=per,
        from_concurrency=not (kv is not None and mml is not None), fit_full=fit_full, capacity_tokens=capacity_tokens,
        per_request=per_request, fit_now=capacity_tokens / per_request[0] if per_request is not None else 0.0,
        suggested=suggested, fp8_tokens=fp8["kv_cache_tokens"] if fp8 and capacity_tokens else None,
    )
    if fit_full >= min_ratio * seqs.value:
        if seqs.lower_bound:  # the limit in use may be larger than the default's floor
            return NotApplicable(_limit_unknown(found))
        return Pass(_full_batch_fits(found))
    if suggested >= seqs.value:
        if seqs.lower_bound:
            return NotApplicable(_limit_unknown(found))
        return Pass(_served_fit(found))
    return Fire(
        felt=False,  # a capacity that has not run out yet (preemptions, when it does, are LD201's)
        title="The KV cache cannot hold a full batch",
        summary=_summary(found),
        remediation=_remediation(found, kv_target),
        severity=Severity.WARNING if per_request is not None and found.fit_now < seqs.value else Severity.INFO,
        evidence=_evidence(found),
    )


def _arithmetic(found: Found) -> str:
    seqs, kv, mml, per = found.seqs, found.kv, found.mml, found.per
    if not found.from_concurrency and kv is not None and mml is not None:
        return (f"KV cache {kv.value:,} tokens vs max_num_seqs {seqs.value} x max_model_len {mml.value:,} = "
                f"{seqs.value * mml.value:,} tokens: {found.fit_full:.1f} full-length requests fit")
    return (f"log: Maximum concurrency {found.fit_full:.2f}x for {per.value if per else 'max_model_len'} tokens per "
            f"request vs max_num_seqs {seqs.value}")


def _limit_unknown(found: Found) -> str:
    return f"{_arithmetic(found)}; max_num_seqs in use is unknown: {found.seqs.current()}"


def _full_batch_fits(found: Found) -> str:
    return f"{_arithmetic(found)}: the cache holds a full batch"


def _served_fit(found: Found) -> str:
    return f"{_arithmetic(found)}; the requests served fit max_num_seqs {found.seqs.value}"


def _summary(found: Found) -> str:
    summary = _arithmetic(found)
    if found.per_request is not None:
        summary += f"; at {found.per_request[0]:,.0f} tokens per request {found.fit_now:.1f} fit"
        if found.fit_now < found.seqs.value:
            summary += f" (< max_num_seqs {found.seqs.value})"
    return summary


def _evidence(found: Found) -> list[EvidenceValue]:
    evidence = [found.seqs.evidence("max_num_seqs")]
    evidence += [
        s.evidence(n, "tokens") for n, s in (("KV cache", found.kv), ("max_model_len", found.mml)) if s is not None
    ]
    if found.conc is not None:
        evidence.append(found.conc.evidence("maximum concurrency (log)", "x"))
    fit_source = found.conc.source if found.from_concurrency and found.conc is not None else "KV tokens / max_model_len"
    evidence.append(EvidenceValue("full-length requests that fit", round(found.fit_full, 2), "", fit_source))
    if found.per_request is not None:
        evidence.append(EvidenceValue("tokens per request", round(found.per_request[0], 1), "tokens",
                                      found.per_request[1]))
    return evidence


def _remediation(found: Found, kv_target: float) -> Remediation:
    seqs = found.seqs
    if found.per_request is not None:
        tokens = found.per_request[0]
        holds = f"about {found.fit_now:.1f} requests of {tokens:,.0f} tokens"
        basis = f"{found.capacity_tokens:,.0f} KV tokens x {kv_target} / {tokens:,.0f} tokens per request"
    else:
        holds = f"{found.fit_full:.1f} full-length requests"
        basis = "the full-length requests the cache holds"
    fp8_note = ""
    if found.fp8_tokens is not None:  # --model-dir: what the same budget holds with an fp8 KV cache, a numerics change
        fp8_note = (f" With kv_cache_dtype fp8 the same memory holds {found.fp8_tokens:,} tokens, "
                    f"{found.fp8_tokens / found.capacity_tokens:.1f}x as many sequences, but it changes the answers: "
                    f"switch only once `{gate_command(long_context=True)}` passes.")
    counter = engine_metric("preemptions", found.engine)
    return Remediation(
        setting="max_num_seqs",
        suggested=str(found.suggested),
        current=seqs.current(),
        where=engine_flag(found.engine, "max_num_seqs"),
        why=(
            f"max_num_seqs admits {seqs.value} sequences but the KV cache holds {holds}: a full batch "
            f"preempts. Suggested from {basis}. Raising gpu_memory_utilization or lowering max_model_len "
            "grows the room per request instead." + fp8_note
        ),
        verify=rerun((f"{counter}_total unchanged over the probe and " if counter else "") + "no mid-answer stalls"),
    )
