"""Prefill takes most of the time to first token, on long prompts.

What it detects:
Prefill-bound first token: the server's prefill time (``vllm:request_prefill_time_seconds``,
else TTFT minus queue time) is most of its time to first token, and the prompts are long.

Why it matters:
Prefill computes the whole prompt before the first token; its cost grows with the prompt.
When it dominates, queueing and the network are not the problem: the prompt work is. Three
levers exist, in the order this check tries them: skip work already done (prefix caching),
give each step a larger token budget (chunked prefill splits long prompts over steps of
``max_num_batched_tokens`` tokens), or add compute.

Evidence:
metrics_window: prefill (or TTFT - queue) and TTFT means. Stream: prompt tokens from the
usage trailers (else the probe's shape), and whether every request repeated one prompt
(``--payload``); prefix-cache hits. Startup log / run record: ``enable_prefix_caching``,
``chunked_prefill``, ``max_num_batched_tokens``, ``tensor_parallel_size``.

Remediation:
Prefix caching off and a shared prefix seen -> ``enable_prefix_caching`` (requests sharing a
system prompt, few-shot examples or chat history skip that part's prefill). A prefix is seen
shared when the probe repeated one prompt (an application body, ``--payload``, is sent
unchanged; the default probe numbers each prompt, so its prompts share nothing) or the prefix
cache counted hits. Else chunked prefill with a small
``max_num_batched_tokens`` (below the prompt, or <= ``small_batched_tokens``) -> raise it:
better TTFT, worse inter-token latency for the streams running beside a long prefill. Else
more compute per replica (``tensor_parallel_size``) or shorter prompts.

Options:
prefill_share: prefill / TTFT share that fires
min_prefill_s: ignore prefills shorter than this
long_prompt_tokens: a mean prompt at least this long is long
small_batched_tokens: a chunked-prefill step budget at most this is small

Example:
prefill 1.10 s is 92 % of TTFT 1.20 s; prompts 3,900 tokens; chunked prefill with
max_num_batched_tokens 512 -> raise max_num_batched_tokens to 4096.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import Setting, engine_flag, engine_metric, engine_setting, is_off, metric_read, rerun
from doctor.derive.engine import UNIDENTIFIED, EngineIdentity
from doctor.derive.log_facts import LogFacts
from doctor.derive.metrics_window import MetricsWindow
from doctor.derive.stream_stats import measured_prompt_tokens
from doctor.engines.names import VLLM
from doctor.evidence import RunRecord, StreamEvidence
from doctor.foundation.units import fmt_pct, fmt_seconds
from doctor.model import Cause, EvidenceValue, Remediation, SymptomClass

#: The largest step budget this check suggests (vLLM's default for big GPUs is 8192).
MAX_SUGGESTED_BATCHED_TOKENS = 16384


@dataclass(frozen=True)
class Prefill:
    """The server's prefill time mean: from histogram ``metric`` over ``n`` requests, else (no
    ``metric``) its TTFT mean less its queue time mean."""

    value: float
    metric: str | None = None
    n: float = 0.0
    derived: bool = False


@dataclass(frozen=True)
class Prompt:
    """The mean prompt length and where it was read: ``usage`` trailers (over ``n``), the probe's
    ``shape``, else the ``counter`` (``metric``) over finished requests."""

    tokens: float
    origin: str
    n: int = 0
    metric: str = ""


@dataclass(frozen=True)
class Shared:
    """Prompts share a prefix: the prefix cache's hits (``metric``), else the probe sent one
    ``--payload`` body (``payload``) ``sent`` times."""

    hits: float | None
    metric: str = ""
    payload: str | None = None
    sent: int = 0


@dataclass(frozen=True)
class Found:
    """Prefill against the server's TTFT, the prompts' length, the settings that decide the lever
    (``lever``: ``prefix-caching`` when the cache is off and prompts share a prefix, ``batched``
    when chunked prefill's step budget is small for them, else ``tensor-parallel``), and the
    budget to suggest (``target``)."""

    engine: str
    prefill: Prefill
    ttft_s: float
    ttft_metric: str | None
    ttft_n: float
    share: float
    prompt: Prompt | None
    caching: Setting | None
    chunked: Setting | None
    batched: Setting | None
    caching_off: bool
    shared: Shared | None
    lever: str
    tp: Setting | None
    target: int


@check(code="LD102", name="prefill-bound-first-token", symptom=SymptomClass.PRE_FIRST_TOKEN, cause=Cause.PREFILL,
       aliases=("prefill-bound",))
def prefill_bound_first_token(
    metrics_window: MetricsWindow,
    stream: StreamEvidence | None = None,
    log_facts: LogFacts | None = None,
    run: RunRecord | None = None,
    engine: EngineIdentity = UNIDENTIFIED,
    *,
    prefill_share: float = 0.5,
    min_prefill_s: float = 0.05,
    long_prompt_tokens: int = 1024,
    small_batched_tokens: int = 2048,
) -> Result:
    mw = metrics_window
    prefill = _prefill(mw)
    if prefill is None:
        return NotApplicable("no prefill-time histogram, and no TTFT and queue histograms to subtract")
    ttft_hist = mw.ttft
    ttft_s = ttft_hist.mean if ttft_hist is not None and ttft_hist.mean else None
    if ttft_hist is None or not ttft_s:
        return NotApplicable(_no_ttft(metric_read(mw, "ttft")))
    share = min(prefill.value / ttft_s, 1.0)
    if share < prefill_share or prefill.value < min_prefill_s:
        return Pass(_prefill_share(prefill.value, share, ttft_s))
    prompt = _prompt_tokens(stream, mw)
    if prompt is not None and prompt.tokens < long_prompt_tokens:
        return Pass(_short_prompts(share, prompt))

    caching = engine_setting("enable_prefix_caching", log_facts, run)
    chunked = engine_setting("chunked_prefill", log_facts, run)
    batched = engine_setting("max_num_batched_tokens", log_facts, run)
    caching_off = caching is not None and is_off(caching.value)
    shared = _shared_prefix(stream, mw) if caching_off else None
    if shared is not None:
        lever = "prefix-caching"
    elif chunked is not None and chunked.value and batched is not None and _small(batched, prompt, small_batched_tokens):
        lever = "batched"
    else:
        lever = "tensor-parallel"
    found = Found(
        engine=engine.id, prefill=prefill, ttft_s=ttft_s, ttft_metric=ttft_hist.metric, ttft_n=ttft_hist.count,
        share=share, prompt=prompt, caching=caching, chunked=chunked, batched=batched, caching_off=caching_off,
        shared=shared, lever=lever,
        tp=engine_setting("tensor_parallel_size", log_facts, run) if lever == "tensor-parallel" else None,
        target=_batched_target(batched, prompt) if lever == "batched" and batched is not None else 0,
    )
    return Fire(
        title="Prefill of long prompts dominates the time to first token",
        summary=_summary(found),
        remediation=_remediation(found),
        evidence=_evidence(found),
    )


def _shared_prefix(stream: StreamEvidence | None, mw: MetricsWindow) -> Shared | None:
    """Evidence that prompts share a prefix the cache could reuse.

    The default probe starts every prompt with a request number, so its prompts share nothing; an
    application body (``--payload``) is sent unchanged, so every request repeats the same prompt.
    Prefix-cache hits show sharing in the engine's own traffic (when a cache was counting).
    """
    if mw.prefix_cache_hits:
        return Shared(mw.prefix_cache_hits, metric_read(mw, "prefix_cache_hits"))
    if stream is None or stream.shape.payload_source in (None, "default"):
        return None
    sent = sum(1 for r in stream.requests if r.t_sent is not None)
    if sent < 2:
        return None
    return Shared(None, payload=stream.shape.payload_source, sent=sent)


def _prefill(mw: MetricsWindow) -> Prefill | None:
    if mw.prefill is not None and mw.prefill.mean is not None:
        return Prefill(mw.prefill.mean, mw.prefill.metric, mw.prefill.count)
    if mw.ttft is not None and mw.ttft.mean is not None and mw.queue is not None and mw.queue.mean is not None:
        return Prefill(max(mw.ttft.mean - mw.queue.mean, 0.0), derived=True)
    return None


def _prompt_tokens(stream: StreamEvidence | None, mw: MetricsWindow) -> Prompt | None:
    """Mean prompt length: usage trailers, else the probe's shape, else the prompt-token counter."""
    if stream is not None:
        used = measured_prompt_tokens(stream)
        if used:
            return Prompt(statistics.fmean(used), "usage", n=len(used))
        if stream.shape.prompt_tokens:
            return Prompt(float(stream.shape.prompt_tokens), "shape")
    finished = sum(mw.finished_by_reason.values())
    if mw.prompt_tokens is not None and finished > 0:
        return Prompt(mw.prompt_tokens / finished, "counter", metric=metric_read(mw, "prompt_tokens"))
    return None


def _small(batched: Setting, prompt: Prompt | None, small: int) -> bool:
    budget = int(batched.value)
    return budget <= small or (prompt is not None and budget < prompt.tokens)


def _batched_target(batched: Setting, prompt: Prompt | None) -> int:
    """Twice today's step budget, doubled again until a prompt fits in one step, at most the cap."""
    current = int(batched.value)
    target = 2 * current
    if prompt is not None:
        while target < prompt.tokens:
            target *= 2
    return max(min(target, MAX_SUGGESTED_BATCHED_TOKENS), current)


def _no_ttft(metric: str) -> str:
    return f"no server TTFT histogram ({metric}) to compare prefill with"


def _prefill_share(prefill_s: float, share: float, ttft_s: float) -> str:
    return f"prefill {fmt_seconds(prefill_s)} is {fmt_pct(share)} of TTFT {fmt_seconds(ttft_s)}"


def _short_prompts(share: float, prompt: Prompt) -> str:
    return (f"prefill is {fmt_pct(share)} of TTFT but prompts are short ({prompt.tokens:.0f} tokens): "
            "slow steps, not long prompts (see the GPU and batch checks)")


def _summary(found: Found) -> str:
    summary = _prefill_share(found.prefill.value, found.share, found.ttft_s)
    summary += f"; prompts {found.prompt.tokens:,.0f} tokens" if found.prompt else "; prompt length unknown"
    if found.lever == "prefix-caching":
        summary += "; prefix caching off with a shared prompt prefix"
    elif found.lever == "batched" and found.batched is not None:
        summary += f"; chunked prefill with max_num_batched_tokens {found.batched.value}"
    if found.caching_off and found.shared is None:
        # Turning the cache on would change nothing for prompts that share no prefix.
        summary += "; prefix caching off, but no prompt prefix was seen shared"
    return summary


def _prompt_source(prompt: Prompt) -> str:
    if prompt.origin == "usage":
        return f"stream: usage trailers, n={prompt.n}"
    if prompt.origin == "shape":
        return "stream: probe shape prompt_tokens"
    return f"metrics: {prompt.metric} delta / finished requests"


def _evidence(found: Found) -> list[EvidenceValue]:
    prefill = found.prefill
    evidence = [
        EvidenceValue("server prefill time mean", prefill.value, "s",
                      "metrics: TTFT mean - queue time mean" if prefill.derived
                      else f"metrics: {prefill.metric} delta, n={prefill.n:.0f}"),
        EvidenceValue("server TTFT mean", found.ttft_s, "s", f"metrics: {found.ttft_metric} delta, n={found.ttft_n:.0f}"),
    ]
    if found.prompt is not None:
        evidence.append(EvidenceValue("prompt tokens mean", found.prompt.tokens, "tokens", _prompt_source(found.prompt)))
    for name, setting in (("enable_prefix_caching", found.caching), ("chunked_prefill", found.chunked),
                          ("max_num_batched_tokens", found.batched)):
        if setting is not None:
            evidence.append(setting.evidence(name))
    if (shared := found.shared) is not None:
        if shared.hits:
            evidence.append(EvidenceValue("prefix cache hits", shared.hits, "tokens", f"metrics: {shared.metric} delta"))
        else:
            evidence.append(EvidenceValue("requests repeating one prompt", shared.sent, "requests",
                                          f"stream: every request sent the --payload body ({shared.payload})"))
    return evidence


def _shared_why(shared: Shared) -> str:
    if shared.hits:
        return f"the prefix cache hit {shared.hits:,.0f} prompt tokens"
    return f"the probe sent the same prompt ({shared.payload}) {shared.sent} times"


def _remediation(found: Found) -> Remediation:
    engine_id = found.engine
    if found.lever == "prefix-caching" and found.shared is not None:
        hits = engine_metric("prefix_cache_hits", engine_id)
        return Remediation(
            setting="enable_prefix_caching",
            suggested="true (--enable-prefix-caching)" if engine_id == VLLM else "true",
            why=(f"prefix caching is off, so every request recomputes its whole prompt, yet {_shared_why(found.shared)}: "
                 "with the cache on, the shared part's prefill is done once and reused"),
            verify=rerun("TTFT to fall on repeated prompts" + (f" and {hits} to grow" if hits else "")),
            current="false",
            where=engine_flag(engine_id, "enable_prefix_caching"),
        )
    if found.lever == "batched" and found.batched is not None:
        current = int(found.batched.value)
        return Remediation(
            setting="max_num_batched_tokens",
            suggested=str(found.target),
            why=(f"chunked prefill spreads each prompt over steps of {current} tokens, so a long prompt needs "
                 "several steps before its first token; a larger step budget cuts TTFT but makes every step "
                 "that carries a prefill chunk longer, so inter-token latency of the other streams gets worse"),
            verify=rerun("TTFT to fall; watch TPOT / inter-token gaps, which may rise"),
            current=str(current),
            where=engine_flag(engine_id, "max_num_batched_tokens"),
        )
    tp = found.tp
    prefill_metric = engine_metric("prefill", engine_id)
    return Remediation(
        setting="tensor_parallel_size",
        suggested=f"{int(tp.value) * 2} (more GPUs per replica), or shorter prompts" if tp else
        "raise it (more GPUs per replica), or shorten prompts",
        why="the prompt's compute itself is the first-token time: nothing is waiting, nothing is reused",
        verify=rerun(f"server prefill time ({prefill_metric}) to fall" if prefill_metric else "TTFT to fall"),
        current=str(tp.value) if tp else None,
        where=engine_flag(engine_id, "tensor_parallel_size"),
    )
