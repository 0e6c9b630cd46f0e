"""Weight bytes: the dtype each component is stored in, from ``--dtype`` or ``quantization_config``.

Quantisation methods convert the linear layers (``params.QUANTISABLE``) and keep embeddings,
the LM head, norms, biases and the router in the model's 16-bit dtype, as vLLM loads them.
Group-quantised formats carry a scale (16-bit) and, for AWQ/GPTQ, a packed zero point per
group; block-quantised FP8 (DeepSeek-V3's ``weight_block_size``) a float32 scale per block. A
method this table does not know is reported as such and sized at the model's dtype.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from doctor.sizing.params import QUANTISABLE, Params

DTYPE_BYTES: dict[str, float] = {
    "float32": 4, "fp32": 4, "float": 4,
    "bfloat16": 2, "bf16": 2, "float16": 2, "fp16": 2, "half": 2,
    "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "float8_e4m3fn": 1, "int8": 1,
    "int4": 0.5,
}  # fmt: skip
#: ``--dtype`` values that quantise the linear layers rather than change the model's dtype.
LINEAR_ONLY = ("fp8", "int8", "int4")


@dataclass(frozen=True)
class WeightFormat:
    """How the weights are stored: the model's dtype, the bytes per weight of the quantised linear
    layers (scales included) and the method's name as printed.
    """

    model_dtype: str  # what vLLM computes in: embeddings, norms, activations, the "auto" KV cache
    linear_bytes: float  # bytes per weight of a quantised linear layer, scales included
    method: str  # "none", "fp8", "awq 4-bit g128", ...
    note: str = ""

    @property
    def kept_16bit(self) -> tuple[str, ...]:
        """Components left in the model's dtype when the linear layers are quantised."""
        return () if self.method == "none" else ("embeddings", "lm_head", "norms_biases", "router")


def model_dtype(config_dtype: str, override: str | None) -> tuple[str, str]:
    """vLLM's ``--dtype auto``: the checkpoint's dtype, except float32 which it serves as bfloat16."""
    if override and override != "auto" and override not in LINEAR_ONLY:
        if override not in DTYPE_BYTES:
            raise ValueError(f"unknown --dtype {override!r} (one of {', '.join(sorted(DTYPE_BYTES))})")
        return override, ""
    if DTYPE_BYTES.get(config_dtype) == 4:
        return "bfloat16", "float32 checkpoint served in bfloat16 (vLLM's --dtype auto)"
    return (config_dtype if config_dtype in DTYPE_BYTES else "bfloat16"), ""


def weight_format(quantization: dict[str, Any] | None, config_dtype: str, dtype: str | None = None) -> WeightFormat:
    """How the weights are stored. ``--dtype fp8|int8|int4`` quantises the linear layers in place of
    the config's method; any other ``--dtype`` sets the model's dtype and keeps the method."""
    base, note = model_dtype(config_dtype, dtype)
    base_bytes = DTYPE_BYTES[base]
    if dtype in LINEAR_ONLY:
        return WeightFormat(base, DTYPE_BYTES[dtype], dtype, "linear layers quantised by --dtype")
    if not quantization:
        return WeightFormat(base, base_bytes, "none", note)
    method = str(quantization.get("quant_method") or "unknown").lower()
    if method in ("fp8", "fbgemm_fp8"):
        block = quantization.get("weight_block_size")
        if isinstance(block, list) and len(block) == 2:
            return WeightFormat(base, 1 + 4 / (block[0] * block[1]), f"fp8 (block {block[0]}x{block[1]})", note)
        return WeightFormat(base, 1.0, "fp8", note)
    if method in ("awq", "gptq"):
        bits = int(quantization.get("bits") or quantization.get("w_bit") or 4)
        group = int(quantization.get("group_size") or quantization.get("q_group_size") or 128)
        group = group if group > 0 else 4096  # -1: one group per row, about 4096 wide
        return WeightFormat(base, bits / 8 + (2 + bits / 8) / group, f"{method} {bits}-bit g{group}", note)
    if method == "compressed-tensors":
        return _compressed_tensors(quantization, base, note)
    if method == "bitsandbytes":
        if quantization.get("load_in_8bit"):
            return WeightFormat(base, 1.0, "bitsandbytes 8-bit", note)
        return WeightFormat(base, 0.5 + 4 / 64, "bitsandbytes 4-bit", note)  # a float32 absmax per 64
    if method == "mxfp4":
        return WeightFormat(base, 0.5 + 1 / 32, "mxfp4", note)  # an e8m0 scale per 32
    return WeightFormat(base, base_bytes, method, f"quantisation method {method!r} is not modelled: sized at {base}")


def _compressed_tensors(quantization: dict[str, Any], base: str, note: str) -> WeightFormat:
    groups = quantization.get("config_groups") or {}
    first: Any = next(iter(groups.values()), {}) if isinstance(groups, dict) else {}
    weights = first.get("weights") or {} if isinstance(first, dict) else {}
    bits = int(weights.get("num_bits") or 8)
    group = weights.get("group_size") if weights.get("strategy") == "group" else None
    extra = 2 / int(group) if group else 0.0
    label = f"compressed-tensors {weights.get('type', 'int')}{bits}" + (f" g{group}" if group else "")
    return WeightFormat(base, bits / 8 + extra, label, note)


def weight_bytes(params: Params, fmt: WeightFormat) -> int:
    """Bytes of the weights that ``params`` counts, stored as ``fmt`` says."""
    base = DTYPE_BYTES[fmt.model_dtype]
    total = 0.0
    for name, count in params.components.items():
        total += count * (fmt.linear_bytes if name in QUANTISABLE else base)
    return round(total)
