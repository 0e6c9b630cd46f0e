"""
What it detects:
    Nothing; it needs GPU evidence, which the runner tests never provide.
Why it matters:
    Shows missing evidence as its own outcome.
Evidence:
    gpu.
Remediation:
    None.
Example:
    A run with --no-gpu.
"""

from __future__ import annotations

from doctor.checking.contract import Pass, Result, check
from doctor.evidence import GpuEvidence
from doctor.model import SymptomClass


@check(code="TS003", name="sample-needs-gpu", symptom=SymptomClass.GENERAL, cause="gpu-state")
def needs_gpu(gpu: GpuEvidence) -> Result:
    return Pass("has gpu")
