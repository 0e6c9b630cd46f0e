"""KV cache bytes per token and vLLM's own capacity arithmetic (V1 engine, 0.32).

Per layer and token the cache holds K and V for the rank's KV heads (``max(1, kv_heads // tp)``:
vLLM replicates KV heads when there are fewer than ranks), or, for DeepSeek-style multi-head
latent attention, one compressed latent of ``kv_lora_rank + qk_rope_head_dim`` values that every
rank keeps whole. The capacity follows ``vllm/v1/core/kv_cache_utils.py``, so the numbers are the
ones the engine prints:

- layers with the same spec form one group; a model mixing full and sliding-window layers is split
  into groups of equal size (the smaller kind's count, or the larger one's when it is under 1.5x)
  that share one pool of blocks: ``num_blocks = memory // page_bytes // layers_per_group``, where
  a page is one layer's ``block_size`` tokens;
- "KV cache size: N tokens" is ``num_blocks // groups * block_size``;
- "Maximum concurrency for L tokens per request: X.XXx" is ``num_blocks`` over the blocks one
  request of L tokens needs in all groups: ``cdiv(L, block_size)`` for a full-attention group,
  ``cdiv(min(window - 1 + max_num_batched_tokens, L), block_size) + 1`` for a sliding one.

The block pool keeps one block back (the null block), so what actually fits is computed from
``num_blocks - 1``: the largest ``max_num_seqs`` at a given length and the longest request (the
latter matches the "estimated maximum model length" of vLLM 0.32's start-up error).
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.sizing.architecture import FULL, SLIDING, Architecture
from doctor.sizing.weights import DTYPE_BYTES

MLA = "mla"
#: vLLM's default ``--block-size``: 16 on CUDA, 128 on the CPU backend; FlashMLA forces 64.
DEFAULT_BLOCK_SIZE = {"cuda": 16, "cpu": 128}
MLA_BLOCK_SIZE = 64
#: vLLM's default ``max_num_batched_tokens`` for ``vllm serve`` (chunked prefill on); it only
#: matters for sliding-window layers, which keep the window plus one scheduled chunk.
DEFAULT_MAX_NUM_BATCHED_TOKENS = 2048


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def kv_element_bytes(kv_cache_dtype: str, model_dtype: str) -> float:
    """Bytes per cached value: ``auto`` is the model's dtype; every ``fp8*`` variant is 1 byte."""
    if kv_cache_dtype in ("auto", "", None):
        return DTYPE_BYTES[model_dtype]
    if kv_cache_dtype.startswith("fp8"):
        return 1
    if kv_cache_dtype in DTYPE_BYTES:
        return DTYPE_BYTES[kv_cache_dtype]
    raise ValueError(f"unknown --kv-cache-dtype {kv_cache_dtype!r} (auto, fp8, fp8_e4m3, fp8_e5m2, bfloat16, float16)")


@dataclass(frozen=True)
class LayerCache:
    """What one layer caches per token on one rank; equal specs form one of vLLM's KV cache groups
    (it is hashed as the group's key in ``KvLayout.groups``).
    """

    kind: str  # FULL | SLIDING | MLA
    bytes_per_token: int  # one layer on one rank
    window: int | None = None

    def blocks(self, tokens: int, block_size: int, max_num_batched_tokens: int) -> int:
        """Blocks one request of ``tokens`` holds in this layer's group (vLLM's max_memory_usage_bytes)."""
        if self.kind == SLIDING and self.window:
            return cdiv(min(self.window - 1 + max_num_batched_tokens, tokens), block_size) + 1
        return cdiv(tokens, block_size)


@dataclass(frozen=True)
class KvLayout:
    """One rank's KV cache: a ``LayerCache`` per layer, the element size and the block size, which
    ``capacity`` turns into blocks and tokens as vLLM does.
    """

    layers: tuple[LayerCache, ...]
    kv_cache_dtype: str
    element_bytes: float
    block_size: int
    tp: int

    @property
    def bytes_per_token(self) -> int:
        """KV bytes one token costs on one rank, all layers (sliding layers included)."""
        return sum(layer.bytes_per_token for layer in self.layers)

    @property
    def page_bytes(self) -> int:
        """One layer's block; vLLM needs one page size for all layers (true of every supported family)."""
        return self.block_size * self.layers[0].bytes_per_token

    def groups(self) -> list[tuple[LayerCache, int]]:
        """vLLM's KV cache groups as (spec, layers in the group); every group has the same size."""
        kinds: dict[LayerCache, int] = {}
        for layer in self.layers:
            kinds[layer] = kinds.get(layer, 0) + 1
        if len(kinds) == 1:
            (spec, count), = kinds.items()
            return [(spec, count)]
        smallest, largest = min(kinds.values()), max(kinds.values())
        size = largest if largest < smallest * 1.5 else smallest
        return [(spec, size) for spec, count in kinds.items() for _ in range(cdiv(count, size))]


def kv_layout(arch: Architecture, *, model_dtype: str, kv_cache_dtype: str = "auto", tp: int = 1, block_size: int | None = None,
              device: str = "cuda") -> KvLayout:
    """The cache one rank of ``tp`` keeps per token and layer."""
    element = kv_element_bytes(kv_cache_dtype, model_dtype)
    if arch.mla is not None:
        per = round((arch.mla.kv_lora_rank + arch.mla.qk_rope_head_dim) * element)
        layers = tuple(LayerCache(MLA, per) for _ in range(arch.layers))
        default = MLA_BLOCK_SIZE if device == "cuda" else DEFAULT_BLOCK_SIZE[device]
    else:
        per = round(2 * max(1, arch.kv_heads // tp) * arch.head_dim * element)
        kinds = arch.layer_kinds or (FULL,) * arch.layers
        layers = tuple(LayerCache(k, per, arch.sliding_window if k == SLIDING else None) for k in kinds)
        default = DEFAULT_BLOCK_SIZE[device]
    return KvLayout(layers=layers, kv_cache_dtype=kv_cache_dtype, element_bytes=element, block_size=block_size or default, tp=tp)


@dataclass(frozen=True)
class Capacity:
    """What vLLM allocates from one rank's budget, in the numbers its start-up log prints (KV cache
    size, maximum concurrency), so they can be compared with a log line for line.
    """

    kv_memory_bytes: int | None  # per rank; None when num_gpu_blocks_override set the blocks
    num_blocks: int
    block_size: int
    groups: int
    tokens: int  # "KV cache size: N tokens"
    max_model_len: int
    blocks_per_request: int  # at max_model_len, all groups
    max_concurrency: float  # "Maximum concurrency for max_model_len tokens per request"
    longest_request: int  # tokens of the longest single request the usable blocks hold

    @property
    def max_concurrency_text(self) -> str:
        return f"{self.max_concurrency:.2f}x"


def _request_blocks(layout: KvLayout, tokens: int, max_num_batched_tokens: int) -> int:
    return sum(spec.blocks(tokens, layout.block_size, max_num_batched_tokens) for spec, _ in layout.groups())


def capacity(layout: KvLayout, kv_memory_bytes: int | None, max_model_len: int, *, max_num_batched_tokens: int | None = None,
             num_blocks_override: int | None = None) -> Capacity:
    """What vLLM allocates from ``kv_memory_bytes`` per rank (or ``--num-gpu-blocks-override``)."""
    if max_model_len <= 0:
        raise ValueError("max_model_len must be positive")
    batched = max_num_batched_tokens or DEFAULT_MAX_NUM_BATCHED_TOKENS
    groups = layout.groups()
    per_group = groups[0][1]
    if num_blocks_override is not None:
        blocks = num_blocks_override
    elif kv_memory_bytes is None:
        raise ValueError("a KV cache budget (bytes) or a block count is needed")
    else:
        blocks = max(0, kv_memory_bytes // layout.page_bytes // per_group)
    need = _request_blocks(layout, max_model_len, batched)
    return Capacity(
        kv_memory_bytes=kv_memory_bytes if num_blocks_override is None else None,
        num_blocks=blocks,
        block_size=layout.block_size,
        groups=len(groups),
        tokens=blocks // len(groups) * layout.block_size,
        max_model_len=max_model_len,
        blocks_per_request=need,
        max_concurrency=blocks / need,
        longest_request=_longest(layout, blocks - 1, max_model_len, batched),
    )


def _longest(layout: KvLayout, usable: int, upper: int, batched: int) -> int:
    """Binary search, as vLLM's estimate_max_model_len: the longest request ``usable`` blocks hold."""
    lo, hi, best = 1, upper, 0
    while lo <= hi:
        mid = (lo + hi) // 2
        if _request_blocks(layout, mid, batched) <= usable:
            best, lo = mid, mid + 1
        else:
            hi = mid - 1
    return best


def seqs_that_fit(layout: KvLayout, cap: Capacity, tokens_per_seq: int, max_num_batched_tokens: int | None = None) -> int:
    """The largest ``max_num_seqs`` whose sequences of ``tokens_per_seq`` all hold their blocks at once."""
    need = _request_blocks(layout, max(1, tokens_per_seq), max_num_batched_tokens or DEFAULT_MAX_NUM_BATCHED_TOKENS)
    return max(0, cap.num_blocks - 1) // need
