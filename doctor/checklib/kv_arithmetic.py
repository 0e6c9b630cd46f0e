"""KV-cache and GPU-memory arithmetic the engine checks share, so each number means one thing.

How many sequences fit in the KV cache and how far ``gpu_memory_utilization`` may go are
asked by the queueing (LD101), preemption (LD201), startup (LD403) and capacity (LD401)
checks; answered here once. Public through ``doctor.checklib``.
"""

from __future__ import annotations

import math
import statistics

from doctor.evidence import StreamEvidence

#: The share of the KV cache a suggested ``max_num_seqs`` fills at most (headroom for requests
#: longer than the ones measured).
KV_FILL_TARGET = 0.9

#: The highest ``gpu_memory_utilization`` a remediation suggests: the rest of the GPU's memory
#: holds activations, CUDA graphs and fragmentation.
MAX_GPU_MEMORY_UTILIZATION = 0.95


def tokens_per_request(stream: StreamEvidence | None) -> tuple[float, str] | None:
    """KV tokens one request holds at its end (prompt + completion), and where that came from.

    The usage trailers of measured answers are exact; the probe's requested shape is the
    fallback (its ``max_tokens`` is an upper bound, which is what KV sizing must assume).
    """
    if stream is None:
        return None
    used = [
        r.prompt_tokens + r.completion_tokens
        for r in stream.requests
        if r.ok and not r.warmup and r.prompt_tokens is not None and r.completion_tokens is not None
    ]
    if used:
        return statistics.fmean(used), f"stream: usage trailers, mean over n={len(used)}"
    shape = stream.shape
    if shape.prompt_tokens and shape.max_tokens:
        return float(shape.prompt_tokens + shape.max_tokens), "stream: probe shape (prompt_tokens + max_tokens)"
    return None


def sequences_that_fit(kv_tokens: float, per_request: float, target: float = KV_FILL_TARGET) -> int:
    """How many requests of ``per_request`` KV tokens fit in ``target`` of a ``kv_tokens`` cache.

    ``target=1.0`` fills the cache to the last block: the bound beyond which admitted sequences
    must be preempted, rather than a setting with room to spare.
    """
    return math.floor(kv_tokens * target / per_request)


def capped_utilization(value: float) -> float:
    """A suggested ``gpu_memory_utilization``, never above ``MAX_GPU_MEMORY_UTILIZATION``."""
    return min(value, MAX_GPU_MEMORY_UTILIZATION)
