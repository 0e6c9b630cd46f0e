"""One sizing: what a model needs under a given setup, and what a budget gives it.

``size_model`` is what ``llm-doctor size`` prints and what the LD406 check compares with the
engine's log; it composes the pure pieces (``params``, ``weights``, ``kv``, ``budget``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from doctor.sizing.architecture import Architecture
from doctor.sizing.budget import Budget, budget_from_card
from doctor.sizing.kv import Capacity, KvLayout, capacity, kv_layout, seqs_that_fit
from doctor.sizing.params import Params, count_params
from doctor.sizing.weights import WeightFormat, weight_bytes, weight_format


@dataclass(frozen=True)
class Setup:
    """The serving choices that change the numbers, as ``vllm serve`` names them."""

    dtype: str | None = None  # --dtype (None/auto: the checkpoint's)
    kv_cache_dtype: str = "auto"
    tp: int = 1
    block_size: int | None = None  # None: vLLM's default for the device
    device: str = "cuda"  # cuda | cpu
    max_model_len: int | None = None  # None: the config's max_position_embeddings
    max_num_batched_tokens: int | None = None
    num_gpu_blocks_override: int | None = None


@dataclass(frozen=True)
class Sizing:
    """Everything ``size`` reports for one model under one setup: parameters, weight bytes, KV per
    token and, given a budget, the capacity; the architecture and setup travel with it, so the
    summary needs nothing else.
    """

    arch: Architecture
    setup: Setup
    params: Params
    params_per_rank: Params
    weights: WeightFormat
    weights_bytes: int
    weights_bytes_per_rank: int
    layout: KvLayout  # one rank's
    kv_bytes_per_token: int  # the whole model's (tp 1), before any rank split or replication
    budget: Budget | None = None
    capacity: Capacity | None = None
    avg_tokens: int | None = None
    seqs_at_avg: int | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def max_model_len(self) -> int | None:
        return self.setup.max_model_len or self.arch.max_position_embeddings


def size_model(arch: Architecture, setup: Setup, budget: Budget | None = None, avg_tokens: int | None = None) -> Sizing:
    """Weights and KV per token always; capacity when a budget (or a block override) is given."""
    if setup.tp < 1:
        raise ValueError("--tp must be at least 1")
    params, per_rank = count_params(arch), count_params(arch, setup.tp)
    fmt = weight_format(arch.quantization, arch.dtype, setup.dtype)
    layout = kv_layout(arch, model_dtype=fmt.model_dtype, kv_cache_dtype=setup.kv_cache_dtype, tp=setup.tp,
                       block_size=setup.block_size, device=setup.device)
    notes = list(arch.notes) + [n for n in (fmt.note,) if n]
    if arch.kv_heads < setup.tp and arch.mla is None:
        notes.append(f"{arch.kv_heads} KV heads over {setup.tp} ranks: each rank keeps a replica of one KV head")
    cap = seqs = None
    mml = setup.max_model_len or arch.max_position_embeddings
    if (budget is not None or setup.num_gpu_blocks_override is not None) and mml:
        cap = capacity(layout, budget.kv_memory_bytes if budget else None, mml,
                       max_num_batched_tokens=setup.max_num_batched_tokens, num_blocks_override=setup.num_gpu_blocks_override)
        if avg_tokens:
            seqs = seqs_that_fit(layout, cap, avg_tokens, setup.max_num_batched_tokens)
    return Sizing(
        arch=arch, setup=setup, params=params, params_per_rank=per_rank, weights=fmt,
        weights_bytes=weight_bytes(params, fmt), weights_bytes_per_rank=weight_bytes(per_rank, fmt),
        layout=layout, kv_bytes_per_token=kv_layout(arch, model_dtype=fmt.model_dtype, kv_cache_dtype=setup.kv_cache_dtype).bytes_per_token,
        budget=budget, capacity=cap, avg_tokens=avg_tokens, seqs_at_avg=seqs, notes=notes,
    )


def in_fp8(sizing: Sizing) -> Sizing | None:
    """The same model and budget with fp8 weights and an fp8 KV cache: what FP8 would buy.

    A card budget is recomputed with the smaller weights; a byte budget stays as given. None when
    both are fp8 (or smaller) already.
    """
    weights_done = sizing.weights.linear_bytes <= 1
    kv_done = sizing.layout.element_bytes <= 1
    if weights_done and kv_done:
        return None
    setup = replace(sizing.setup, dtype=None if weights_done else "fp8", kv_cache_dtype="fp8")
    budget = sizing.budget
    if budget is not None and budget.upper_bound and budget.gpu_memory_bytes and budget.utilization:
        weights = size_model(sizing.arch, setup).weights_bytes_per_rank
        budget = budget_from_card(budget.gpu_memory_bytes, budget.utilization, weights)
    return size_model(sizing.arch, setup, budget, sizing.avg_tokens)
