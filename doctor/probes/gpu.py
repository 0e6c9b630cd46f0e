"""GPU facts through NVML (``pynvml`` from ``nvidia-ml-py``): one snapshot per device.

What the engine's GPUs were doing when the run was measured: memory, utilisation, clocks
against their maxima and why they are held down (power, thermal...), temperature, power,
uncorrected ECC errors, other processes sharing the GPU, and how the GPUs are connected
(NVLink or a PCIe path), which is what tensor parallelism pays for on every token.

No GPU is a normal outcome, not a failure: the doctor often runs on a machine other than the
engine's. Without the module, the library or the driver, the evidence says ``available=False``
and why. A field one device does not support (ECC on a GeForce card, power on some boards)
is listed in that device's ``errors`` and the rest is kept.

XID errors cannot be read from a snapshot: the listener that catches them while the probe runs
is ``doctor.probes.gpu_xid``. Starting NVML and mapping its errors, which both share, is
``doctor.probes.nvml``.

UUIDs identify hardware across runs without naming it, so they are stored hashed.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from collections.abc import Callable
from functools import partial
from types import ModuleType
from typing import Any, TypeVar

from doctor.evidence import EvidenceError, GpuDevice, GpuEvidence, GpuProcess, NvLink
from doctor.probes.nvml import FIELD_ERRORS, SOURCE, optional, start_nvml, text

T = TypeVar("T")

#: Clock-event ("throttle") reason bits, by the suffix of their pynvml constant, and the name stored.
THROTTLE_REASONS = (
    ("GpuIdle", "gpu_idle"),
    ("ApplicationsClocksSetting", "applications_clocks_setting"),
    ("SwPowerCap", "sw_power_cap"),
    ("HwSlowdown", "hw_slowdown"),
    ("SyncBoost", "sync_boost"),
    ("SwThermalSlowdown", "sw_thermal_slowdown"),
    ("HwThermalSlowdown", "hw_thermal_slowdown"),
    ("HwPowerBrakeSlowdown", "hw_power_brake_slowdown"),
    ("DisplayClockSetting", "display_clock_setting"),
)

#: ``nvmlDeviceGetTopologyCommonAncestor`` levels in the legend of ``nvidia-smi topo -m``:
#: every one of them is a PCIe path (PIX: one switch ... SYS: across CPU sockets). A pair with
#: an active NVLink between them is recorded as ``NVLINK`` instead.
TOPOLOGY_LEVELS = (
    ("NVML_TOPOLOGY_INTERNAL", "BOARD"),
    ("NVML_TOPOLOGY_SINGLE", "PIX"),
    ("NVML_TOPOLOGY_MULTIPLE", "PXB"),
    ("NVML_TOPOLOGY_HOSTBRIDGE", "PHB"),
    ("NVML_TOPOLOGY_NODE", "NODE"),
    ("NVML_TOPOLOGY_SYSTEM", "SYS"),
)
NVLINK = "NVLINK"

#: A GPU or MIG UUID as NVML prints it and CUDA_VISIBLE_DEVICES may list it: hashed like device UUIDs.
_UUID = re.compile(r"\b(?:GPU|MIG)-[0-9A-Fa-f]{8}(?:-[0-9A-Fa-f]{4}){3}-[0-9A-Fa-f]{12}\b")


def collect_gpu(nvml: ModuleType | Any | None = None) -> tuple[GpuEvidence, list[EvidenceError]]:
    """Snapshot every GPU NVML sees: (evidence, errors), never raising.

    The evidence says ``available=False`` with a ``reason`` when NVML cannot be used, so the
    report can tell "no GPU here" (no error: a CPU-only client host is normal) from "GPU lost".
    ``nvml`` is the pynvml module, injectable so tests can drive NVML's failure modes.
    """
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    evidence = GpuEvidence(cuda_visible_devices=_UUID.sub(lambda m: _uuid_hash(m.group()), visible) if visible else visible)
    nvml, evidence.reason, errors = start_nvml(nvml)
    if nvml is None:
        return evidence, errors
    try:
        _snapshot(nvml, evidence)
        evidence.available = True
        return evidence, []
    except nvml.NVMLError as exc:
        evidence.reason = f"NVML failed while reading the GPUs: {exc}"
        return evidence, [EvidenceError(SOURCE, "nvml", "read devices", "unavailable", evidence.reason)]
    finally:
        with contextlib.suppress(nvml.NVMLError):
            nvml.nvmlShutdown()


def _snapshot(nvml: Any, evidence: GpuEvidence) -> None:
    evidence.driver_version = optional(nvml, lambda: text(nvml.nvmlSystemGetDriverVersion()))
    evidence.nvml_version = optional(nvml, lambda: text(nvml.nvmlSystemGetNVMLVersion()))
    cuda = optional(nvml, nvml.nvmlSystemGetCudaDriverVersion)
    if cuda:
        evidence.cuda_driver_version = f"{cuda // 1000}.{cuda % 1000 // 10}"
    handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
    evidence.devices = [_device(nvml, i, h) for i, h in enumerate(handles)]
    bus_to_index: dict[tuple[str, ...], int] = {}
    for device, handle in zip(evidence.devices, handles, strict=True):
        bus_id = _field(nvml, device, "pci", partial(_pci_bus_id, nvml, handle))
        if bus_id:
            bus_to_index[_bus_key(bus_id)] = device.index
    for device, handle in zip(evidence.devices, handles, strict=True):
        evidence.nvlinks += _nvlinks(nvml, device, handle, bus_to_index)
    evidence.topology = _topology(nvml, evidence, handles)


def _device(nvml: Any, index: int, h: Any) -> GpuDevice:
    d = GpuDevice(index=index)

    def field(label: str, fn: Callable[[], T]) -> T | None:
        return _field(nvml, d, label, fn)

    d.name = field("name", lambda: text(nvml.nvmlDeviceGetName(h)))
    uuid = field("uuid", lambda: text(nvml.nvmlDeviceGetUUID(h)))
    d.uuid_hash = _uuid_hash(uuid) if uuid else None
    memory = field("memory", lambda: nvml.nvmlDeviceGetMemoryInfo(h))
    if memory is not None:
        d.memory_total_bytes, d.memory_used_bytes, d.memory_free_bytes = memory.total, memory.used, memory.free
    rates = field("utilization", lambda: nvml.nvmlDeviceGetUtilizationRates(h))
    if rates is not None:
        d.utilization_gpu_pct, d.utilization_memory_pct = float(rates.gpu), float(rates.memory)
    d.sm_clock_mhz = field("sm_clock", lambda: nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM))
    d.sm_clock_max_mhz = field("sm_clock_max", lambda: nvml.nvmlDeviceGetMaxClockInfo(h, nvml.NVML_CLOCK_SM))
    d.mem_clock_mhz = field("mem_clock", lambda: nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_MEM))
    d.mem_clock_max_mhz = field("mem_clock_max", lambda: nvml.nvmlDeviceGetMaxClockInfo(h, nvml.NVML_CLOCK_MEM))
    reasons = field("throttle_reasons", lambda: _clock_event_reasons(nvml, h))
    d.throttle_reasons = _decode_reasons(nvml, reasons) if reasons is not None else []
    temperature = field("temperature", lambda: nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU))
    d.temperature_c = float(temperature) if temperature is not None else None
    power_mw = field("power", lambda: nvml.nvmlDeviceGetPowerUsage(h))
    d.power_w = power_mw / 1000 if power_mw is not None else None
    limit_mw = field("power_limit", lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(h))
    d.power_limit_w = limit_mw / 1000 if limit_mw is not None else None
    d.ecc_errors_uncorrected = field(
        "ecc",
        lambda: nvml.nvmlDeviceGetTotalEccErrors(h, nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nvml.NVML_VOLATILE_ECC),
    )
    d.processes = _processes(nvml, d, h)
    return d


def _clock_event_reasons(nvml: Any, h: Any) -> int:
    # Renamed from "throttle reasons" to "clocks event reasons" in NVML 12.2; older bindings lack the new name.
    getter = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or nvml.nvmlDeviceGetCurrentClocksThrottleReasons
    return int(getter(h))


def _decode_reasons(nvml: Any, mask: int) -> list[str]:
    names = []
    for suffix, name in THROTTLE_REASONS:
        bit = getattr(nvml, f"nvmlClocksEventReason{suffix}", None) or getattr(nvml, f"nvmlClocksThrottleReason{suffix}", 0)
        if bit and mask & bit:
            names.append(name)
    return names


def _processes(nvml: Any, d: GpuDevice, h: Any) -> list[GpuProcess]:
    """Compute and graphics processes, once each (a process can be both)."""
    found: dict[int, GpuProcess] = {}
    for label, getter in (
        ("compute_processes", nvml.nvmlDeviceGetComputeRunningProcesses),
        ("graphics_processes", nvml.nvmlDeviceGetGraphicsRunningProcesses),
    ):
        for proc in _field(nvml, d, label, partial(getter, h)) or []:
            known = found.get(proc.pid)
            if known is None:
                name = optional(nvml, partial(_process_name, nvml, proc.pid))
                found[proc.pid] = GpuProcess(pid=proc.pid, name=name or None, used_memory_bytes=proc.usedGpuMemory)
            elif known.used_memory_bytes is None:
                known.used_memory_bytes = proc.usedGpuMemory
    return list(found.values())


def _nvlinks(nvml: Any, d: GpuDevice, h: Any, bus_to_index: dict[tuple[str, ...], int]) -> list[NvLink]:
    """Every NVLink the device reports, with the GPU at the other end when it is one of ours.

    A PCIe-only GPU answers "not supported" for every link: that is the answer, not an error.
    The remote end of an active link may be an NVSwitch, whose bus id is no GPU's.
    """
    links = []
    for link in range(nvml.NVML_NVLINK_MAX_LINKS):
        try:
            active = bool(nvml.nvmlDeviceGetNvLinkState(h, link))
        except nvml.NVMLError as exc:
            if type(exc).__name__ in ("NVMLError_NotSupported", "NVMLError_InvalidArgument"):
                continue  # no such link on this device
            if type(exc).__name__ not in FIELD_ERRORS:
                raise
            d.errors.append(f"nvlink: {exc}")
            break
        remote = None
        if active:
            bus_id = _field(nvml, d, f"nvlink{link}_remote", partial(_nvlink_remote_bus_id, nvml, h, link))
            remote = bus_to_index.get(_bus_key(bus_id)) if bus_id else None
        links.append(NvLink(gpu=d.index, link=link, active=active, remote_gpu=remote))
    return links


def _topology(nvml: Any, evidence: GpuEvidence, handles: list[Any]) -> dict[str, str]:
    """``"i-j"`` -> ``NVLINK`` or the PCIe path between the pair (``TOPOLOGY_LEVELS``)."""
    levels = {getattr(nvml, const): name for const, name in TOPOLOGY_LEVELS if hasattr(nvml, const)}
    linked = {
        tuple(sorted((link.gpu, link.remote_gpu)))
        for link in evidence.nvlinks
        if link.active and link.remote_gpu is not None
    }
    topology = {}
    for i in range(len(handles)):
        for j in range(i + 1, len(handles)):
            if (i, j) in linked:
                topology[f"{i}-{j}"] = NVLINK
                continue
            level = _field(
                nvml, evidence.devices[i], f"topology-{j}",
                partial(nvml.nvmlDeviceGetTopologyCommonAncestor, handles[i], handles[j]),
            )
            if level is not None:
                topology[f"{i}-{j}"] = levels.get(level, f"level-{level}")
    return topology


# Queries made inside loops, bound with functools.partial (a lambda would capture the loop variable).
def _pci_bus_id(nvml: Any, handle: Any) -> str:
    return text(nvml.nvmlDeviceGetPciInfo(handle).busId)


def _process_name(nvml: Any, pid: int) -> str:
    return text(nvml.nvmlSystemGetProcessName(pid))


def _nvlink_remote_bus_id(nvml: Any, handle: Any, link: int) -> str:
    return text(nvml.nvmlDeviceGetNvLinkRemotePciInfo(handle, link).busId)


def _field(nvml: Any, device: GpuDevice, label: str, fn: Callable[[], T]) -> T | None:
    """One NVML query: a device-level refusal becomes a note on the device; anything else propagates."""
    try:
        return fn()
    except nvml.NVMLError as exc:
        if type(exc).__name__ not in FIELD_ERRORS:
            raise
        device.errors.append(f"{label}: {exc}")
        return None


def _uuid_hash(uuid: str) -> str:
    return hashlib.sha256(uuid.encode()).hexdigest()[:12]


def _bus_key(bus_id: str) -> tuple[str, ...]:
    """``00000000:07:00.0`` and ``0000:07:00.0`` name the same device: compare without leading zeros."""
    return tuple(part.lstrip("0") or "0" for part in re.split(r"[:.]", bus_id.strip().lower()))
