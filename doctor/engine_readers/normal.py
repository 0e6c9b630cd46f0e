"""The engine-neutral fact names ``llm-doctor log --json`` and ``metrics --json`` print.

Every engine's log is parsed into vLLM's keys (what the checks read); this is the one place
where those become the names a script reads alike for every engine (issue 17): ``engine``,
``version``, ``kv_cache_tokens``, ``max_running_requests``, ``max_model_len``,
``max_batch_tokens``, and the serving readings ``running``, ``waiting``, ``kv_usage`` (0-1, the
last in the file), ``kv_usage_max`` and ``preemptions`` (each event once). A name the evidence
does not give is absent, never 0; ``not_exposed`` lists the names an engine's log or /metrics
never gives.
"""

from __future__ import annotations

from typing import Any

from doctor.engine_metrics.views import MetricsWindow
from doctor.engines import RECORDS
from doctor.engines.names import SGLANG, UNKNOWN, display
from doctor.logscan.parsed import LogFacts

#: Neutral name -> the LogFacts key it is read from.
FROM_LOG_KEYS = {
    "kv_cache_tokens": "kv_cache_tokens",
    "max_running_requests": "max_num_seqs",
    "max_model_len": "max_model_len",
    "max_batch_tokens": "max_num_batched_tokens",
}

#: Keys of vLLM's vocabulary that the neutral names replace in another engine's output.
VLLM_ONLY_KEYS = frozenset({"max_num_seqs", "max_num_batched_tokens", "vllm_version"})

#: What an engine never states, in its log (no periodic stats line) or in its /metrics:
#: "not exposed by ENGINE" (``EngineRecord.not_exposed``).
NOT_EXPOSED: dict[str, dict[str, frozenset[str]]] = {
    source: {r.id: r.not_exposed[source] for r in RECORDS if source in r.not_exposed} for source in ("log", "metrics")
}


def from_log(facts: LogFacts) -> dict[str, Any]:
    """The neutral facts of a parsed log (its last startup, and its last stats readings)."""
    out: dict[str, Any] = {"engine": facts.engine, "version": facts.value("vllm_version", facts.value("version"))}
    for name, key in FROM_LOG_KEYS.items():
        out[name] = facts.value(key)
    stats = facts.last_stats
    if stats:
        last = _last_per_engine(facts)
        out["running"] = _sum(p.running for p in last)
        out["waiting"] = _sum(p.waiting for p in last)
        usages = [p.kv_usage_pct for p in last if p.kv_usage_pct is not None]
        out["kv_usage"] = max(usages) / 100 if usages else None
        peak = [p.kv_usage_pct for p in stats if p.kv_usage_pct is not None]
        out["kv_usage_max"] = max(peak) / 100 if peak else None
    out["preemptions"] = _preemptions(facts)
    return {k: v for k, v in out.items() if v is not None}


def from_window(window: MetricsWindow) -> dict[str, Any]:
    """The neutral readings of a metrics window: the last gauge values, the peak KV usage,
    preemptions over the window (since the engine started, for a single scrape)."""
    out: dict[str, Any] = {"engine": window.engine_kind or UNKNOWN}
    out["running"] = window.running.last if window.running else None
    out["waiting"] = window.waiting.last if window.waiting else None
    out["kv_usage"] = window.kv_usage.last if window.kv_usage else None
    out["kv_usage_max"] = window.kv_usage.max if window.kv_usage else None
    out["preemptions"] = window.preemptions
    return {k: v for k, v in out.items() if v is not None}


def not_exposed(engine: str, present: dict[str, Any], source: str = "log") -> dict[str, str]:
    """The names ``engine``'s ``source`` ("log" or "metrics") never gives that are absent here:
    ``{"kv_usage": "not exposed by llama.cpp's log"}``."""
    lacking = NOT_EXPOSED[source].get(engine, frozenset()) - set(present)
    return {name: f"not exposed by {display(engine)}'s {source}" for name in sorted(lacking)}


def _last_per_engine(facts: LogFacts) -> list[Any]:
    """The last stats point of each data-parallel engine (vLLM ``Engine 000``, SGLang ``DP0``)."""
    last: dict[str | None, Any] = {}
    for point in facts.last_stats:
        last[point.engine] = point
    per_engine = {k: p for k, p in last.items() if k is not None and "Aggregated" not in k}
    return list((per_engine or last).values())  # an aggregate line beside per-engine ones: the latter


def _sum(values: Any) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def _preemptions(facts: LogFacts) -> int | None:
    """vLLM V0's cumulative count or its warnings; SGLang's retracted requests, once per event
    (SGLang logs every retraction, so a serving log without one says 0; vLLM V1 logs none)."""
    if facts.preemptions_cumulative is not None:
        return facts.preemptions_cumulative
    if facts.engine == SGLANG and facts.last_stats:
        return facts.preemption_warnings
    return facts.preemption_warnings or None
