"""The NVML probe against a fake NVML module (no GPU on the test machine) and the real one.

The fake answers like pynvml does (objects with pynvml's attribute names, pynvml's own error
classes and constants) so the probe's decoding, error handling and shutdown are what is tested.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pynvml
import pytest

from doctor.probes.gpu import collect_gpu

BUS = ("00000000:18:00.0", "00000000:2A:00.0")
RAW_UUIDS = ("GPU-6ae8a3c1-5a2e-4b1f-9d3c-0123456789ab", "GPU-77c1d4e2-0b3a-4c2d-8e4f-ba9876543210")
GIB = 1 << 30


@dataclass
class FakeGpu:
    name: str = "NVIDIA H100 80GB HBM3"
    uuid: str = RAW_UUIDS[0]
    bus_id: str = BUS[0]
    memory: tuple[int, int, int] = (80 * GIB, 70 * GIB, 10 * GIB)
    utilization: tuple[int, int] = (97, 60)
    sm_clock: tuple[int, int] = (1980, 1980)
    mem_clock: tuple[int, int] = (2619, 2619)
    reasons: int = 0
    temperature: int = 61
    power_mw: int = 540_000
    limit_mw: int = 700_000
    ecc: int = 0
    compute: list[tuple[int, int | None]] = field(default_factory=list)
    graphics: list[tuple[int, int | None]] = field(default_factory=list)
    links: dict[int, str] = field(default_factory=dict)  # active link -> remote bus id
    nvlink_supported: bool = True
    unsupported: set[str] = field(default_factory=set)  # NVML function names that answer NOT_SUPPORTED
    lost_on: str | None = None  # NVML function that answers GPU_IS_LOST


class FakeNvml:
    """Just enough of pynvml; constants and error classes are the real module's."""

    NVML_NVLINK_MAX_LINKS = 18

    def __init__(self, gpus: list[FakeGpu], *, init_error: int | None = None, topology: int = pynvml.NVML_TOPOLOGY_SYSTEM,
                 process_names: dict[int, str] | None = None) -> None:
        self.gpus = gpus
        self.init_error = init_error
        self.topology = topology
        self.process_names = process_names or {}
        self.initialised = False
        self.shutdowns = 0

    def __getattr__(self, name: str) -> Any:
        if name.startswith("nvmlDevice"):
            raise AttributeError(name)  # every device call must be faked below
        return getattr(pynvml, name)

    def _gpu(self, handle: int, fn: str) -> FakeGpu:
        assert self.initialised, f"{fn} called outside nvmlInit/nvmlShutdown"
        gpu = self.gpus[handle]
        if fn in gpu.unsupported:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        if fn == gpu.lost_on:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
        return gpu

    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise pynvml.NVMLError(self.init_error)
        self.initialised = True

    def nvmlShutdown(self) -> None:
        self.initialised = False
        self.shutdowns += 1

    def nvmlSystemGetDriverVersion(self) -> str:
        return "550.54.15"

    def nvmlSystemGetNVMLVersion(self) -> bytes:
        return b"12.550.54.15"

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return 12040

    def nvmlSystemGetProcessName(self, pid: int) -> str:
        if pid not in self.process_names:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        return self.process_names[pid]

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetName(self, h: int) -> str:
        return self._gpu(h, "nvmlDeviceGetName").name

    def nvmlDeviceGetUUID(self, h: int) -> str:
        return self._gpu(h, "nvmlDeviceGetUUID").uuid

    def nvmlDeviceGetPciInfo(self, h: int) -> Any:
        return SimpleNamespace(busId=self._gpu(h, "nvmlDeviceGetPciInfo").bus_id.encode())

    def nvmlDeviceGetMemoryInfo(self, h: int) -> Any:
        total, used, free = self._gpu(h, "nvmlDeviceGetMemoryInfo").memory
        return SimpleNamespace(total=total, used=used, free=free)

    def nvmlDeviceGetUtilizationRates(self, h: int) -> Any:
        gpu, memory = self._gpu(h, "nvmlDeviceGetUtilizationRates").utilization
        return SimpleNamespace(gpu=gpu, memory=memory)

    def _clock(self, h: int, kind: int, fn: str, i: int) -> int:
        gpu = self._gpu(h, fn)
        return {pynvml.NVML_CLOCK_SM: gpu.sm_clock, pynvml.NVML_CLOCK_MEM: gpu.mem_clock}[kind][i]

    def nvmlDeviceGetClockInfo(self, h: int, kind: int) -> int:
        return self._clock(h, kind, "nvmlDeviceGetClockInfo", 0)

    def nvmlDeviceGetMaxClockInfo(self, h: int, kind: int) -> int:
        return self._clock(h, kind, "nvmlDeviceGetMaxClockInfo", 1)

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: int) -> int:
        return self._gpu(h, "nvmlDeviceGetCurrentClocksEventReasons").reasons

    def nvmlDeviceGetTemperature(self, h: int, sensor: int) -> int:
        assert sensor == pynvml.NVML_TEMPERATURE_GPU
        return self._gpu(h, "nvmlDeviceGetTemperature").temperature

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:
        return self._gpu(h, "nvmlDeviceGetPowerUsage").power_mw

    def nvmlDeviceGetEnforcedPowerLimit(self, h: int) -> int:
        return self._gpu(h, "nvmlDeviceGetEnforcedPowerLimit").limit_mw

    def nvmlDeviceGetTotalEccErrors(self, h: int, error_type: int, counter: int) -> int:
        assert (error_type, counter) == (pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_VOLATILE_ECC)
        return self._gpu(h, "nvmlDeviceGetTotalEccErrors").ecc

    def nvmlDeviceGetComputeRunningProcesses(self, h: int) -> list[Any]:
        procs = self._gpu(h, "nvmlDeviceGetComputeRunningProcesses").compute
        return [SimpleNamespace(pid=pid, usedGpuMemory=mem) for pid, mem in procs]

    def nvmlDeviceGetGraphicsRunningProcesses(self, h: int) -> list[Any]:
        procs = self._gpu(h, "nvmlDeviceGetGraphicsRunningProcesses").graphics
        return [SimpleNamespace(pid=pid, usedGpuMemory=mem) for pid, mem in procs]

    def nvmlDeviceGetNvLinkState(self, h: int, link: int) -> int:
        gpu = self._gpu(h, "nvmlDeviceGetNvLinkState")
        if not gpu.nvlink_supported:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        if link >= 8:  # an 8-link part asked about link 8..17
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return int(link in gpu.links)

    def nvmlDeviceGetNvLinkRemotePciInfo(self, h: int, link: int) -> Any:
        return SimpleNamespace(busId=self._gpu(h, "nvmlDeviceGetNvLinkRemotePciInfo").links[link].encode())

    def nvmlDeviceGetTopologyCommonAncestor(self, a: int, b: int) -> int:
        self._gpu(a, "nvmlDeviceGetTopologyCommonAncestor")
        return self.topology


def two_gpus(**second: Any) -> list[FakeGpu]:
    return [FakeGpu(), FakeGpu(uuid=RAW_UUIDS[1], bus_id=BUS[1], **second)]


def test_two_gpus_joined_by_nvlink(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    gpus = two_gpus()
    # Four links each way; the remote end is written the short way on purpose.
    gpus[0].links = dict.fromkeys(range(4), "0000:2a:00.0")
    gpus[1].links = dict.fromkeys(range(4), "0000:18:00.0")
    nvml = FakeNvml(gpus, topology=pynvml.NVML_TOPOLOGY_SYSTEM)

    evidence, errors = collect_gpu(nvml)

    assert errors == [] and evidence.available and evidence.reason is None
    assert (evidence.driver_version, evidence.nvml_version, evidence.cuda_driver_version) == ("550.54.15", "12.550.54.15", "12.4")
    assert evidence.cuda_visible_devices == "0,1"
    assert [d.name for d in evidence.devices] == ["NVIDIA H100 80GB HBM3"] * 2
    first = evidence.devices[0]
    assert (first.memory_total_bytes, first.memory_used_bytes, first.memory_free_bytes) == (80 * GIB, 70 * GIB, 10 * GIB)
    assert (first.utilization_gpu_pct, first.sm_clock_mhz, first.sm_clock_max_mhz) == (97.0, 1980, 1980)
    assert (first.power_w, first.power_limit_w, first.temperature_c) == (540.0, 700.0, 61.0)
    assert first.ecc_errors_uncorrected == 0 and first.throttle_reasons == [] and first.errors == []
    # NVLink: every active link names the other GPU, and the pair is NVLINK, not the PCIe level.
    active = [(link.gpu, link.link, link.remote_gpu) for link in evidence.nvlinks if link.active]
    assert active == [(0, k, 1) for k in range(4)] + [(1, k, 0) for k in range(4)]
    # Links 4..7 exist but are down (a degraded fabric shows here); links 8+ do not exist.
    inactive = [(link.gpu, link.link, link.remote_gpu) for link in evidence.nvlinks if not link.active]
    assert inactive == [(0, k, None) for k in range(4, 8)] + [(1, k, None) for k in range(4, 8)]
    assert evidence.topology == {"0-1": "NVLINK"}
    # UUIDs are hashed, distinct, and never stored raw.
    hashes = [d.uuid_hash for d in evidence.devices]
    assert all(h and re.fullmatch(r"[0-9a-f]{12}", h) for h in hashes) and hashes[0] != hashes[1]
    assert not any(raw in repr(evidence) for raw in RAW_UUIDS)
    assert nvml.shutdowns == 1


def test_throttled_gpu_shared_with_other_processes() -> None:
    vllm, other, desktop = 4242, 5151, 6161
    throttled = {
        "sm_clock": (1155, 1980),
        "reasons": pynvml.nvmlClocksThrottleReasonSwPowerCap | pynvml.nvmlClocksThrottleReasonHwThermalSlowdown,
        "temperature": 89,
        "compute": [(vllm, 60 * GIB), (other, 12 * GIB)],
        "graphics": [(other, None), (desktop, 256 << 20)],
        "nvlink_supported": False,
    }
    nvml = FakeNvml(two_gpus(**throttled), topology=pynvml.NVML_TOPOLOGY_HOSTBRIDGE,
                    process_names={vllm: "python3", desktop: "/usr/lib/xorg/Xorg"})
    nvml.gpus[0].nvlink_supported = False

    evidence, errors = collect_gpu(nvml)

    assert errors == [] and evidence.available
    hot = evidence.devices[1]
    assert hot.throttle_reasons == ["sw_power_cap", "hw_thermal_slowdown"]
    assert (hot.sm_clock_mhz, hot.sm_clock_max_mhz) == (1155, 1980)
    # A process both compute and graphics is listed once, with the memory NVML reported.
    assert [(p.pid, p.name, p.used_memory_bytes) for p in hot.processes] == [
        (vllm, "python3", 60 * GIB),
        (other, None, 12 * GIB),
        (desktop, "/usr/lib/xorg/Xorg", 256 << 20),
    ]
    # PCIe-only GPUs: no NVLink and no note about it; the pair is a PCIe host-bridge path.
    assert evidence.nvlinks == [] and hot.errors == []
    assert evidence.topology == {"0-1": "PHB"}


def test_not_supported_field_is_a_device_note() -> None:
    consumer = FakeGpu(name="NVIDIA GeForce RTX 4090",
                       unsupported={"nvmlDeviceGetTotalEccErrors", "nvmlDeviceGetEnforcedPowerLimit"})
    nvml = FakeNvml([consumer])

    evidence, errors = collect_gpu(nvml)

    assert errors == [] and evidence.available
    (device,) = evidence.devices
    assert device.ecc_errors_uncorrected is None and device.power_limit_w is None
    assert device.errors == ["power_limit: Not Supported", "ecc: Not Supported"]
    assert device.power_w == 540.0 and device.name == "NVIDIA GeForce RTX 4090"
    assert evidence.topology == {}
    assert nvml.shutdowns == 1


@pytest.mark.parametrize(
    ("code", "words"),
    [(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "Library Not Found"), (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "Driver Not Loaded")],
)
def test_no_library_or_driver_is_not_available_without_error(code: int, words: str) -> None:
    nvml = FakeNvml([FakeGpu()], init_error=code)
    evidence, errors = collect_gpu(nvml)
    assert not evidence.available and words in (evidence.reason or "")
    assert evidence.devices == [] and errors == []
    assert nvml.shutdowns == 0  # nothing to shut down after a failed init


def test_gpu_lost_mid_read_is_not_available_and_still_shuts_down() -> None:
    nvml = FakeNvml(two_gpus(lost_on="nvmlDeviceGetMemoryInfo"))
    evidence, errors = collect_gpu(nvml)
    assert not evidence.available and "GPU is lost" in (evidence.reason or "")
    (error,) = errors
    assert (error.source, error.kind, error.fatal) == ("gpu", "unavailable", False)
    assert nvml.shutdowns == 1


def test_missing_bindings_are_not_available(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` raise ImportError
    evidence, errors = collect_gpu()
    assert not evidence.available and "nvidia-ml-py" in (evidence.reason or "")
    assert errors == []


def test_real_nvml_never_raises() -> None:
    """On this machine NVML is usually absent; on a GPU machine it must list devices."""
    evidence, errors = collect_gpu()
    if evidence.available:
        assert evidence.devices and all(d.name for d in evidence.devices)
    else:
        assert evidence.reason
    assert all(e.source == "gpu" for e in errors)


def test_uuids_in_cuda_visible_devices_are_hashed_like_the_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"{RAW_UUIDS[1]},0")
    evidence, _ = collect_gpu(FakeNvml(two_gpus()))
    assert evidence.cuda_visible_devices == f"{evidence.devices[1].uuid_hash},0"
