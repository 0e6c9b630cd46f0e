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
from dataclasses import dataclass
from typing import Any

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import Setting, engine_flag, engine_setting, rerun
from doctor.derive.engine import UNIDENTIFIED, EngineIdentity
from doctor.derive.log_facts import LogFacts
from doctor.evidence import GpuEvidence, GpuProcess, RunRecord
from doctor.foundation.units import fmt_pct
from doctor.model import Cause, EvidenceValue, Remediation, Severity, SymptomClass

GIB = 1024**3


@dataclass(frozen=True)
class Found:
    """The GPU with the least free memory (of ``gpus`` read), the other processes holding memory on
    it, the ``gpu_memory_utilization`` in use, and the change suggested: the value that frees
    enough (``target``), else the step to lower it by (``step``, also what the KV cache gives up)."""

    engine: str
    index: int
    free_bytes: float
    total_bytes: float
    gpus: int
    others: tuple[tuple[GpuProcess, float], ...]
    util: Setting | None
    target: float | None
    step: float

    @property
    def free_share(self) -> float:
        return self.free_bytes / self.total_bytes


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
        return NotApplicable(_no_readings(gpu.reason))
    measured = [(d, free, total) for d in gpu.devices
                if (total := d.memory_total_bytes) and (free := d.memory_free_bytes) is not None]
    if not measured:
        return NotApplicable("NVML reported no memory figures")
    tightest, free_bytes, total_bytes = min(measured, key=lambda m: m[1] / m[2])
    free_share = free_bytes / total_bytes
    util = engine_setting("gpu_memory_utilization", log_facts, run)
    target = None
    if util is not None:
        target = math.floor((float(util.value) - (min_free_share - free_share)) * 100) / 100
        step = float(util.value) - target
    else:
        step = math.ceil((min_free_share - free_share) * 100) / 100
    found = Found(engine.id, tightest.index, free_bytes, total_bytes, len(measured),
                  tuple((p, used) for p in tightest.processes if (used := p.used_memory_bytes)), util, target, step)
    if free_share >= min_free_share:
        return Pass(_enough_free(found))
    return Fire(
        felt=False,  # a capacity not used yet
        title="Almost no GPU memory is left free",
        summary=_summary(found),
        remediation=_remediation(found, sizing, min_free_share),
        severity=Severity.CRITICAL if free_share < critical_free_share else Severity.WARNING,
        evidence=_evidence(found),
    )


def _no_readings(reason: str | None) -> str:
    return f"no GPU readings ({reason or 'NVML unavailable'})"


def _enough_free(found: Found) -> str:
    return (f"GPU {found.index} keeps {found.free_bytes / GIB:.1f} GiB of {found.total_bytes / GIB:.1f} GiB free "
            f"({fmt_pct(found.free_share)})")


def _summary(found: Found) -> str:
    summary = (f"GPU {found.index} has {found.free_bytes / GIB:.1f} GiB free of {found.total_bytes / GIB:.1f} GiB "
               f"({fmt_pct(found.free_share)}, n={found.gpus} GPUs read)")
    if len(found.others) > 1:
        summary += f"; {len(found.others)} processes hold memory on it"
    return summary


def _evidence(found: Found) -> list[EvidenceValue]:
    evidence = [
        EvidenceValue(f"GPU {found.index} free memory", round(found.free_bytes / GIB, 2), "GiB", "gpu: NVML memory info"),
        EvidenceValue(f"GPU {found.index} total memory", round(found.total_bytes / GIB, 2), "GiB",
                      "gpu: NVML memory info"),
        EvidenceValue("free share", round(found.free_share, 4), "", "gpu: NVML free / total"),
        *(EvidenceValue(f"process {p.name or p.pid} GPU memory", round(used / GIB, 2), "GiB",
                        "gpu: NVML running processes") for p, used in found.others),
    ]
    if found.util is not None:
        evidence.append(found.util.evidence("gpu_memory_utilization"))
    return evidence


def _remediation(found: Found, sizing: dict[str, Any] | None, min_free_share: float) -> Remediation:
    return Remediation(
        setting="gpu_memory_utilization",
        suggested=f"{found.target:.2f}" if found.target is not None else f"lower by {found.step:.2f}",
        current=str(found.util.value) if found.util is not None else None,
        where=engine_flag(found.engine, "gpu_memory_utilization"),
        why=(
            f"Only {fmt_pct(found.free_share)} of GPU {found.index} is free: allocations outside the KV cache "
            "(long-prompt activations, CUDA graphs, NCCL, other processes) can hit out-of-memory on the first "
            f"long-context spike. Lowering gpu_memory_utilization keeps {fmt_pct(min_free_share)} free, at the cost "
            + (_kv_cost(sizing, found.step * found.total_bytes) or "of some KV cache.")
        ),
        verify=rerun(f"NVML free memory at or above {fmt_pct(min_free_share)} of the device"),
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
