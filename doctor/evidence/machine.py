"""GPU (NVML) and host (psutil) facts. ``available=False`` with a reason is a normal outcome."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class GpuProcess:
    """A process NVML saw on a GPU and the device memory it held: tells the engine from a stray job
    sharing the card."""

    pid: int
    name: str | None = None
    used_memory_bytes: int | None = None


@dataclass
class GpuDevice:
    """One GPU as NVML read it during the run: memory, utilisation, clocks against their maximum and
    the throttle reasons (a throttled card is slow for reasons no engine flag fixes), temperature,
    power, uncorrected ECC errors and its processes. A field NVML could not read is ``None`` and
    named in ``errors``."""

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
    """One NVLink of one GPU: whether it is up, and the GPU at its other end (tensor parallelism over a
    link that is down falls back to PCIe)."""

    gpu: int
    link: int
    active: bool
    remote_gpu: int | None = None


@dataclass
class XidEvent:
    """One XID (driver-reported GPU error) NVML delivered to the watch."""

    gpu: int | None  # NVML index of the device that reported it; None if NVML could not say
    xid: int  # the XID number (``eventData``): 79 fallen off the bus, 48 double-bit ECC, ...
    # When the watch read it, not when it happened: NVML events carry no timestamp, and the
    # watch reads them once, after the stream probe. What is known is that it happened in the window.
    seen_t: float  # seconds since the run's t0 (the stream probe's clock)
    seen_wall: float  # unix time


#: How a device's ``errors`` entry says it could not be watched for XIDs: ``"xid_events: <why>"``.
XID_NOTE_PREFIX = "xid_events: "


@dataclass
class XidWatch:
    """Critical XID events NVML reported while the stream probe ran (NVML keeps no history)."""

    watched: list[int] = field(default_factory=list)  # device indices registered for XID events
    start_t: float | None = None  # the window, on the run's clock and as unix time
    end_t: float | None = None
    start_wall: float | None = None
    end_wall: float | None = None
    events: list[XidEvent] = field(default_factory=list)
    truncated: bool = False  # more events than the watch reads; the rest were left unread
    reason: str | None = None  # why nothing was watched, or why the watch ended early
    # NVML failed while reading the queued events (other than "queue empty"): events may be missing,
    # so "no event" proves nothing. ``gpu_lost`` when the failure was NVML's "GPU is lost", which
    # is how a GPU that fell off the bus (XID 79) shows to the reader.
    read_error: str | None = None
    gpu_lost: bool = False


@dataclass
class GpuEvidence:
    """The ``gpu`` kind: the driver, every device, their NVLinks and topology, and the XID watch
    around the stream probe. ``available`` false with a ``reason`` (no NVML, no driver) is a normal
    outcome on a host without GPUs or without access to them, not an error."""

    available: bool = False
    reason: str | None = None  # why not available: no module, no driver, NVML error
    driver_version: str | None = None
    nvml_version: str | None = None
    cuda_driver_version: str | None = None
    cuda_visible_devices: str | None = None
    devices: list[GpuDevice] = field(default_factory=list)
    nvlinks: list[NvLink] = field(default_factory=list)
    topology: dict[str, str] = field(default_factory=dict)  # "0-1" -> "NVLINK" | "PCIe" | ...
    xid: XidWatch | None = None  # None when no watch ran (no GPU, no stream probe)


@dataclass
class ProcessInfo:
    """The engine's process on this host (found by its port or its name): CPU, memory and threads,
    with its command line redacted, so a starved serving process is seen beside the GPU."""

    pid: int
    name: str | None = None
    cmdline: str | None = None  # redacted
    cpu_percent: float | None = None
    rss_bytes: int | None = None
    num_threads: int | None = None
    found_by: str | None = None  # "port" | "name"


@dataclass
class HostEvidence:
    """The ``host`` kind: the machine the doctor ran on (and the engine, when local) as psutil saw
    it: CPUs and their load, memory and swap, and the engine's process. What says whether the host,
    not the GPU or the gateway, can be what slows the answers."""

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
