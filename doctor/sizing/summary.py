"""One sizing as plain data: the JSON contract of ``llm-doctor size --json`` and of the ``sizing`` view.

The names are the contract (``params``, ``weights_bytes``, ``kv_bytes_per_token``,
``kv_cache_tokens``, ``max_concurrency``; the last two only when a budget, a card or a block
override is given). Renderers (``reports.sizing``, the HTML report) read this, never the
dataclasses, so a saved report shows what the run computed.
"""

from __future__ import annotations

from typing import Any

from doctor.sizing.against_log import LogComparison
from doctor.sizing.budget import LEFT_OUT
from doctor.sizing.plan import Sizing, in_fp8


def summary(sizing: Sizing, comparison: LogComparison | None = None) -> dict[str, Any]:
    """The JSON document of one sizing (and of its comparison with a log): what `size --json` prints,
    the ``sizing`` view holds and the renderers show."""
    s, arch = sizing.setup, sizing.arch
    doc: dict[str, Any] = {
        "model_type": arch.model_type,
        "layers": arch.layers,
        "kv_heads": arch.kv_heads,
        "head_dim": arch.head_dim,
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
    if cap is not None and (fp8 := in_fp8(sizing)) is not None and fp8.capacity is not None:
        doc["with_fp8"] = {
            "weights_bytes_per_rank": fp8.weights_bytes_per_rank,
            "kv_bytes_per_token_per_rank": fp8.layout.bytes_per_token,
            "kv_cache_tokens": fp8.capacity.tokens,
            "max_concurrency": round(fp8.capacity.max_concurrency, 2),
            "max_num_seqs_at_avg": fp8.seqs_at_avg,
            "caveat": "fp8 weights and KV cache change the model's outputs: gate the switch on an evaluation of your task",
        }
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
