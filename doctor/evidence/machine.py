"""GPU (NVML) and host (psutil) facts. ``available=False`` with a reason is a normal outcome."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class GpuProcess:
    pid: int
    name: str | None = None
    used_memory_bytes: int | None = None


@dataclass
class GpuDevice:
    index: int
    name: str | None = None
    uuid_hash: str | None = None  # UUIDs are hashed, never stored raw
    memory_total_bytes: int | None = None
    memory_used_bytes: int | None = None
    memory_free_bytes: int | None = None
    utilization_gpu_pct: float | None = None
    utilization_memory_pct: float | None = None
    sm_clock_mhz: int | None = None
    sm_clock_max_mhz: int | None = None
    mem_clock_mhz: int | None = None
    mem_clock_max_mhz: int | None = None
    throttle_reasons: list[str] = field(default_factory=list)
    temperature_c: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    ecc_errors_uncorrected: int | None = None
    processes: list[GpuProcess] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # per-field NVML errors (not supported, ...)


@dataclass
class NvLink:
    gpu: int
    link: int
    active: bool
    remote_gpu: int | None = None


@dataclass
class GpuEvidence:
    available: bool = False
    reason: str | None = None  # why not available: no module, no driver, NVML error
    driver_version: str | None = None
    nvml_version: str | None = None
    cuda_driver_version: str | None = None
    cuda_visible_devices: str | None = None
    devices: list[GpuDevice] = field(default_factory=list)
    nvlinks: list[NvLink] = field(default_factory=list)
    topology: dict[str, str] = field(default_factory=dict)  # "0-1" -> "NVLINK" | "PCIe" | ...


@dataclass
class ProcessInfo:
    pid: int
    name: str | None = None
    cmdline: str | None = None  # redacted
    cpu_percent: float | None = None
    rss_bytes: int | None = None
    num_threads: int | None = None
    found_by: str | None = None  # "port" | "name"


@dataclass
class HostEvidence:
    hostname: str | None = None
    os: str | None = None
    python: str | None = None
    cpu_model: str | None = None
    cpu_count_logical: int | None = None
    cpu_count_physical: int | None = None
    cpu_sockets: int | None = None  # CPU packages, for the run record's topology
    cpu_percent: float | None = None
    load_avg: list[float] = field(default_factory=list)
    memory_total_bytes: int | None = None
    memory_available_bytes: int | None = None
    swap_total_bytes: int | None = None
    swap_used_bytes: int | None = None
    vllm_process: ProcessInfo | None = None
