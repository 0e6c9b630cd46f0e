"""One sizing as plain data: the JSON contract of ``llm-doctor size --json`` and of the ``sizing`` view.

The names are the contract (``params``, ``weights_bytes``, ``kv_bytes_per_token``,
``kv_cache_tokens``, ``max_concurrency``; the last two only when a budget, a card or a block
override is given). Renderers (``reports.sizing_report``, the HTML report) read this, never the
dataclasses, so a saved report shows what the run computed.
"""

from __future__ import annotations

from typing import TypedDict

from doctor.sizing.against_log import LogComparison
from doctor.sizing.budget import LEFT_OUT
from doctor.sizing.model_fit import Sizing, in_fp8


class WeightsFormat(TypedDict):
    """How the weights are stored: the checkpoint's dtype, its quantization method ("none" when
    unquantized), bytes per linear parameter, and the modules a quantized checkpoint keeps in 16 bits."""

    model_dtype: str
    method: str
    linear_bytes_per_param: float
    kept_16bit: list[str]


class SeqsAtAverage(TypedDict):
    """How many sequences of ``--avg-tokens`` tokens the KV cache holds at once."""

    avg_tokens: int
    max_num_seqs: int | None


class WithFp8(TypedDict):
    """The same setup with fp8 weights and KV cache: what the switch would give, and its caveat."""

    weights_bytes_per_rank: int
    kv_bytes_per_token_per_rank: int
    kv_cache_tokens: int
    max_concurrency: float
    max_num_seqs_at_avg: int | None
    caveat: str


class AlternativeJson(TypedDict):
    """A one-setting change under which the computed KV cache equals the log's (``against_log.Alternative``)."""

    setting: str
    value: str
    current: str


class LogAgreement(TypedDict):
    """The computed KV cache next to the one the engine logged, and whether they agree."""

    agrees: bool
    reported_kv_cache_tokens: int
    expected_kv_cache_tokens: list[int]
    budget: str
    reported_max_concurrency: float | None
    expected_max_concurrency: float | None
    implied_kv_bytes_per_token: int | None
    alternatives: list[AlternativeJson]


class SizedModel(TypedDict):
    """What every sizing states: the model, its parameters and weights, and its KV bytes per token."""

    model_type: str
    layers: int
    kv_heads: int
    head_dim: int
    params: int
    params_active: int
    params_by_component: dict[str, int]
    params_per_rank: int
    weights_bytes: int
    weights_bytes_per_rank: int
    weights_format: WeightsFormat
    kv_bytes_per_token: int
    kv_bytes_per_token_per_rank: int
    kv_cache_dtype: str
    kv_layers: dict[str, int]
    sliding_window: int | None
    tp: int
    block_size: int
    max_model_len: int | None
    notes: list[str]


class SizingSummary(SizedModel, total=False):
    """The ``sizing`` view and ``size --json``: ``SizedModel`` always; the KV cache a budget gives
    (``kv_cache_memory_bytes`` ... ``longest_request_tokens``) only when a budget, a card or a block
    override is known; ``log`` only when a startup log states a KV cache to compare with."""

    kv_cache_memory_bytes: int | None
    kv_cache_memory_source: str
    kv_cache_memory_upper_bound: bool
    num_blocks: int
    kv_cache_groups: int
    kv_cache_tokens: int
    max_concurrency: float
    longest_request_tokens: int
    left_out: str
    max_num_seqs_at_avg: SeqsAtAverage
    with_fp8: WithFp8
    log: LogAgreement


def summary(sizing: Sizing, comparison: LogComparison | None = None) -> SizingSummary:
    """The JSON document of one sizing (and of its comparison with a log): what `size --json` prints,
    the ``sizing`` view holds and the renderers show."""
    s, arch = sizing.setup, sizing.arch
    doc: SizingSummary = {
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
