"""
What it detects:
    Nothing: it always raises, to prove the runner isolates a broken check.
Why it matters:
    One bad check must not take a diagnosis down.
Evidence:
    stream_stats.
Remediation:
    None.
Example:
    Any run.
"""

from __future__ import annotations

from doctor.checking.contract import Result, check
from doctor.derive.stream_stats import StreamStats
from doctor.model import SymptomClass


@check(code="TS002", name="sample-always-raises", symptom=SymptomClass.GENERAL, cause="errors")
def broken(stream_stats: StreamStats) -> Result:
    raise ZeroDivisionError("deliberately broken")
