"""Starting NVML and asking it one question, shared by the GPU snapshot (``doctor.probes.gpu``)
and the XID watch (``doctor.probes.gpu_xid``).

Both must tell "no NVIDIA GPU here" (a reason, no error: the doctor often runs on a machine other
than the engine's) from "NVML failed" (an error), and a device that cannot answer one question
(``FIELD_ERRORS``) from NVML itself being unusable; that mapping lives here once.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any, TypeVar

from doctor.evidence import EvidenceError

SOURCE = "gpu"
T = TypeVar("T")

#: Errors that mean "this device cannot answer this question"; any other NVML error means NVML
#: itself is unusable (GPU lost, driver gone) and the evidence is marked not available.
FIELD_ERRORS = ("NVMLError_NotSupported", "NVMLError_NoPermission", "NVMLError_FunctionNotFound", "NVMLError_NotFound")
#: Init errors that only say "no NVIDIA GPU here": no need to bother the user with an error.
_ABSENT = ("NVMLError_LibraryNotFound", "NVMLError_DriverNotLoaded")


def start_nvml(nvml: ModuleType | Any | None) -> tuple[Any | None, str | None, list[EvidenceError]]:
    """Import pynvml (unless given) and ``nvmlInit``: ``(module, None, [])``, or ``(None, reason, errors)``.

    No bindings, no library or no driver only say "no NVIDIA GPU here": a reason, no error.
    """
    if nvml is None:
        try:
            import pynvml
        except ImportError:
            return None, "the NVML bindings (nvidia-ml-py, module pynvml) are not installed", []
        nvml = pynvml
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        reason = f"NVML did not start: {exc}"
        errors = [] if type(exc).__name__ in _ABSENT else [EvidenceError(SOURCE, "nvml", "nvmlInit", "unavailable", reason)]
        return None, reason, errors
    return nvml, None, []


def optional(nvml: Any, fn: Callable[[], T]) -> T | None:
    """A query whose failure is not worth a note (version strings, other containers' process names)."""
    try:
        return fn()
    except nvml.NVMLError:
        return None


def device_index(nvml: Any, handle: Any) -> int:
    """The index NVML gives a device handle (as ``nvidia-smi`` numbers it)."""
    return int(nvml.nvmlDeviceGetIndex(handle))


def text(value: str | bytes) -> str:
    """An NVML string as text: older pynvml bindings return bytes."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value
