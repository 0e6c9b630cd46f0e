"""Other processes share the GPU with vLLM.

What it detects:
GPU contended: NVML lists processes on a GPU besides vLLM's (another model server, a training
job, a notebook), holding at least ``min_memory_fraction`` of the device's memory.

Why it matters:
The GPU time-slices between processes: vLLM's decode steps wait while the other process's
kernels run, so inter-token gaps grow and jitter with a load vLLM's metrics cannot see. The
other process's memory is also memory the KV cache does not get.

Evidence:
gpu (NVML): per device the compute / graphics processes, their names and memory. host: the
vLLM process found by port or name. A process is vLLM's when its pid is the one found or its
name contains "vllm" (V1 names its engine process ``VLLM::EngineCore``); when none can be
told apart, the largest memory user is taken as vLLM. Log / metrics: which engine serves, so the
text names it (the serving process of SGLang, llama.cpp, TGI or TensorRT-LLM is the one found by
port, else the largest memory user).

Remediation:
``gpu_isolation``: move the other process off this GPU, or give vLLM its own device
(``CUDA_VISIBLE_DEVICES``, a dedicated node, or MIG partitions for hard isolation).

Options:
min_memory_fraction: ignore other processes holding less of the device's memory than this

Example:
GPU 0: 1 other process besides vLLM: python (pid 4242, 9.5 GiB) -> move it off GPU 0.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import rerun
from doctor.derive.engine import UNIDENTIFIED, EngineIdentity
from doctor.engines.names import display
from doctor.evidence import GpuDevice, GpuEvidence, GpuProcess, HostEvidence
from doctor.model import Cause, EvidenceValue, Remediation, SymptomClass


@dataclass(frozen=True)
class Found:
    """The GPU whose other processes hold the most memory, those processes, and how many GPUs are shared."""

    engine: str
    device: int
    others: tuple[GpuProcess, ...]
    shared: int


@check(code="LD207", name="gpu-contended", symptom=SymptomClass.INTER_TOKEN, cause=Cause.GPU_STATE)
def gpu_contended(
    gpu: GpuEvidence,
    host: HostEvidence | None = None,
    engine: EngineIdentity = UNIDENTIFIED,
    *,
    min_memory_fraction: float = 0.01,
) -> Result:
    if not gpu.available:
        return NotApplicable(_no_nvml(gpu.reason))
    if not any(d.processes for d in gpu.devices):
        return NotApplicable("NVML listed no process on any GPU (inside a container it often cannot see them)")
    vllm_pid = host.vllm_process.pid if host is not None and host.vllm_process is not None else None
    contended = [(d, others) for d in gpu.devices if (others := _others(d, vllm_pid, min_memory_fraction))]
    if not contended:
        return Pass(_alone(engine.id))
    device, others = max(contended, key=lambda c: sum(p.used_memory_bytes or 0 for p in c[1]))
    found = Found(engine.id, device.index, tuple(others), len(contended))
    return Fire(
        felt=False,  # a GPU state: a slow decode shows as a TPOT witness
        title=_title(found),
        summary=_summary(found),
        remediation=_remediation(found),
        evidence=_evidence(found),
    )


def _is_vllm(p: GpuProcess, vllm_pid: int | None) -> bool:
    return p.pid == vllm_pid or "vllm" in (p.name or "").lower()


def _others(d: GpuDevice, vllm_pid: int | None, min_fraction: float) -> list[GpuProcess]:
    """The processes on ``d`` that are not vLLM's and hold a noticeable share of its memory."""
    if any(_is_vllm(p, vllm_pid) for p in d.processes):
        others = [p for p in d.processes if not _is_vllm(p, vllm_pid)]
    else:  # nothing identifies vLLM: assume it is the largest memory user
        ranked = sorted(d.processes, key=lambda p: p.used_memory_bytes or 0, reverse=True)
        others = ranked[1:]
    floor = min_fraction * d.memory_total_bytes if d.memory_total_bytes else 0
    return [p for p in others if p.used_memory_bytes is None or p.used_memory_bytes >= floor]


def _describe(p: GpuProcess) -> str:
    memory = f", {p.used_memory_bytes / 2**30:.1f} GiB" if p.used_memory_bytes is not None else ""
    return f"{p.name or 'unnamed'} (pid {p.pid}{memory})"


def _no_nvml(reason: str | None) -> str:
    return f"no NVML evidence ({reason or 'not collected'})"


def _alone(engine: str) -> str:
    return f"only {display(engine)}'s processes hold GPU memory"


def _listed(found: Found) -> str:
    return ", ".join(_describe(p) for p in found.others)


def _title(found: Found) -> str:
    return f"Other processes share the GPU with {display(found.engine)}"


def _summary(found: Found) -> str:
    summary = (f"GPU {found.device}: {len(found.others)} other process(es) besides {display(found.engine)}: "
               f"{_listed(found)}")
    if found.shared > 1:
        summary += f" ({found.shared} GPUs shared)"
    return summary


def _evidence(found: Found) -> list[EvidenceValue]:
    return [EvidenceValue("other process", _describe(p), "", f"gpu: NVML process list, GPU {found.device}")
            for p in found.others]


def _remediation(found: Found) -> Remediation:
    named = display(found.engine)
    return Remediation(
        setting="gpu_isolation",
        suggested=f"move {_listed(found)} off GPU {found.device}, or give {named} a dedicated GPU (CUDA_VISIBLE_DEVICES / MIG)",
        why=f"the GPU time-slices between processes: {named}'s steps wait while the other kernels run",
        verify=rerun(f"NVML to list only {named} on the GPU and TPOT to fall and steady"),
        where=f"the host's GPU assignment (not a setting of {named})",
    )
