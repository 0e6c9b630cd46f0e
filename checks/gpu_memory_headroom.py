"""Almost no GPU memory is left free after vLLM's allocation.

What it detects:
A GPU the engine runs on has almost no free memory (NVML free / total below `min_free_share`):
vLLM took `gpu_memory_utilization` of it and other processes took the rest.

Why it matters:
vLLM pre-allocates its KV cache, but activations for unusually long prompts, CUDA graph capture,
sampler buffers and NCCL all allocate outside it. With no slack, the first long-context spike
or a neighbour's allocation ends in a CUDA out-of-memory error and a dead engine.

Evidence:
GPU probe (NVML): memory total / used / free per device and the processes holding memory.
Startup log (or run record): `gpu_memory_utilization` in use. Sizing (`--model-dir`): KV bytes
per token and the KV cache the log's budget gives, to say what the lower setting costs.

Remediation:
Lower `gpu_memory_utilization` by the missing headroom (suggested: current - (min_free_share -
free share), rounded down to 0.01), or move the other processes off the GPU. With the model's
config, the remediation says how many KV tokens (and full-length requests) that costs.

Options:
min_free_share: free / total GPU memory below which it fires
critical_free_share: free / total below which the finding is critical

Example:
LD405 gpu-memory-headroom: GPU 0 has 0.4 GiB free of 79.6 GiB (0.5 %); 2 processes hold memory ->
gpu_memory_utilization 0.95 -> 0.92.
"""

from __future__ import annotations

import math
from typing import Any

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import engine_flag, engine_setting, rerun
from doctor.derive.engine import UNIDENTIFIED, EngineIdentity
from doctor.derive.log_facts import LogFacts
from doctor.evidence import GpuEvidence, RunRecord
from doctor.foundation.units import fmt_pct
from doctor.model import Cause, EvidenceValue, Remediation, Severity, SymptomClass

GIB = 1024**3


@check(code="LD405", name="gpu-memory-headroom", symptom=SymptomClass.CAPACITY_CONFIG, cause=Cause.CAPACITY)
def gpu_memory_headroom(
    gpu: GpuEvidence,
    log_facts: LogFacts | None = None,
    run: RunRecord | None = None,
    sizing: dict[str, Any] | None = None,
    engine: EngineIdentity = UNIDENTIFIED,
    *,
    min_free_share: float = 0.03,
    critical_free_share: float = 0.01,
) -> Result:
    if not gpu.available:
        return NotApplicable(f"no GPU readings ({gpu.reason or 'NVML unavailable'})")
    measured = [(d, free, total) for d in gpu.devices
                if (total := d.memory_total_bytes) and (free := d.memory_free_bytes) is not None]
    if not measured:
        return NotApplicable("NVML reported no memory figures")
    tightest, free_bytes, total_bytes = min(measured, key=lambda m: m[1] / m[2])
    free_share = free_bytes / total_bytes
    free_gib, total_gib = free_bytes / GIB, total_bytes / GIB
    if free_share >= min_free_share:
        return Pass(
            f"GPU {tightest.index} keeps {free_gib:.1f} GiB of {total_gib:.1f} GiB free ({fmt_pct(free_share)})"
        )
    util = engine_setting("gpu_memory_utilization", log_facts, run)
    if util is not None:
        target = math.floor((float(util.value) - (min_free_share - free_share)) * 100) / 100
        suggested, step = f"{target:.2f}", float(util.value) - target
    else:
        step = math.ceil((min_free_share - free_share) * 100) / 100
        suggested = f"lower by {step:.2f}"
    others = [(p, used) for p in tightest.processes if (used := p.used_memory_bytes)]
    summary = (
        f"GPU {tightest.index} has {free_gib:.1f} GiB free of {total_gib:.1f} GiB ({fmt_pct(free_share)}, "
        f"n={len(measured)} GPUs read)"
    )
    if len(others) > 1:
        summary += f"; {len(others)} processes hold memory on it"
    evidence = [
        EvidenceValue(
            f"GPU {tightest.index} free memory", round(free_gib, 2), "GiB", "gpu: NVML memory info"
        ),
        EvidenceValue(
            f"GPU {tightest.index} total memory", round(total_gib, 2), "GiB", "gpu: NVML memory info"
        ),
        EvidenceValue("free share", round(free_share, 4), "", "gpu: NVML free / total"),
        *(
            EvidenceValue(
                f"process {p.name or p.pid} GPU memory",
                round(used / GIB, 2),
                "GiB",
                "gpu: NVML running processes",
            )
            for p, used in others
        ),
    ]
    if util is not None:
        evidence.append(util.evidence("gpu_memory_utilization"))
    return Fire(
        felt=False,  # a capacity not used yet
        title="Almost no GPU memory is left free",
        summary=summary,
        remediation=Remediation(
            setting="gpu_memory_utilization",
            suggested=suggested,
            current=str(util.value) if util is not None else None,
            where=engine_flag(engine.id, "gpu_memory_utilization"),
            why=(
                f"Only {fmt_pct(free_share)} of GPU {tightest.index} is free: allocations outside the KV cache "
                "(long-prompt activations, CUDA graphs, NCCL, other processes) can hit out-of-memory on the first "
                f"long-context spike. Lowering gpu_memory_utilization keeps {fmt_pct(min_free_share)} free, at the cost "
                + (_kv_cost(sizing, step * total_bytes) or "of some KV cache.")
            ),
            verify=rerun(f"NVML free memory at or above {fmt_pct(min_free_share)} of the device"),
        ),
        severity=Severity.CRITICAL if free_share < critical_free_share else Severity.WARNING,
        evidence=evidence,
    )


def _kv_cost(sizing: dict[str, Any] | None, freed_bytes: float) -> str | None:
    """What giving ``freed_bytes`` back costs the KV cache, from the model's sizing (``--model-dir``)."""
    per_token = (sizing or {}).get("kv_bytes_per_token_per_rank")
    tokens = (sizing or {}).get("kv_cache_tokens")
    if not per_token or not tokens:
        return None
    lost = min(tokens, math.ceil(freed_bytes / per_token))
    text = (f"of {freed_bytes / GIB:.2f} GiB of KV cache: {lost:,} of its {tokens:,} tokens at {per_token:,} bytes "
            f"per token (model config), {fmt_pct(lost / tokens)}")
    length = (sizing or {}).get("max_model_len")
    if length:
        text += f"; {(tokens - lost) / length:.2f}x full-length ({length:,}-token) requests fit instead of {tokens / length:.2f}x"
    return text + "."
