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

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import rerun
from doctor.derive.engine import UNIDENTIFIED, EngineIdentity
from doctor.engines.names import display
from doctor.evidence import GpuDevice, GpuEvidence, GpuProcess, HostEvidence
from doctor.model import Cause, EvidenceValue, Remediation, SymptomClass


@check(code="LD207", name="gpu-contended", symptom=SymptomClass.INTER_TOKEN, cause=Cause.GPU_STATE)
def gpu_contended(
    gpu: GpuEvidence,
    host: HostEvidence | None = None,
    engine: EngineIdentity = UNIDENTIFIED,
    *,
    min_memory_fraction: float = 0.01,
) -> Result:
    if not gpu.available:
        return NotApplicable(f"no NVML evidence ({gpu.reason or 'not collected'})")
    if not any(d.processes for d in gpu.devices):
        return NotApplicable("NVML listed no process on any GPU (inside a container it often cannot see them)")
    vllm_pid = host.vllm_process.pid if host is not None and host.vllm_process is not None else None
    contended = [(d, others) for d in gpu.devices if (others := _others(d, vllm_pid, min_memory_fraction))]
    named = display(engine.id)
    if not contended:
        return Pass(f"only {named}'s processes hold GPU memory")
    device, others = max(contended, key=lambda c: sum(p.used_memory_bytes or 0 for p in c[1]))
    listed = ", ".join(_describe(p) for p in others)
    evidence = [
        EvidenceValue("other process", _describe(p), "", f"gpu: NVML process list, GPU {device.index}") for p in others
    ]
    summary = f"GPU {device.index}: {len(others)} other process(es) besides {named}: {listed}"
    if len(contended) > 1:
        summary += f" ({len(contended)} GPUs shared)"
    return Fire(
        felt=False,  # a GPU state: a slow decode shows as a TPOT witness
        title=f"Other processes share the GPU with {named}",
        summary=summary,
        remediation=Remediation(
            setting="gpu_isolation",
            suggested=f"move {listed} off GPU {device.index}, or give {named} a dedicated GPU (CUDA_VISIBLE_DEVICES / MIG)",
            why=f"the GPU time-slices between processes: {named}'s steps wait while the other kernels run",
            verify=rerun(f"NVML to list only {named} on the GPU and TPOT to fall and steady"),
            where=f"the host's GPU assignment (not a setting of {named})",
        ),
        evidence=evidence,
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
