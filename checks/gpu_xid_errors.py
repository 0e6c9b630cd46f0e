"""The GPU driver reported XID errors while the probe ran.

What it detects:
GPU XID errors: NVML delivered one or more critical XID events (the driver's numbered reports of
a GPU fault) on a watched GPU during the probe window. 79 (fallen off the bus), 48 (double-bit
ECC), 95 (uncontained ECC) and 64 (row-remapping failure) are critical; 94 (contained ECC), 63
(row remapping / page retirement recorded), the application-class 13, 31 and 43, and any other
XID are warnings. NVML answering "GPU is lost" while the events are read is critical too: that is
how a GPU that has fallen off the bus shows to the reader.

Why it matters:
An XID is a fault, not a slowdown: the process that caused or met it loses its CUDA context, so
vLLM's engine dies or its requests fail, and what users feel is errors and stalls rather than a
slower decode. A hardware XID (79, 48, 95, 64) leaves the GPU unusable until it is reset or
replaced: no vLLM setting helps. The application class (13 graphics engine exception, 31 memory
page fault / illegal address, 43 GPU stopped processing, usually after 13 or 31) is nearly
always a bug in a CUDA kernel, vLLM, PyTorch or the driver, and vLLM's log shows it as "CUDA
error: an illegal memory access".

Evidence:
gpu (NVML): ``xid``, the XID watch over the probe window: the devices watched, the window on the
run's clock, every event (XID number, GPU index), and whether the watch stopped reading: cut
at its cap, or NVML failing mid-read (``read_error``, ``gpu_lost``). A failed read with no event
read proves nothing, so the check is not applicable rather than passing. NVML
keeps no history: XIDs from before the probe are only in the driver's ``NVRM: Xid`` kernel log
lines (``dmesg`` / ``journalctl -k``). Log / metrics: which engine serves, so the text names it.

Remediation:
The most severe XID decides. Hardware XIDs -> ``gpu_hardware``: drain the node, reset the GPU
(``nvidia-smi -r`` or a reboot), or have the provider replace it. 94 / 63 -> ``gpu_hardware``
(warning): schedule a reset; watch for repeats. 13 / 31 / 43 -> ``software_stack``: find "CUDA
error: an illegal memory access" in the vLLM log and upgrade the driver, vLLM and PyTorch. Any
other XID -> ``gpu_hardware`` (warning): look it up in NVIDIA's XID catalogue.

Example:
XID 79 (GPU has fallen off the bus) on GPU 0 x1 during the 12.3 s probe window (GPUs 0, 1
watched) -> gpu_hardware: drain the node and have the GPU reset or replaced.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import rerun
from doctor.derive.engine import UNIDENTIFIED, EngineIdentity
from doctor.engines.names import display
from doctor.evidence import GpuEvidence, XidWatch
from doctor.foundation.units import fmt_seconds
from doctor.model import Cause, EvidenceValue, Remediation, Severity, SymptomClass

XID_CATALOGUE = "https://docs.nvidia.com/deploy/xid-errors/"
KERNEL_LOG = "the driver's `NVRM: Xid` kernel log lines (`dmesg` / `journalctl -k`)"


@dataclass(frozen=True)
class XidClass:
    """What a group of XIDs means for the node and the one thing to do about it; ``suggested``
    and ``where`` name the serving engine as ``{engine}``."""

    rank: int  # which class decides when several occur: the highest
    severity: Severity
    setting: str
    suggested: str
    where: str


HARDWARE = XidClass(
    4, Severity.CRITICAL, "gpu_hardware",
    "drain the node, reset the GPU (nvidia-smi -r or a reboot), or have the provider replace it",
    "the host hardware (not {engine})",
)
ECC = XidClass(
    3, Severity.WARNING, "gpu_hardware",
    "schedule a GPU reset (drain the node first) and watch for repeats; replace the GPU if they recur",
    "the host hardware (not {engine})",
)
APPLICATION = XidClass(
    2, Severity.WARNING, "software_stack",
    "look for \"CUDA error: an illegal memory access\" in {engine}'s log; upgrade the NVIDIA driver, {engine} and PyTorch",
    "the software stack: NVIDIA driver, {engine}, PyTorch / CUDA kernels",
)
OTHER = XidClass(
    1, Severity.WARNING, "gpu_hardware",
    f"look the XID up in NVIDIA's XID catalogue ({XID_CATALOGUE}) and follow its action",
    "the host (driver or hardware, per the catalogue)",
)

#: Known XIDs: their meaning and class (NVIDIA's XID catalogue).
XIDS: dict[int, tuple[str, XidClass]] = {
    79: ("GPU has fallen off the bus: PCIe or power", HARDWARE),
    48: ("double-bit ECC error: reset needed", HARDWARE),
    95: ("uncontained ECC error: every process on the GPU affected, reset needed", HARDWARE),
    64: ("row-remapping failure: replace the GPU", HARDWARE),
    94: ("contained ECC error: only the faulting process was killed", ECC),
    63: ("row remapping / page retirement recorded", ECC),
    13: ("graphics engine exception", APPLICATION),
    31: ("GPU memory page fault / illegal address", APPLICATION),
    43: ("GPU stopped processing, usually after 13 or 31", APPLICATION),
}


@dataclass(frozen=True)
class Found:
    """What the XID watch saw: the GPUs it watched and for how long, the events counted by (XID,
    GPU) most severe first, the class that decides, and whether NVML lost the GPU or stopped reading."""

    engine: str
    watched: tuple[int, ...]
    window: float | None
    start_t: float | None
    end_t: float | None
    counts: tuple[tuple[tuple[int, int | None], int], ...]
    decisive: XidClass
    lost: bool
    events: int
    truncated: bool
    read_error: str | None


# LD208 until the code's hundreds digit became its symptom class: kept, so `--select LD208` still works
@check(code="LD508", name="gpu-xid-errors", symptom=SymptomClass.GENERAL, cause=Cause.ERRORS,
       aliases=("LD208", "xid", "xid-errors"))
def gpu_xid_errors(gpu: GpuEvidence, engine: EngineIdentity = UNIDENTIFIED) -> Result:
    watch = gpu.xid
    if watch is None:
        return NotApplicable(_no_watch(gpu.reason if not gpu.available else None))
    if not watch.watched:
        return NotApplicable(_nothing_watched(watch.reason))
    counts = Counter((e.xid, e.gpu) for e in watch.events)
    found = Found(
        engine=engine.id,
        watched=tuple(watch.watched),
        window=_window(watch),
        start_t=watch.start_t,
        end_t=watch.end_t,
        counts=tuple(sorted(counts.items(), key=_order)),
        decisive=HARDWARE if watch.gpu_lost else max((_class(xid) for xid, _ in counts), key=lambda c: c.rank,
                                                     default=OTHER),
        lost=watch.gpu_lost,
        events=len(watch.events),
        truncated=watch.truncated,
        read_error=watch.read_error,
    )
    if watch.gpu_lost:
        return Fire(
            title="NVML lost the GPU while reading XID events",
            summary=_lost_summary(found),
            remediation=_lost_remediation(found),
            severity=HARDWARE.severity,
            evidence=_lost_evidence(found),
        )
    if not watch.events and watch.read_error:
        return NotApplicable(_unread(found))
    if not watch.events:
        return Pass(_quiet(found))
    return Fire(
        title="The GPU driver reported XID errors during the probe",
        summary=_summary(found),
        remediation=_remediation(found),
        severity=found.decisive.severity,
        evidence=_evidence(found),
    )


def _class(xid: int) -> XidClass:
    return XIDS[xid][1] if xid in XIDS else OTHER


def _order(item: tuple[tuple[int, int | None], int]) -> tuple[int, int, int]:
    """Most severe class first, then XID number and GPU (an unidentified GPU last)."""
    (xid, index), _ = item
    return (-_class(xid).rank, xid, index if index is not None else 1 << 30)


def _window(watch: XidWatch) -> float | None:
    if watch.start_t is None or watch.end_t is None:
        return None
    return max(watch.end_t - watch.start_t, 0.0)


def _meaning(xid: int) -> str:
    return XIDS[xid][0] if xid in XIDS else "see NVIDIA's XID catalogue"


def _gpu(index: int | None) -> str:
    return f"GPU {index}" if index is not None else "an unidentified GPU"


def _span(window: float | None) -> str:
    return f" window of {fmt_seconds(window)}" if window is not None else ""


def _watched(found: Found) -> str:
    return ", ".join(str(i) for i in found.watched)


def _listed(found: Found) -> str:
    return "; ".join(f"XID {xid} ({_meaning(xid)}) on {_gpu(index)} x{n}" for (xid, index), n in found.counts)


def _no_watch(nvml_reason: str | None) -> str:
    why = f"no NVML: {nvml_reason}" if nvml_reason else "it runs only around a stream probe"
    return f"no XID watch ran ({why})"


def _nothing_watched(reason: str | None) -> str:
    return f"no GPU was watched for XID events ({reason or 'no reason recorded'})"


def _unread(found: Found) -> str:
    return (f"the XID events of GPUs {_watched(found)} could not be read ({found.read_error}), so an "
            f"empty watch proves nothing; look in {KERNEL_LOG}")


def _quiet(found: Found) -> str:
    return (f"no XID error on GPUs {_watched(found)} during the probe{_span(found.window)}; NVML keeps no history, "
            f"so earlier XIDs are only in {KERNEL_LOG}")


def _event_evidence(found: Found) -> list[EvidenceValue]:
    source = f"gpu: NVML XID watch, GPUs {_watched(found)}"
    return [EvidenceValue(f"XID {xid} on {_gpu(index)}", n, "events", source) for (xid, index), n in found.counts]


def _summary(found: Found) -> str:
    summary = f"{_listed(found)} during the probe{_span(found.window)} (GPUs {_watched(found)} watched)"
    if found.truncated:
        summary += f"; the watch stopped reading after {found.events} events"
    elif found.read_error:
        summary += f"; the watch stopped reading after {found.events} events ({found.read_error})"
    return summary


def _evidence(found: Found) -> list[EvidenceValue]:
    evidence = _event_evidence(found)
    if found.window is not None:
        evidence.append(EvidenceValue("XID watch window", round(found.window, 3), "s",
                                      f"gpu: NVML XID watch, run clock {found.start_t:.1f}-{found.end_t:.1f} s"))
    return evidence


def _remediation(found: Found) -> Remediation:
    named, decisive = display(found.engine), found.decisive
    return Remediation(
        setting=decisive.setting,
        suggested=decisive.suggested.format(engine=named),
        why=_why(found),
        verify=rerun(f"no XID event during the probe, and none new in {KERNEL_LOG}"),
        where=decisive.where.format(engine=named),
    )


def _why(found: Found) -> str:
    decisive, engine = found.decisive, display(found.engine)
    xids = sorted({xid for (xid, _), _n in found.counts if _class(xid) is decisive})
    named = ", ".join(f"XID {x} ({_meaning(x)})" for x in xids)
    if decisive is HARDWARE:
        return f"{named}: the GPU is unusable until it is reset or replaced; no setting of {engine} helps"
    if decisive is ECC:
        return f"{named}: the GPU's memory is degrading; a reset retires or remaps the bad rows"
    if decisive is APPLICATION:
        return f"{named}: a CUDA kernel faulted, which is nearly always a bug of {engine}, PyTorch or the driver, not hardware"
    return f"{named}: not one this check knows; NVIDIA's catalogue gives its cause and action"


def _lost_summary(found: Found) -> str:
    """NVML lost the GPU mid-read: the reader's view of XID 79, whatever events came before it."""
    summary = (f"NVML lost the GPU while reading XID events: it has likely fallen off the bus "
               f"(GPUs {_watched(found)} watched during the probe{_span(found.window)})")
    if read := _listed(found):
        summary += f"; read before it: {read}"
    return summary


def _lost_evidence(found: Found) -> list[EvidenceValue]:
    source = f"gpu: NVML XID watch, GPUs {_watched(found)}"
    return [EvidenceValue("XID read error", found.read_error, "", source), *_event_evidence(found)]


def _lost_remediation(found: Found) -> Remediation:
    engine = display(found.engine)
    return Remediation(
        setting=HARDWARE.setting,
        suggested=HARDWARE.suggested,
        why=("NVML answered 'GPU is lost' (the reader's view of XID 79, fallen off the bus): the GPU is "
             f"unusable until it is reset or replaced; no setting of {engine} helps. The XID itself is in {KERNEL_LOG}"),
        verify=rerun(f"nvidia-smi to list the GPU again, no XID event during the probe, and none new in {KERNEL_LOG}"),
        where=HARDWARE.where.format(engine=engine),
    )
