"""The KV cache budget of one rank: given in bytes, or what a card leaves after the weights.

``--kv-cache-memory`` is taken as vLLM takes ``--kv-cache-memory-bytes``: per GPU, with vLLM's
suffixes (``1G`` = 2**30 as in its ``human_readable_int``, lower-case ``1g`` = 10**9) plus the
unit spellings people paste (``24GiB``, ``1.5 GB``). It is hand-parsed because vLLM's reading of
the case of a suffix is the contract, and no units library reads ``G`` as binary but ``g`` as not.

From a card, vLLM gives the KV cache ``total x gpu_memory_utilization`` minus what its memory
profile measures: weights, the activation peak of one ``max_num_batched_tokens`` forward pass,
non-torch memory (CUDA context, NCCL buffers) and, since 0.11, the CUDA graph pools. Only the
weights are computed here; the rest is left out and named (``LEFT_OUT``), so the figure is the
most the engine can give: the real vLLM profiles in fixtures/logs (0.6.5, 0.8) show 0.84 to 4.84
GiB per GPU of non-torch memory plus activation peak, and 0.17 GiB of CUDA graphs (0.21+).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

GiB = 1 << 30
MiB = 1 << 20

#: Total memory as ``nvidia-smi`` reports it (MiB), for ``--gpu``. vLLM multiplies the CUDA
#: runtime's total, about 0.4 GiB less (an H100 80GB: 79.22 GiB in a real vLLM 0.6.5 profile).
GPUS: dict[str, int] = {
    "H200": 143771,
    "H100-80GB": 81559,
    "A100-80GB": 81920,
    "A100-40GB": 40960,
    "L40S": 46068,
    "A10G": 23028,
    "L4": 23034,
    "RTX-4090": 24564,
    "T4": 15360,
}
DEFAULT_GPU_MEMORY_UTILIZATION = 0.9
LEFT_OUT = (
    "activation peak of the profiling forward pass, non-torch memory (CUDA context, NCCL) and CUDA graph pools "
    "are not subtracted: real vLLM profiles of 7-8B models put them at 0.8-4.8 GiB per GPU, so the engine gives about that much less"
)

_SIZE = re.compile(r"^\s*(?P<num>\d+(?:\.\d+)?)\s*(?P<unit>[kKmMgGtT]?)(?P<rest>i?[bB])?\s*$")
_POWER = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4}


def parse_bytes(text: str) -> int:
    """``'1G'`` -> 1073741824 (vLLM), ``'1g'`` -> 10**9, ``'24GiB'`` -> 24 x 2**30, ``'1.5 GB'`` -> 1.5 x 10**9."""
    match = _SIZE.match(text)
    if not match:
        raise ValueError(f"not a byte size: {text!r} (e.g. 1G, 512M, 24GiB, 80GB, 1073741824)")
    unit, rest = match["unit"], match["rest"] or ""
    power = _POWER[unit.lower()]
    base = 1024 if rest.lower() == "ib" or (not rest and unit.isupper()) else 1000
    return int(float(match["num"]) * base**power)


def gpu_memory(name: str) -> int:
    """Bytes of a card in the table, by name, case and separators ignored."""
    key = re.sub(r"[\s_]", "-", name.strip()).upper()
    for known, mib in GPUS.items():
        if known.upper() == key or known.upper().replace("-", "") == key.replace("-", ""):
            return mib * MiB
    raise ValueError(f"unknown --gpu {name!r}: one of {', '.join(GPUS)} (or give --gpu-memory 24GiB)")


def smallest_card(needed_bytes: float, utilization: float, below_bytes: float) -> tuple[str, int] | None:
    """The card of the table with the least memory under ``below_bytes`` whose ``utilization`` share
    holds ``needed_bytes`` per GPU, as ``(name, bytes)``; None when no smaller card does."""
    fits = [(mib * MiB, name) for name, mib in GPUS.items()
            if mib * MiB < below_bytes and mib * MiB * utilization >= needed_bytes]
    if not fits:
        return None
    size, name = min(fits)
    return name, size


@dataclass(frozen=True)
class Budget:
    """The KV cache memory of one rank and how it was obtained; ``upper_bound`` when it comes from a
    card, where the engine's profile subtracts more than the weights (``LEFT_OUT``).
    """

    kv_memory_bytes: int  # per rank
    source: str  # how it was obtained, one line
    gpu_memory_bytes: int | None = None
    utilization: float | None = None
    upper_bound: bool = False  # derived from a card: the engine's profile takes more


def budget_from_card(gpu_bytes: int, utilization: float, weights_per_rank: int) -> Budget:
    requested = int(gpu_bytes * utilization)
    return Budget(
        kv_memory_bytes=max(0, requested - weights_per_rank),
        source=f"{gpu_bytes / GiB:.2f} GiB x gpu_memory_utilization {utilization} - weights {weights_per_rank / GiB:.2f} GiB per rank",
        gpu_memory_bytes=gpu_bytes,
        utilization=utilization,
        upper_bound=True,
    )
