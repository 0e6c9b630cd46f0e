"""The GPU runs below its maximum clock because of a power or thermal limit.

What it detects:
GPU throttled: NVML reports a power or thermal clock-event ("throttle") reason on a device and,
when the clocks are known, its SM clock is below ``clock_ratio`` of its maximum.

Why it matters:
Decode speed follows the SM and memory clocks: a GPU held at 70 % of its clock gives about
70 % of the tokens per second, and every stream's inter-token latency rises by the same factor
with nothing in vLLM's configuration to blame. Idle, application-clock, display-clock and
sync-boost reasons are normal and ignored.

Evidence:
gpu (NVML): per device ``throttle_reasons``, ``sm_clock_mhz`` / ``sm_clock_max_mhz``,
temperature, power draw and limit. Log / metrics: which engine serves, so the text names it.

Remediation:
Thermal reasons -> ``gpu_cooling`` (airflow, fan curves, datacenter inlet temperature).
Software power cap -> ``gpu_power_limit`` (raise it back to the board's default with
``nvidia-smi -pl``). Hardware slowdown / power brake -> ``gpu_hardware`` (power supply, cabling,
the board itself: ask the provider to replace the node).

Options:
clock_ratio: SM clock / max clock below which a device with a harmful reason fires

Example:
GPU 0: SM clock 1,290 of 1,980 MHz (65 %), reasons sw_thermal_slowdown, 87 C -> gpu_cooling.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import rerun
from doctor.derive.engine import UNIDENTIFIED, EngineIdentity
from doctor.engines.names import display
from doctor.evidence import GpuDevice, GpuEvidence
from doctor.foundation.units import fmt_pct
from doctor.model import Cause, EvidenceValue, Remediation, Severity, SymptomClass

#: Clock-event reasons that slow a GPU under load (names as ``doctor.probes.gpu`` stores them).
THERMAL = ("sw_thermal_slowdown", "hw_thermal_slowdown")
POWER = ("sw_power_cap",)
HARDWARE = ("hw_slowdown", "hw_power_brake_slowdown")
HARMFUL = THERMAL + POWER + HARDWARE


@dataclass(frozen=True)
class Found:
    """The most throttled GPU (lowest SM clock ratio), its harmful clock-event reasons and what
    they are (``cause``: ``thermal``, ``hardware`` or ``power``), and how many GPUs of how many."""

    engine: str
    worst: GpuDevice
    reasons: tuple[str, ...]
    cause: str
    throttled: int
    devices: int


@check(code="LD206", name="gpu-throttled", symptom=SymptomClass.INTER_TOKEN, cause=Cause.GPU_STATE)
def gpu_throttled(
    gpu: GpuEvidence,
    engine: EngineIdentity = UNIDENTIFIED,
    *,
    clock_ratio: float = 0.9,
) -> Result:
    if not gpu.available:
        return NotApplicable(_no_nvml(gpu.reason))
    if not any(d.throttle_reasons or d.sm_clock_mhz for d in gpu.devices):
        return NotApplicable("NVML gave no clocks or clock-event reasons")
    throttled = [d for d in gpu.devices if _harmful(d) and _ratio(d) < clock_ratio]
    if not throttled:
        return Pass(_unthrottled(len(gpu.devices)))
    worst = min(throttled, key=_ratio)
    reasons = _harmful(worst)
    cause = "thermal" if set(reasons) & set(THERMAL) else "hardware" if set(reasons) & set(HARDWARE) else "power"
    found = Found(engine.id, worst, tuple(reasons), cause, len(throttled), len(gpu.devices))
    return Fire(
        felt=False,  # a GPU state: a slow decode shows as a TPOT witness
        title="The GPU is slowed by a power or thermal limit",
        summary=_summary(found),
        remediation=_remediation(found),
        severity=Severity.CRITICAL if cause in ("thermal", "hardware") else Severity.WARNING,
        evidence=_evidence(found),
    )


def _harmful(d: GpuDevice) -> list[str]:
    return [r for r in d.throttle_reasons if r in HARMFUL]


def _ratio(d: GpuDevice) -> float:
    """SM clock / max; 0 when unknown, so a harmful reason alone still counts."""
    if d.sm_clock_mhz and d.sm_clock_max_mhz:
        return d.sm_clock_mhz / d.sm_clock_max_mhz
    return 0.0


def _no_nvml(reason: str | None) -> str:
    return f"no NVML evidence ({reason or 'not collected'})"


def _unthrottled(devices: int) -> str:
    return f"{devices} GPU(s) without power or thermal clock limits"


def _summary(found: Found) -> str:
    worst = found.worst
    summary = f"GPU {worst.index}"
    if worst.sm_clock_mhz and worst.sm_clock_max_mhz:
        summary += f": SM clock {worst.sm_clock_mhz:,} of {worst.sm_clock_max_mhz:,} MHz ({fmt_pct(_ratio(worst))})"
    summary += f", reasons {', '.join(found.reasons)}"
    if worst.temperature_c is not None:
        summary += f", {worst.temperature_c:.0f} C"
    if found.throttled > 1:
        summary += f" ({found.throttled} of {found.devices} GPUs throttled)"
    return summary


def _evidence(found: Found) -> list[EvidenceValue]:
    worst = found.worst
    source = f"gpu: NVML, GPU {worst.index}"
    evidence = [EvidenceValue("clock-event reasons", ", ".join(found.reasons), "", source)]
    if worst.sm_clock_mhz and worst.sm_clock_max_mhz:
        evidence += [
            EvidenceValue("SM clock", worst.sm_clock_mhz, "MHz", source),
            EvidenceValue("SM clock max", worst.sm_clock_max_mhz, "MHz", source),
        ]
    if worst.temperature_c is not None:
        evidence.append(EvidenceValue("temperature", worst.temperature_c, "C", source))
    return evidence


def _remediation(found: Found) -> Remediation:
    """The serving engine is named only as what cannot help here."""
    d, engine = found.worst, display(found.engine)
    verify = rerun("no power or thermal clock-event reason and the SM clock near its maximum under load")
    if found.cause == "thermal":
        return Remediation(
            setting="gpu_cooling",
            suggested="improve cooling (airflow, fan curve, inlet temperature) until thermal slowdown stops",
            why=f"GPU {d.index} lowers its clocks to stay within its temperature limit; every token takes longer",
            verify=verify,
            current=f"{d.temperature_c:.0f} C" if d.temperature_c is not None else None,
            where=f"the host / datacenter (not {engine})",
        )
    if found.cause == "hardware":
        return Remediation(
            setting="gpu_hardware",
            suggested="check the power supply and cabling, or ask the provider for another node",
            why=f"GPU {d.index} reports a hardware slowdown (external power brake or HW protection)",
            verify=verify,
            where=f"the host hardware (not {engine})",
        )
    limit = f"{d.power_limit_w:.0f} W" if d.power_limit_w is not None else None
    return Remediation(
        setting="gpu_power_limit",
        suggested="raise it to the board's default (nvidia-smi -q -d POWER shows it; set with nvidia-smi -pl)",
        why=f"GPU {d.index} hits its software power cap and lowers its clocks",
        verify=verify,
        current=limit,
        where=f"nvidia-smi -pl on the host (not {engine})",
    )
