"""A Hugging Face ``config.json`` read into the few numbers sizing needs.

Configs name the same thing many ways (``n_routed_experts`` / ``num_local_experts`` /
``num_experts``; ``torch_dtype`` / ``dtype``; ``layer_types`` / ``sliding_window_pattern``), and
multimodal checkpoints nest the language model under ``text_config``. This module is the one
place that knows those spellings, so the arithmetic in ``params`` and ``kv`` reads one shape.
Only the language model is sized: a vision tower is named in ``notes`` and left out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from doctor.foundation.wire import WireError, loads, number

FULL, SLIDING = "full", "sliding"
#: The most layers a config is believed to have: sizing builds one entry per layer (the largest
#: checkpoints have ~130), and a config claiming 10^11 layers once ate the machine building them.
MAX_LAYERS = 10_000
#: The largest width, head count, vocabulary, expert count or context believed (2^31: far above any
#: real checkpoint, far below what makes the byte arithmetic meaningless).
MAX_DIMENSION = 2**31


class ConfigError(ValueError):
    """The config is missing, unreadable, or lacks a number sizing cannot do without."""


@dataclass(frozen=True)
class Moe:
    """A mixture-of-experts model's expert shapes, kept apart because the weights hold every routed
    expert while a token goes through only ``active`` of them (total against active parameters).
    """

    experts: int  # routed experts per MoE layer
    active: int  # routed experts each token goes through
    intermediate: int  # one routed expert's MLP width
    shared_intermediate: int = 0  # total width of the always-on shared expert(s); 0: none
    shared_gate: bool = False  # Qwen2-MoE's sigmoid gate on the shared expert (hidden x 1)
    router_bias: bool = False  # DeepSeek-V3's e_score_correction_bias (one per expert)
    dense_layers: tuple[int, ...] = ()  # layers with a plain MLP instead (first_k_dense_replace, mlp_only_layers)


@dataclass(frozen=True)
class Mla:
    """DeepSeek-style multi-head latent attention: the cache holds one compressed latent per token."""

    q_lora_rank: int | None
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int


@dataclass(frozen=True)
class Architecture:
    """The numbers sizing needs from a config, under one spelling whatever the family wrote, so
    ``params`` and ``kv`` read one shape; ``notes`` say what was left out (a vision tower).
    """

    model_type: str
    vocab: int
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    tied_embeddings: bool
    dtype: str  # the checkpoint's torch dtype name, e.g. "bfloat16"
    qkv_bias: bool = False
    o_bias: bool = False
    norms_per_layer: int = 2
    qk_norm: bool = False  # per-head RMSNorm on q and k (Qwen3, Gemma 3)
    layer_kinds: tuple[str, ...] = ()  # FULL or SLIDING, one per layer
    sliding_window: int | None = None
    moe: Moe | None = None
    mla: Mla | None = None
    quantization: dict[str, Any] | None = None
    max_position_embeddings: int | None = None
    notes: tuple[str, ...] = field(default=())


def config_path(model: str | Path) -> Path:
    """``config.json`` inside a model directory, or the file itself."""
    path = Path(model)
    try:
        return path / "config.json" if path.is_dir() else path
    except OSError:  # a folder on the way cannot be entered: reading the path itself says so
        return path


def load_config_text(model: str | Path) -> tuple[Path, str]:
    """The config's path and text; a missing or unreadable file is a ``ConfigError``."""
    path = config_path(model)
    try:
        return path, path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"no model config at {path} (give a model directory with config.json, or the file)") from None
    except OSError as exc:
        raise ConfigError(f"cannot read the model config {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"cannot read the model config {path}: {exc}") from None


def parse_architecture(text: str, source: str = "config.json") -> Architecture:
    """The sizing view of a config's JSON text."""
    try:
        raw = loads(text, finite=True)
    except WireError as exc:
        raise ConfigError(f"{source} is not usable JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{source} is not a JSON object")
    return architecture(raw, source)


def architecture(raw: dict[str, Any], source: str = "config.json") -> Architecture:
    notes: list[str] = []
    top = raw
    if isinstance(raw.get("text_config"), dict):
        raw = {**raw["text_config"], "quantization_config": top.get("quantization_config")}
        notes.append("multimodal checkpoint: only the language model (text_config) is sized")
    model_type = str(raw.get("model_type") or top.get("model_type") or "unknown")

    def need(*names: str, maximum: int = MAX_DIMENSION) -> int:
        for name in names:
            value = raw.get(name)
            if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= maximum:
                return value
        raise ConfigError(f"{source} has no usable {' / '.join(names)} (a whole number from 1 to {maximum:,})")

    hidden = need("hidden_size", "n_embd", "d_model")
    layers = need("num_hidden_layers", "n_layer", "num_layers", maximum=MAX_LAYERS)
    heads = need("num_attention_heads", "n_head")
    kv_heads = _size(raw, source, "num_key_value_heads") or heads
    head_dim = _size(raw, source, "head_dim") or hidden // heads
    mla = _mla(raw, source)
    moe = _moe(raw, source, layers)
    intermediate = _size(raw, source, "intermediate_size") or (moe.intermediate if moe else 4 * hidden)
    context = _size(raw, source, "max_position_embeddings") or None
    kinds, window = _layer_kinds(raw, model_type, layers)
    gemma = model_type.startswith("gemma")
    return Architecture(
        model_type=model_type,
        vocab=need("vocab_size"),
        hidden=hidden,
        layers=layers,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate=intermediate,
        # Gemma ties its embeddings whatever the flag; transformers' default is True elsewhere too.
        tied_embeddings=bool(raw.get("tie_word_embeddings", top.get("tie_word_embeddings", True))) or gemma,
        dtype=str(raw.get("torch_dtype") or raw.get("dtype") or top.get("torch_dtype") or "bfloat16"),
        qkv_bias=bool(raw.get("attention_bias", False)) or model_type in ("qwen2", "qwen2_moe"),
        o_bias=bool(raw.get("attention_bias", False)) and model_type not in ("qwen2", "qwen2_moe"),
        norms_per_layer=4 if model_type in ("gemma2", "gemma3", "gemma3_text") else 2,
        qk_norm=model_type in ("qwen3", "qwen3_moe", "gemma3", "gemma3_text", "olmo2"),
        layer_kinds=kinds,
        sliding_window=window,
        moe=moe,
        mla=mla,
        quantization=raw.get("quantization_config") if isinstance(raw.get("quantization_config"), dict) else None,
        max_position_embeddings=context,
        notes=tuple(notes),
    )


def _size(raw: dict[str, Any], source: str, *names: str, default: int = 0, maximum: int = MAX_DIMENSION) -> int:
    """The first of ``names`` that ``raw`` gives (``0``, ``null`` or absent: the next one, then
    ``default``), as a whole number from 0 to ``maximum``; anything else is a ``ConfigError``.

    Bounded with ``doctor.foundation.wire.number`` as every other parser of outside input is: a config's
    ``"head_dim": 1e400`` or ``"first_k_dense_replace": 99999999999`` was a traceback or a machine
    spent building a set of layers.
    """
    for name in names:
        value = raw.get(name)
        if not value:
            continue
        size = number(value, int)
        if size is None or not 0 <= size <= maximum:
            raise ConfigError(f"{source}: {name} is not a whole number from 0 to {maximum:,}: {str(value)[:40]!r}")
        return size
    return default


def _mla(raw: dict[str, Any], source: str) -> Mla | None:
    kv_lora_rank = _size(raw, source, "kv_lora_rank")
    if not kv_lora_rank:
        return None
    return Mla(
        q_lora_rank=_size(raw, source, "q_lora_rank") or None,
        kv_lora_rank=kv_lora_rank,
        qk_nope_head_dim=_size(raw, source, "qk_nope_head_dim", default=128),
        qk_rope_head_dim=_size(raw, source, "qk_rope_head_dim", default=64),
        v_head_dim=_size(raw, source, "v_head_dim", default=128),
    )


def _moe(raw: dict[str, Any], source: str, layers: int) -> Moe | None:
    experts = _size(raw, source, "n_routed_experts", "num_local_experts", "num_experts")
    if not experts:
        return None
    dense: set[int] = set(range(min(_size(raw, source, "first_k_dense_replace"), layers)))
    only = raw.get("mlp_only_layers") or []
    if not isinstance(only, list):
        raise ConfigError(f"{source}: mlp_only_layers is not a list of layer numbers")
    dense |= {_size({"mlp_only_layers": i}, source, "mlp_only_layers", maximum=MAX_LAYERS) for i in only}
    step = _size(raw, source, "moe_layer_freq", "decoder_sparse_step", default=1)
    dense |= {i for i in range(layers) if step > 1 and (i + 1) % step != 0}
    width = _size(raw, source, "moe_intermediate_size", "intermediate_size")
    shared = (_size(raw, source, "shared_expert_intermediate_size")
              or _size(raw, source, "n_shared_experts", maximum=MAX_LAYERS) * width)
    return Moe(
        experts=experts,
        active=_size(raw, source, "num_experts_per_tok", "num_experts_per_token", default=1),
        intermediate=width,
        shared_intermediate=shared,
        shared_gate=bool(raw.get("shared_expert_intermediate_size")),
        router_bias=raw.get("topk_method") == "noaux_tc",
        dense_layers=tuple(sorted(dense)),
    )


def _layer_kinds(raw: dict[str, Any], model_type: str, layers: int) -> tuple[tuple[str, ...], int | None]:
    """Which layers attend within a sliding window, as the model's own code decides it."""
    window = raw.get("sliding_window")
    if not isinstance(window, int) or not 0 < window <= MAX_DIMENSION or raw.get("use_sliding_window") is False:
        return (FULL,) * layers, None
    if isinstance(raw.get("layer_types"), list) and len(raw["layer_types"]) == layers:
        return tuple(SLIDING if "sliding" in str(t) else FULL for t in raw["layer_types"]), window
    if model_type == "gemma2":  # even layers slide (transformers' Gemma2DecoderLayer)
        return tuple(SLIDING if i % 2 == 0 else FULL for i in range(layers)), window
    pattern = raw.get("sliding_window_pattern")
    if isinstance(pattern, int) and pattern > 1:  # Gemma 3: every pattern-th layer is global
        return tuple(FULL if (i + 1) % pattern == 0 else SLIDING for i in range(layers)), window
    return (SLIDING,) * layers, window  # Mistral 7B v0.1: every layer slides
