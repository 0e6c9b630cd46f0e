"""What a queue in front of the engine asks for: more replicas, unless the KV cache is what holds it.

The queue-bound checks (LD505 queue latency, LD101 when the KV cache was full) advise more capacity.
A KV cache that holds fewer than ``MIN_REQUESTS_IN_CACHE`` requests of the size served is a cheaper
cause: the engine can run only one of them at a time whatever the replica count, and growing the
cache (``gpu_memory_utilization``, when the GPU has memory the engine was not given) lets one
replica batch them. Public through ``doctor.checklib`` (``queue_remediation``).
"""

from __future__ import annotations

from doctor.checklib.engine_settings import engine_setting
from doctor.checklib.kv_arithmetic import MAX_GPU_MEMORY_UTILIZATION, tokens_per_request
from doctor.checklib.remediation import add_capacity, engine_flag, rerun
from doctor.derive.log_facts import LogFacts
from doctor.evidence import RunRecord, StreamEvidence
from doctor.model import Remediation

#: Fewer requests of the size served than this fit the KV cache: the queue is the cache's.
MIN_REQUESTS_IN_CACHE = 2.0


def queue_remediation(why: str, verify: str, log_facts: LogFacts | None, run: RunRecord | None,
                      stream: StreamEvidence | None, engine: str) -> Remediation:
    """``add_capacity``, unless the KV cache (startup log or run record) holds fewer than
    ``MIN_REQUESTS_IN_CACHE`` requests of the size the probe measured: then grow the cache
    (``gpu_memory_utilization``), with ``why`` (the check's own numbers, a sentence) kept in front."""
    kv = engine_setting("kv_cache_tokens", log_facts, run)
    per_request = tokens_per_request(stream)
    if kv is None or per_request is None or not float(kv.value) or per_request[0] <= 0:
        return add_capacity(why, verify)
    tokens, _ = per_request
    fit = float(kv.value) / tokens
    if fit >= MIN_REQUESTS_IN_CACHE:
        return add_capacity(why, verify)
    utilization = engine_setting("gpu_memory_utilization", log_facts, run)
    current = f"{float(utilization.value):.2f}" if utilization is not None else None
    return Remediation(
        setting="gpu_memory_utilization",
        suggested=(f"higher, up to {MAX_GPU_MEMORY_UTILIZATION}, until the KV cache holds several requests of "
                   f"{tokens:,.0f} tokens (it holds {fit:.1f}); or a lower max_model_len"),
        current=current,
        where=engine_flag(engine, "gpu_memory_utilization"),
        why=(f"{why} The KV cache holds {int(kv.value):,} tokens ({kv.source}): {fit:.1f} requests of "
             f"{tokens:,.0f} tokens, so the engine runs them about one at a time and the rest queue, whatever "
             "the number of replicas. Giving the KV cache the GPU memory the engine was not given lets one "
             "replica batch them; check nvidia-smi for free memory first (if there is none, a larger GPU or "
             "a shorter max_model_len, then replicas)."),
        verify=rerun(f"{verify}, and the startup log's KV cache size to hold at least "
                     f"{MIN_REQUESTS_IN_CACHE:g} requests of {tokens:,.0f} tokens"),
    )
