"""The NVML probe against a fake NVML module (no GPU on the test machine) and the real one.

The fake answers like pynvml does (objects with pynvml's attribute names, pynvml's own error
classes and constants) so the probe's decoding, error handling and shutdown are what is tested.
"""

from __future__ import annotations

import re
import sys
from collections import deque
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pynvml
import pytest

import doctor.probes.gpu_xid as gpu_xid_probe
import doctor.probes.stream as stream_probe
from checks.gpu_xid_errors import gpu_xid_errors
from doctor.checking.contract import Fire, NotApplicable
from doctor.collection.collector import CollectConfig, collect
from doctor.evidence import Bundle, GpuEvidence
from doctor.evidence.stream import StreamEvidence
from doctor.foundation.clock import Clock
from doctor.foundation.serial import load, to_jsonable
from doctor.model import Severity
from doctor.probes.gpu import collect_gpu
from doctor.probes.gpu_xid import XidWatcher
from doctor.probes.http import HttpOptions
from tests.support.sse_server import SseServer

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
        # XID events: each event set's registered devices and its queue, as NVML keeps them
        self.event_sets: dict[int, tuple[set[int], deque[Any]]] = {}
        self.sets_created = 0
        self.waits = 0
        self.wait_error: int | None = None  # an NVML error nvmlEventSetWait_v2 answers instead of an event

    def __getattr__(self, name: str) -> Any:
        if name.startswith(("nvmlDevice", "nvmlEventSet")):
            raise AttributeError(name)  # every device and event call must be faked below
        return getattr(pynvml, name)

    def raise_xid(self, index: int, xid: int) -> None:
        """The driver reports XID ``xid`` on GPU ``index``: only sets registered for it by now hear it."""
        for registered, queue in self.event_sets.values():
            if index in registered:
                queue.append(SimpleNamespace(device=index, eventType=pynvml.nvmlEventTypeXidCriticalError,
                                             eventData=xid, gpuInstanceId=0, computeInstanceId=0))

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

    def nvmlDeviceGetIndex(self, h: int) -> int:
        self._gpu(h, "nvmlDeviceGetIndex")
        return h

    def nvmlEventSetCreate(self) -> int:
        assert self.initialised, "nvmlEventSetCreate called outside nvmlInit/nvmlShutdown"
        self.sets_created += 1
        self.event_sets[self.sets_created] = (set(), deque())
        return self.sets_created

    def nvmlDeviceRegisterEvents(self, h: int, event_types: int, event_set: int) -> None:
        self._gpu(h, "nvmlDeviceRegisterEvents")
        assert event_types == pynvml.nvmlEventTypeXidCriticalError
        self.event_sets[event_set][0].add(h)

    def nvmlEventSetWait_v2(self, event_set: int, timeout_ms: int) -> Any:
        assert self.initialised, "nvmlEventSetWait_v2 called outside nvmlInit/nvmlShutdown"
        assert timeout_ms == 0  # the collector never waits for an event
        self.waits += 1
        if self.wait_error is not None:
            raise pynvml.NVMLError(self.wait_error)
        queue = self.event_sets[event_set][1]
        if not queue:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_TIMEOUT)
        return queue.popleft()

    def nvmlEventSetFree(self, event_set: int) -> None:
        assert self.initialised, "nvmlEventSetFree called outside nvmlInit/nvmlShutdown"
        del self.event_sets[event_set]


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


# XID events: NVML delivers them only to an event set registered before they happen.


def watch(nvml: Any, during: Any = lambda: None) -> tuple[GpuEvidence, list[Any]]:
    """The snapshot, then a watch around ``during()``: (evidence with ``xid``, all errors)."""
    evidence, errors = collect_gpu(nvml)
    watcher = XidWatcher(evidence, Clock(), nvml)
    watcher.start()
    during()
    watcher.stop()
    return evidence, errors + watcher.result()


def test_xids_raised_during_the_window_are_recorded() -> None:
    nvml = FakeNvml(two_gpus())
    nvml.raise_xid(0, 13)  # before the watch: NVML keeps no history, so it is not seen

    def probe() -> None:
        nvml.raise_xid(0, 79)
        nvml.raise_xid(1, 48)

    evidence, errors = watch(nvml, probe)
    nvml.raise_xid(1, 94)  # after the watch

    assert errors == []
    xid = evidence.xid
    assert xid is not None and xid.reason is None and not xid.truncated
    assert xid.watched == [0, 1]
    assert [(e.gpu, e.xid) for e in xid.events] == [(0, 79), (1, 48)]
    # each event is stamped when read, after the window closed; the window is on the run's clock
    assert xid.start_t is not None and xid.end_t is not None and xid.start_wall is not None
    assert all(xid.start_t <= xid.end_t <= e.seen_t for e in xid.events)
    assert all(e.seen_wall > 1e9 for e in xid.events)
    assert all(d.errors == [] for d in evidence.devices)
    # NVML released: the event set freed, and one shutdown for the snapshot, one for the watch
    assert nvml.event_sets == {} and nvml.shutdowns == 2 and not nvml.initialised


def test_the_drain_reads_until_nvml_says_timeout() -> None:
    nvml = FakeNvml([FakeGpu()])
    evidence, errors = watch(nvml, lambda: [nvml.raise_xid(0, 31) for _ in range(3)])
    assert errors == [] and [e.xid for e in evidence.xid.events] == [31, 31, 31]
    assert nvml.waits == 4  # three events, then the Timeout that says the queue is empty


def test_an_xid_storm_is_cut_at_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpu_xid_probe, "MAX_XID_EVENTS", 2)
    nvml = FakeNvml([FakeGpu()])
    evidence, errors = watch(nvml, lambda: [nvml.raise_xid(0, 13) for _ in range(5)])
    assert errors == [] and len(evidence.xid.events) == 2 and evidence.xid.truncated
    assert nvml.event_sets == {} and not nvml.initialised


def test_a_device_without_event_support_is_a_device_note() -> None:
    nvml = FakeNvml(two_gpus(unsupported={"nvmlDeviceRegisterEvents"}))

    def probe() -> None:
        nvml.raise_xid(0, 79)
        nvml.raise_xid(1, 79)  # not registered: NVML cannot tell us

    evidence, errors = watch(nvml, probe)
    assert errors == []
    assert evidence.xid.watched == [0] and [(e.gpu, e.xid) for e in evidence.xid.events] == [(0, 79)]
    assert evidence.devices[0].errors == []
    assert evidence.devices[1].errors == ["xid_events: Not Supported"]


def test_no_device_with_event_support_watches_nothing() -> None:
    nvml = FakeNvml([FakeGpu(unsupported={"nvmlDeviceRegisterEvents"})])
    evidence, errors = watch(nvml)
    assert errors == [] and evidence.xid.watched == [] and evidence.xid.reason == "no GPU supports XID events"
    assert nvml.event_sets == {} and nvml.waits == 0 and not nvml.initialised


def test_missing_bindings_watch_nothing_without_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    evidence = GpuEvidence()
    watcher = XidWatcher(evidence, Clock())
    watcher.start()
    watcher.stop()
    assert watcher.result() == []
    assert evidence.xid is not None and evidence.xid.watched == [] and evidence.xid.events == []
    assert "nvidia-ml-py" in (evidence.xid.reason or "")


def test_nvml_failing_to_start_is_an_unavailable_error() -> None:
    nvml = FakeNvml([FakeGpu()], init_error=pynvml.NVML_ERROR_UNKNOWN)
    evidence = GpuEvidence()
    watcher = XidWatcher(evidence, Clock(), nvml)
    watcher.start()
    (error,) = watcher.result()  # stops the watch too
    assert (error.source, error.action, error.kind, error.fatal) == ("gpu", "nvmlInit", "unavailable", False)
    assert evidence.xid.reason == error.message and "Unknown Error" in error.message


def test_gpu_lost_while_registering_is_no_watch_and_releases_nvml() -> None:
    nvml = FakeNvml(two_gpus(lost_on="nvmlDeviceRegisterEvents"))
    evidence, errors = watch(nvml, lambda: nvml.raise_xid(0, 79))
    (error,) = errors
    assert (error.action, error.kind) == ("watch XID events", "unavailable") and "GPU is lost" in error.message
    assert evidence.xid.watched == [] and evidence.xid.events == [] and evidence.xid.reason == error.message
    assert nvml.event_sets == {} and not nvml.initialised


def test_gpu_lost_while_reading_keeps_the_window_and_releases_nvml() -> None:
    nvml = FakeNvml([FakeGpu()])

    def probe() -> None:
        nvml.wait_error = pynvml.NVML_ERROR_GPU_IS_LOST

    evidence, errors = watch(nvml, probe)
    (error,) = errors
    assert (error.action, error.kind) == ("read XID events", "unavailable") and "GPU is lost" in error.message
    assert evidence.xid.watched == [0] and evidence.xid.reason == error.message
    assert evidence.xid.read_error == error.message and evidence.xid.gpu_lost
    assert nvml.event_sets == {} and not nvml.initialised
    # the reader's view of XID 79: LD508 must not read the empty watch as "no XID"
    result = gpu_xid_errors(evidence)
    assert isinstance(result, Fire) and result.severity is Severity.CRITICAL
    assert result.remediation.setting == "gpu_hardware" and "fallen off the bus" in result.summary


def test_another_read_failure_is_not_a_pass() -> None:
    nvml = FakeNvml([FakeGpu()])

    def probe() -> None:
        nvml.wait_error = pynvml.NVML_ERROR_UNKNOWN

    evidence, errors = watch(nvml, probe)
    (error,) = errors
    assert evidence.xid.read_error == error.message and not evidence.xid.gpu_lost
    result = gpu_xid_errors(evidence)
    assert isinstance(result, NotApplicable) and "Unknown Error" in result.message


def test_the_xid_watch_round_trips_through_the_bundle() -> None:
    nvml = FakeNvml(two_gpus(unsupported={"nvmlDeviceRegisterEvents"}))
    bundle = Bundle()
    bundle.gpu, _ = watch(nvml, lambda: nvml.raise_xid(0, 79))
    data = to_jsonable(bundle)
    assert data["gpu"]["xid"]["events"][0]["xid"] == 79
    assert to_jsonable(load(Bundle, data)) == data
    # typed: a damaged value names its path
    data["gpu"]["xid"]["events"][0]["xid"] = "79"
    with pytest.raises(TypeError, match=r"^gpu\.xid\.events\[0\]\.xid: expected int, got str"):
        load(Bundle, data)
    # a bundle written before the watch existed loads without one
    del data["gpu"]["xid"]
    assert load(Bundle, data).gpu.xid is None


# The collector starts the watch right before the stream probe and stops it right after.


def collect_with_fake_nvml(monkeypatch: pytest.MonkeyPatch, nvml: FakeNvml, probe: Any, engine: str) -> Bundle:
    monkeypatch.setitem(sys.modules, "pynvml", nvml)  # what `import pynvml` in the probe gets
    monkeypatch.setattr(stream_probe, "run_stream_probe", probe)
    config = CollectConfig(engine=engine, requests=1, warmup=0, host=False, metrics=False,
                           http=HttpOptions(timeout_s=5.0))
    return collect(config)


def test_collect_watches_xids_over_the_stream_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    nvml = FakeNvml(two_gpus())
    real_probe = stream_probe.run_stream_probe

    def probe(*args: Any, **kwargs: Any) -> Any:
        nvml.raise_xid(1, 79)  # the GPU falls off the bus while the probe runs
        return real_probe(*args, **kwargs)

    with SseServer() as server:
        bundle = collect_with_fake_nvml(monkeypatch, nvml, probe, server.base(n="4"))

    assert bundle.gpu is not None and bundle.gpu.available and not bundle.interrupted
    xid = bundle.gpu.xid
    assert xid is not None and xid.watched == [0, 1] and [(e.gpu, e.xid) for e in xid.events] == [(1, 79)]
    (trace,) = bundle.stream.requests
    assert trace.outcome == "ok"
    assert trace.t_sent is not None and trace.t_end is not None
    assert xid.start_t <= trace.t_sent and trace.t_end <= xid.end_t  # the window covers the probe
    assert bundle.errors_for("gpu") == []
    assert nvml.event_sets == {} and not nvml.initialised


def test_ctrl_c_during_the_probe_still_stops_the_watch(monkeypatch: pytest.MonkeyPatch) -> None:
    nvml = FakeNvml([FakeGpu()])

    def interrupted(*_args: Any, **_kwargs: Any) -> Any:
        nvml.raise_xid(0, 48)
        raise stream_probe.StreamInterrupted((StreamEvidence(), []))

    with SseServer() as server:
        bundle = collect_with_fake_nvml(monkeypatch, nvml, interrupted, server.base())

    assert bundle.interrupted
    assert [(e.gpu, e.xid) for e in bundle.gpu.xid.events] == [(0, 48)]
    assert bundle.gpu.xid.end_t is not None
    assert nvml.event_sets == {} and not nvml.initialised
