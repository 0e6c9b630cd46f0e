"""Tensor parallelism runs over PCIe, without NVLink between the GPUs.

What it detects:
The engine shards the model with `tensor_parallel_size` > 1 across GPUs that have no NVLink
between them (NVML topology PCIe / host bridge / socket, no active NVLink to the peer).

Why it matters:
Tensor parallelism all-reduces activations twice per layer for every token; over PCIe those
transfers take a large share of each decode step, so inter-token latency and throughput suffer
compared with the same GPUs used in a pipeline or as separate replicas.

Evidence:
Startup log (or run record): `tensor_parallel_size`, `pipeline_parallel_size`. GPU probe (NVML):
the topology between the devices in use (the first `tensor_parallel_size` of
`CUDA_VISIBLE_DEVICES`, else of the devices found), and active NVLink links; else the run
record's `gpu_interconnect`.

Remediation:
Consider pipeline parallelism over these GPUs (setting `pipeline_parallel_size`, with
`tensor_parallel_size` 1), which sends activations once per stage boundary, or data-parallel
replicas when one GPU holds the model; keep tensor parallelism for NVLink-connected GPUs.

Example:
LD404 tp-without-nvlink: tensor_parallel_size 2 over GPUs 0-1 linked by PCIe (NVML topology), no
active NVLink -> pipeline_parallel_size 2 with tensor_parallel_size 1.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import Setting, engine_flag, engine_setting, rerun
from doctor.derive.engine import UNIDENTIFIED, EngineIdentity
from doctor.derive.log_facts import LogFacts
from doctor.evidence import GpuEvidence, RunRecord
from doctor.model import Cause, EvidenceValue, Remediation, Severity, SymptomClass


def devices_in_use(gpu: GpuEvidence, count: int) -> list[int]:
    """NVML indices of the first ``count`` GPUs the engine sees (NVML ignores CUDA_VISIBLE_DEVICES)."""
    visible = [v.strip() for v in (gpu.cuda_visible_devices or "").split(",") if v.strip()]
    if visible and all(v.isdigit() for v in visible):
        return [int(v) for v in visible[:count]]
    return sorted(d.index for d in gpu.devices)[:count]


def link(gpu: GpuEvidence, a: int, b: int) -> str | None:
    """``"NVLINK"``, the topology name of a slower link, or ``None`` when NVML said nothing."""
    if any(n.active and {n.gpu, n.remote_gpu} == {a, b} for n in gpu.nvlinks):
        return "NVLINK"
    topo = gpu.topology.get(f"{a}-{b}") or gpu.topology.get(f"{b}-{a}")
    if topo is None:
        return None
    return "NVLINK" if topo.upper().startswith("NV") else topo


@dataclass(frozen=True)
class Found:
    """The links between the GPUs in use, per pair of NVML indices (``None``: all the devices, as the
    run record states their interconnect), the tensor-parallel size and the pipeline setting."""

    tp: Setting
    size: int
    pairs: tuple[tuple[tuple[int, int] | None, str], ...]
    pp: Setting | None

    @property
    def slow(self) -> tuple[tuple[tuple[int, int] | None, str], ...]:
        return tuple((p, k) for p, k in self.pairs if k != "NVLINK")


@check(code="LD404", name="tp-without-nvlink", symptom=SymptomClass.CAPACITY_CONFIG, cause=Cause.DECODE)
def tp_without_nvlink(
    gpu: GpuEvidence,
    log_facts: LogFacts | None = None,
    run: RunRecord | None = None,
    engine: EngineIdentity = UNIDENTIFIED,
) -> Result:
    tp = engine_setting("tensor_parallel_size", log_facts, run)
    if tp is None or int(tp.value) <= 1:
        return NotApplicable("tensor parallelism is not in use (tensor_parallel_size 1 or unknown)")
    size = int(tp.value)
    pairs: list[tuple[tuple[int, int] | None, str]] = []
    if gpu.available:
        used = devices_in_use(gpu, size)
        for i, a in enumerate(used):
            for b in used[i + 1 :]:
                kind = link(gpu, a, b)
                if kind is not None:
                    pairs.append(((a, b), kind))
    if not pairs and run is not None and run.gpu_interconnect:
        pairs.append((None, "NVLINK" if run.gpu_interconnect.lower() == "nvlink" else run.gpu_interconnect))
    if not pairs:
        return NotApplicable(
            "the interconnect between the GPUs is unknown (no NVML topology or NVLink state)"
        )
    found = Found(tp, size, tuple(pairs), engine_setting("pipeline_parallel_size", log_facts, run))
    if not found.slow:
        return Pass(_over_nvlink(found))
    return Fire(
        felt=False,  # a configuration: a slow decode shows as a TPOT witness
        title="Tensor parallelism runs without NVLink",
        summary=_summary(found),
        remediation=_remediation(found, engine.id),
        severity=Severity.WARNING,
        evidence=_evidence(found),
    )


def _pair(pair: tuple[int, int] | None) -> str:
    return "devices" if pair is None else f"{pair[0]}-{pair[1]}"


def _over_nvlink(found: Found) -> str:
    return f"tensor_parallel_size {found.size} over NVLink ({', '.join(_pair(p) for p, _ in found.pairs)})"


def _summary(found: Found) -> str:
    described = ", ".join(f"{_pair(p)} {k}" for p, k in found.slow)
    return f"tensor_parallel_size {found.size} over GPUs without NVLink ({described}; n={len(found.pairs)} pairs)"


def _remediation(found: Found, engine: str) -> Remediation:
    size, pp = found.size, found.pp
    return Remediation(
        setting="pipeline_parallel_size",
        suggested=f"{size} with tensor_parallel_size 1",
        current=f"tensor_parallel_size {size}, pipeline_parallel_size {pp.value if pp else 1}",
        where=engine_flag(engine, "pipeline_parallel_size", "tensor_parallel_size"),
        why=(
            "Tensor parallelism all-reduces activations twice per layer per token; over PCIe that traffic "
            "stretches every decode step. A pipeline over the same GPUs sends activations once per stage; "
            "if one GPU holds the model, separate replicas (data parallel) avoid the traffic entirely."
        ),
        verify=rerun("lower inter-token gaps (TPOT p50) at the same concurrency"),
    )


def _evidence(found: Found) -> list[EvidenceValue]:
    return [
        found.tp.evidence("tensor_parallel_size"),
        *(EvidenceValue(f"link GPU {_pair(p)}", k, "", "gpu: NVML topology / NVLink state") for p, k in found.pairs),
    ]
