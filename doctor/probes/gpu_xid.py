"""The XID watch: the GPU faults NVML reported while the stream probe ran.

XID errors (the driver's numbered reports of GPU faults: 79 "fallen off the bus", 48 double-bit
ECC...) exist in NVML only as events delivered to a listener registered before they happen, never
as a count of past ones, so unlike the snapshot (``doctor.probes.gpu``) this is a listener with a
start and a stop around the probe; it completes the snapshot's ``GpuEvidence.xid``.
"""

from __future__ import annotations

import contextlib
from functools import partial
from types import ModuleType
from typing import Any

from doctor.evidence import EvidenceError, GpuEvidence
from doctor.evidence.machine import XID_NOTE_PREFIX, XidEvent, XidWatch
from doctor.foundation.clock import Clock
from doctor.probes.nvml import FIELD_ERRORS, SOURCE, device_index, optional, start_nvml

#: How many XID events one watch reads: an XID storm (one XID 13 per faulting kernel launch)
#: must not keep the collector reading; the first ones name the fault.
MAX_XID_EVENTS = 1000


class XidWatcher:
    """Listens for critical XID events on every GPU while the stream probe runs.

    NVML queues an event in each event set registered for it until the set is read, so
    ``start()`` registers every device and ``stop()`` reads the queue without waiting: no thread
    runs in between, and Ctrl-C needs nothing but ``result()`` (which stops a watch still
    running). The price is the time: an event carries none, so each is stamped when read; all
    that is known is that it happened inside the window. Nothing here raises: NVML missing or
    failing becomes ``XidWatch.reason`` and, when it is a failure, an ``EvidenceError``.
    """

    def __init__(self, gpu: GpuEvidence, clock: Clock, nvml: ModuleType | Any | None = None) -> None:
        self.gpu = gpu  # the snapshot's evidence, which ``result()`` completes
        self.clock = clock
        self._nvml_given = nvml
        self._nvml: Any = None  # the started module while the watch holds NVML
        self._set: Any = None
        self._watch = XidWatch()
        self._notes: dict[int, str] = {}  # device index -> why it cannot be watched
        self._errors: list[EvidenceError] = []
        self._stopped = False

    def start(self) -> None:
        """Start NVML and register every device for critical XID events."""
        self._watch.start_t, self._watch.start_wall = self._stamp()
        self._nvml, self._watch.reason, self._errors = start_nvml(self._nvml_given)
        nvml = self._nvml
        if nvml is None:
            return
        try:
            self._set = nvml.nvmlEventSetCreate()
            for index in range(nvml.nvmlDeviceGetCount()):
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
                try:
                    nvml.nvmlDeviceRegisterEvents(handle, nvml.nvmlEventTypeXidCriticalError, self._set)
                except nvml.NVMLError as exc:
                    if type(exc).__name__ not in FIELD_ERRORS:
                        raise
                    self._notes[index] = f"{XID_NOTE_PREFIX}{exc}"
                else:
                    self._watch.watched.append(index)
        except nvml.NVMLError as exc:  # NVML itself is unusable (GPU lost, driver gone): no watch at all
            self._watch.watched = []
            self._fail("watch XID events", f"NVML could not watch for XID events: {exc}")
        if not self._watch.watched:
            self._watch.reason = self._watch.reason or "no GPU supports XID events"
            self._release()

    def stop(self) -> None:
        """Read the events queued since ``start()`` and release NVML; a second call does nothing."""
        if self._stopped:
            return
        self._stopped = True
        self._watch.end_t, self._watch.end_wall = self._stamp()
        try:
            if self._set is not None:
                self._drain(self._nvml)
        finally:
            self._release()

    def result(self) -> list[EvidenceError]:
        """Stop the watch if it still runs, record it in ``gpu.xid`` and its device notes; the errors."""
        self.stop()
        self.gpu.xid = self._watch
        for device in self.gpu.devices:
            if device.index in self._notes:
                device.errors.append(self._notes[device.index])
        return self._errors

    def _drain(self, nvml: Any) -> None:
        """Read queued events until NVML answers Timeout (the queue is empty)."""
        # nvmlEventSetWait_v2 is the name since NVML 10; older bindings have only the first one.
        wait = getattr(nvml, "nvmlEventSetWait_v2", None) or nvml.nvmlEventSetWait
        while True:
            try:
                data = wait(self._set, 0)  # 0 ms: only what is already queued
            except nvml.NVMLError as exc:
                if type(exc).__name__ != "NVMLError_Timeout":
                    self._watch.read_error = f"NVML failed while reading XID events: {exc}"
                    self._watch.gpu_lost = type(exc).__name__ == "NVMLError_GpuIsLost"
                    self._fail("read XID events", self._watch.read_error)
                return
            if len(self._watch.events) == MAX_XID_EVENTS:
                self._watch.truncated = True
                return
            seen_t, seen_wall = self._stamp()
            gpu = optional(nvml, partial(device_index, nvml, data.device))
            self._watch.events.append(XidEvent(gpu=gpu, xid=int(data.eventData), seen_t=seen_t, seen_wall=seen_wall))

    def _release(self) -> None:
        nvml, self._nvml = self._nvml, None
        if nvml is None:
            return
        if self._set is not None:
            with contextlib.suppress(nvml.NVMLError):
                nvml.nvmlEventSetFree(self._set)
            self._set = None
        with contextlib.suppress(nvml.NVMLError):
            nvml.nvmlShutdown()

    def _fail(self, action: str, message: str) -> None:
        self._watch.reason = message
        self._errors.append(EvidenceError(SOURCE, "nvml", action, "unavailable", message))

    def _stamp(self) -> tuple[float, float]:
        t = self.clock.now()
        return t, self.clock.t0_wall + t
