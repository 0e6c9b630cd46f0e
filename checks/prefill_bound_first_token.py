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
    prefill_s, prefill_source = prefill
    ttft_hist = mw.ttft
    ttft_s = ttft_hist.mean if ttft_hist is not None and ttft_hist.mean else None
    if ttft_hist is None or not ttft_s:
        return NotApplicable(f"no server TTFT histogram ({metric_read(mw, 'ttft')}) to compare prefill with")
    share = min(prefill_s / ttft_s, 1.0)
    evidence = [
        EvidenceValue("server prefill time mean", prefill_s, "s", prefill_source),
        EvidenceValue("server TTFT mean", ttft_s, "s", f"metrics: {ttft_hist.metric} delta, n={ttft_hist.count:.0f}"),
    ]
    if share < prefill_share or prefill_s < min_prefill_s:
        return Pass(f"prefill {fmt_seconds(prefill_s)} is {fmt_pct(share)} of TTFT {fmt_seconds(ttft_s)}")
    prompt = _prompt_tokens(stream, mw)
    if prompt is not None:
        evidence.append(EvidenceValue("prompt tokens mean", prompt[0], "tokens", prompt[1]))
        if prompt[0] < long_prompt_tokens:
            return Pass(
                f"prefill is {fmt_pct(share)} of TTFT but prompts are short ({prompt[0]:.0f} tokens): "
                "slow steps, not long prompts (see the GPU and batch checks)"
            )
    summary = f"prefill {fmt_seconds(prefill_s)} is {fmt_pct(share)} of TTFT {fmt_seconds(ttft_s)}"
    summary += f"; prompts {prompt[0]:,.0f} tokens" if prompt else "; prompt length unknown"

    caching = engine_setting("enable_prefix_caching", log_facts, run)
    chunked = engine_setting("chunked_prefill", log_facts, run)
    batched = engine_setting("max_num_batched_tokens", log_facts, run)
    for name, setting in (("enable_prefix_caching", caching), ("chunked_prefill", chunked),
                          ("max_num_batched_tokens", batched)):
        if setting is not None:
            evidence.append(setting.evidence(name))

    engine_id = engine.id
    caching_off = caching is not None and is_off(caching.value)
    shared = _shared_prefix(stream, mw) if caching_off else None
    if shared is not None:
        evidence.append(shared[1])
        hits = engine_metric("prefix_cache_hits", engine_id)
        remediation = Remediation(
            setting="enable_prefix_caching",
            suggested="true (--enable-prefix-caching)" if engine_id == VLLM else "true",
            why=(f"prefix caching is off, so every request recomputes its whole prompt, yet {shared[0]}: "
                 "with the cache on, the shared part's prefill is done once and reused"),
            verify=rerun("TTFT to fall on repeated prompts" + (f" and {hits} to grow" if hits else "")),
            current="false",
            where=engine_flag(engine_id, "enable_prefix_caching"),
        )
        summary += "; prefix caching off with a shared prompt prefix"
    elif chunked is not None and chunked.value and batched is not None and _small(batched, prompt, small_batched_tokens):
        remediation = _raise_batched_tokens(batched, prompt, engine_id)
        summary += f"; chunked prefill with max_num_batched_tokens {batched.value}"
    else:
        tp = engine_setting("tensor_parallel_size", log_facts, run)
        prefill_metric = engine_metric("prefill", engine_id)
        remediation = Remediation(
            setting="tensor_parallel_size",
            suggested=f"{int(tp.value) * 2} (more GPUs per replica), or shorter prompts" if tp else
            "raise it (more GPUs per replica), or shorten prompts",
            why="the prompt's compute itself is the first-token time: nothing is waiting, nothing is reused",
            verify=rerun(f"server prefill time ({prefill_metric}) to fall" if prefill_metric else "TTFT to fall"),
            current=str(tp.value) if tp else None,
            where=engine_flag(engine_id, "tensor_parallel_size"),
        )
    if caching_off and shared is None:
        # Turning the cache on would change nothing for prompts that share no prefix.
        summary += "; prefix caching off, but no prompt prefix was seen shared"
    return Fire(
        title="Prefill of long prompts dominates the time to first token",
        summary=summary,
        remediation=remediation,
        evidence=evidence,
    )


def _shared_prefix(stream: StreamEvidence | None, mw: MetricsWindow) -> tuple[str, EvidenceValue] | None:
    """Evidence that prompts share a prefix the cache could reuse: why it shows, and the value.

    The default probe starts every prompt with a request number, so its prompts share nothing; an
    application body (``--payload``) is sent unchanged, so every request repeats the same prompt.
    Prefix-cache hits show sharing in the engine's own traffic (when a cache was counting).
    """
    if mw.prefix_cache_hits:
        return (f"the prefix cache hit {mw.prefix_cache_hits:,.0f} prompt tokens",
                EvidenceValue("prefix cache hits", mw.prefix_cache_hits, "tokens", f"metrics: {metric_read(mw, 'prefix_cache_hits')} delta"))
    if stream is None or stream.shape.payload_source in (None, "default"):
        return None
    sent = sum(1 for r in stream.requests if r.t_sent is not None)
    if sent < 2:
        return None
    return (f"the probe sent the same prompt ({stream.shape.payload_source}) {sent} times",
            EvidenceValue("requests repeating one prompt", sent, "requests",
                          f"stream: every request sent the --payload body ({stream.shape.payload_source})"))


def _prefill(mw: MetricsWindow) -> tuple[float, str] | None:
    if mw.prefill is not None and mw.prefill.mean is not None:
        return mw.prefill.mean, f"metrics: {mw.prefill.metric} delta, n={mw.prefill.count:.0f}"
    if mw.ttft is not None and mw.ttft.mean is not None and mw.queue is not None and mw.queue.mean is not None:
        return max(mw.ttft.mean - mw.queue.mean, 0.0), "metrics: TTFT mean - queue time mean"
    return None


def _prompt_tokens(stream: StreamEvidence | None, mw: MetricsWindow) -> tuple[float, str] | None:
    """Mean prompt length: usage trailers, else the probe's shape, else the prompt-token counter."""
    if stream is not None:
        used = measured_prompt_tokens(stream)
        if used:
            return statistics.fmean(used), f"stream: usage trailers, n={len(used)}"
        if stream.shape.prompt_tokens:
            return float(stream.shape.prompt_tokens), "stream: probe shape prompt_tokens"
    finished = sum(mw.finished_by_reason.values())
    if mw.prompt_tokens is not None and finished > 0:
        return mw.prompt_tokens / finished, f"metrics: {metric_read(mw, 'prompt_tokens')} delta / finished requests"
    return None


def _small(batched: Setting, prompt: tuple[float, str] | None, small: int) -> bool:
    budget = int(batched.value)
    return budget <= small or (prompt is not None and budget < prompt[0])


def _raise_batched_tokens(batched: Setting, prompt: tuple[float, str] | None, engine: str) -> Remediation:
    current = int(batched.value)
    target = 2 * current
    if prompt is not None:
        while target < prompt[0]:
            target *= 2
    target = min(target, MAX_SUGGESTED_BATCHED_TOKENS)
    return Remediation(
        setting="max_num_batched_tokens",
        suggested=str(max(target, current)),
        why=(f"chunked prefill spreads each prompt over steps of {current} tokens, so a long prompt needs "
             "several steps before its first token; a larger step budget cuts TTFT but makes every step "
             "that carries a prefill chunk longer, so inter-token latency of the other streams gets worse"),
        verify=rerun("TTFT to fall; watch TPOT / inter-token gaps, which may rise"),
        current=str(current),
        where=engine_flag(engine, "max_num_batched_tokens"),
    )
