"""Parameter counts by component, for the whole model and for one tensor-parallel rank.

Counted from the config's shapes the way the checkpoint stores them: every weight matrix and
bias, every norm's scale. The MLP is the gated (SwiGLU / GeGLU) form all the supported families
use: gate, up and down projections. Per rank follows vLLM's sharding: attention heads, MLP width,
expert width and vocabulary split over ``tp`` ranks; KV heads split too but are replicated when
there are fewer than ranks; norms, the router and MLA's compressing projections are replicated.
vLLM pads the vocabulary to a multiple of 64 per rank; that padding (well under 0.1 %) is left out.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.sizing.architecture import Architecture

#: The components whose weights a quantisation method converts (linear layers); the rest stay
#: in the model's own dtype: embeddings, LM head, norms, biases and the MoE router.
QUANTISABLE = ("attention", "mlp", "experts", "shared_experts")
COMPONENTS = ("embeddings", "lm_head", "attention", "mlp", "experts", "shared_experts", "router", "norms_biases")


@dataclass(frozen=True)
class Params:
    """Parameter counts by component (``COMPONENTS``), for the whole model or one rank: by component
    because a quantisation converts only some of them (``QUANTISABLE``).
    """

    components: dict[str, int]  # COMPONENTS -> count
    active_experts: int  # routed-expert parameters one token goes through

    @property
    def total(self) -> int:
        return sum(self.components.values())

    @property
    def active(self) -> int:
        """Parameters used per token: all but the routed experts a token skips."""
        return self.total - self.components["experts"] + self.active_experts


def _shard(n: int, tp: int) -> int:
    return -(-n // tp)


def count_params(arch: Architecture, tp: int = 1) -> Params:
    """Parameters held by one of ``tp`` ranks (``tp=1``: the whole model)."""
    h = arch.hidden
    heads = _shard(arch.heads, tp)
    kv_heads = max(1, arch.kv_heads // tp)
    c = dict.fromkeys(COMPONENTS, 0)
    vocab = _shard(arch.vocab, tp)
    c["embeddings"] = vocab * h
    c["lm_head"] = 0 if arch.tied_embeddings else vocab * h
    attention, extras = _attention(arch, heads, kv_heads)
    c["attention"] = attention * arch.layers
    c["norms_biases"] = (extras + arch.norms_per_layer * h) * arch.layers + h
    active = 0
    moe = arch.moe
    for layer in range(arch.layers):
        if moe is None or layer in moe.dense_layers:
            c["mlp"] += 3 * h * _shard(arch.intermediate, tp)
            continue
        expert = 3 * h * _shard(moe.intermediate, tp)
        c["experts"] += moe.experts * expert
        active += moe.active * expert
        c["shared_experts"] += 3 * h * _shard(moe.shared_intermediate, tp) + (h if moe.shared_gate else 0)
        c["router"] += h * moe.experts + (moe.experts if moe.router_bias else 0)
    return Params(components=c, active_experts=active)


def _attention(arch: Architecture, heads: int, kv_heads: int) -> tuple[int, int]:
    """One layer's attention: (projection weights, biases and norms inside attention)."""
    h, mla = arch.hidden, arch.mla
    if mla is not None:
        qk = mla.qk_nope_head_dim + mla.qk_rope_head_dim
        if mla.q_lora_rank:
            q, q_norm = h * mla.q_lora_rank + mla.q_lora_rank * heads * qk, mla.q_lora_rank
        else:
            q, q_norm = h * heads * qk, 0
        kv = h * (mla.kv_lora_rank + mla.qk_rope_head_dim) + mla.kv_lora_rank * heads * (mla.qk_nope_head_dim + mla.v_head_dim)
        return q + kv + heads * mla.v_head_dim * h, q_norm + mla.kv_lora_rank
    d = arch.head_dim
    weights = 2 * h * heads * d + 2 * h * kv_heads * d
    extras = (heads * d + 2 * kv_heads * d if arch.qkv_bias else 0) + (h if arch.o_bias else 0)
    extras += 2 * d if arch.qk_norm else 0
    return weights, extras
