"""``llm-doctor size``: the sizing as a terminal table and as JSON.

The JSON names are the contract (``params``, ``weights_bytes``, ``kv_bytes_per_token``,
``kv_cache_tokens``, ``max_concurrency``; the last two only when a budget or a card is given);
the table shows the same numbers in GiB and with vLLM's own wording for the two KV lines, so a
reader can hold it next to the startup log.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console

from doctor.sizing.against_log import LogComparison
from doctor.sizing.budget import LEFT_OUT, GiB
from doctor.sizing.plan import Sizing
from reports.terminal import grid, printer, unwrapped


def _gib(n: float) -> str:
    return f"{n / GiB:,.2f} GiB"


def _count(n: int) -> str:
    return f"{n / 1e9:,.2f} B" if n >= 1e9 else f"{n / 1e6:,.1f} M"


def sizing_dict(sizing: Sizing, comparison: LogComparison | None = None) -> dict[str, Any]:
    """The JSON document of one sizing (and of its comparison with a log)."""
    s, arch = sizing.setup, sizing.arch
    doc: dict[str, Any] = {
        "model_type": arch.model_type,
        "params": sizing.params.total,
        "params_active": sizing.params.active,
        "params_by_component": sizing.params.components,
        "params_per_rank": sizing.params_per_rank.total,
        "weights_bytes": sizing.weights_bytes,
        "weights_bytes_per_rank": sizing.weights_bytes_per_rank,
        "weights_format": {"model_dtype": sizing.weights.model_dtype, "method": sizing.weights.method,
                           "linear_bytes_per_param": sizing.weights.linear_bytes, "kept_16bit": list(sizing.weights.kept_16bit)},
        "kv_bytes_per_token": sizing.kv_bytes_per_token,
        "kv_bytes_per_token_per_rank": sizing.layout.bytes_per_token,
        "kv_cache_dtype": s.kv_cache_dtype,
        "kv_layers": {kind: sum(1 for layer in sizing.layout.layers if layer.kind == kind) for kind in ("full", "sliding", "mla")},
        "sliding_window": arch.sliding_window,
        "tp": s.tp,
        "block_size": sizing.layout.block_size,
        "max_model_len": sizing.max_model_len,
        "notes": sizing.notes,
    }
    cap = sizing.capacity
    if cap is not None:
        doc.update({
            "kv_cache_memory_bytes": cap.kv_memory_bytes,
            "kv_cache_memory_source": sizing.budget.source if sizing.budget else f"num_gpu_blocks_override {cap.num_blocks}",
            "kv_cache_memory_upper_bound": bool(sizing.budget and sizing.budget.upper_bound),
            "num_blocks": cap.num_blocks,
            "kv_cache_groups": cap.groups,
            "kv_cache_tokens": cap.tokens,
            "max_concurrency": round(cap.max_concurrency, 2),
            "longest_request_tokens": cap.longest_request,
        })
        if sizing.budget and sizing.budget.upper_bound:
            doc["left_out"] = LEFT_OUT
        if sizing.avg_tokens:
            doc["max_num_seqs_at_avg"] = {"avg_tokens": sizing.avg_tokens, "max_num_seqs": sizing.seqs_at_avg}
    if comparison is not None:
        doc["log"] = {
            "agrees": comparison.agrees,
            "reported_kv_cache_tokens": comparison.reported_tokens,
            "expected_kv_cache_tokens": list(comparison.expected_tokens),
            "budget": comparison.budget_source,
            "reported_max_concurrency": comparison.reported_concurrency,
            "expected_max_concurrency": None if comparison.expected_concurrency is None else round(comparison.expected_concurrency, 2),
            "implied_kv_bytes_per_token": None if comparison.implied_bytes_per_token is None else round(comparison.implied_bytes_per_token),
            "alternatives": [{"setting": a.setting, "value": a.value, "current": a.current} for a in comparison.alternatives],
        }
    return doc


def print_sizing(sizing: Sizing, console: Console, comparison: LogComparison | None = None) -> None:
    """The terminal table: model, weights, KV per token, then capacity and the log when known."""
    out, s, p = printer(console), sizing.setup, sizing.params
    rows: list[tuple[str, str]] = [
        ("model", f"{sizing.arch.model_type}, {sizing.arch.layers} layers, {sizing.arch.kv_heads} KV heads x {sizing.arch.head_dim}"),
        ("parameters", _count(p.total) + (f" ({_count(p.active)} active per token)" if p.active != p.total else "")),
        ("weights", f"{_gib(sizing.weights_bytes)} ({sizing.weights.method if sizing.weights.method != 'none' else sizing.weights.model_dtype})"),
    ]
    if sizing.weights.kept_16bit:
        rows.append(("kept in 16 bit", ", ".join(sizing.weights.kept_16bit)))
    rows.append(("KV per token", f"{sizing.kv_bytes_per_token:,} bytes (kv_cache_dtype {s.kv_cache_dtype})"))
    if s.tp > 1:
        rows.append((f"per rank (tp {s.tp})", f"weights {_gib(sizing.weights_bytes_per_rank)}, KV {sizing.layout.bytes_per_token:,} bytes per token"))
    cap = sizing.capacity
    if cap is not None:
        source = sizing.budget.source if sizing.budget else f"num_gpu_blocks_override {cap.num_blocks}"
        bound = " (upper bound)" if sizing.budget and sizing.budget.upper_bound else ""
        if cap.kv_memory_bytes is not None:
            rows.append(("KV cache memory", f"{_gib(cap.kv_memory_bytes)} per rank{bound}: {source}"))
        rows.append(("KV cache size", f"{cap.tokens:,} tokens ({cap.num_blocks:,} blocks of {cap.block_size})"))
        rows.append(("Maximum concurrency", f"{cap.max_concurrency_text} for {cap.max_model_len:,} tokens per request"))
        if sizing.avg_tokens:
            rows.append((f"max_num_seqs at {sizing.avg_tokens:,} tokens", f"{sizing.seqs_at_avg:,} (every sequence holds its blocks)"))
    if comparison is not None:
        verdict = "agrees" if comparison.agrees else "DISAGREES"
        rows.append(("log", f"{comparison.reported_tokens:,} tokens reported, {comparison.expected_text} computed: {verdict}"))
        rows += [("explained by", f"{a.setting} {a.value} (log: {a.current})") for a in comparison.alternatives]
    table = grid(("", ""), rows, wrap=(1,))
    table.show_header = False
    out(unwrapped(table, console))
    for note in sizing.notes:
        out(f"note: {note}")
    if sizing.budget and sizing.budget.upper_bound:
        out(f"left out: {LEFT_OUT}")
