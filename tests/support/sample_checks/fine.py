"""
What it detects:
    Nothing; it fires when any path has a successful request.
Why it matters:
    It lets the runner tests see a finding next to a broken check.
Evidence:
    stream_stats.
Remediation:
    None.
Example:
    A run with one successful request.
"""

from __future__ import annotations

from doctor.checking.contract import Fire, Pass, Result, check
from doctor.derive.stream_stats import StreamStats
from doctor.model import Remediation, SymptomClass


@check(code="TS001", name="sample-fires-on-success", symptom=SymptomClass.GENERAL, cause="errors")
def fine(stream_stats: StreamStats, *, min_ok: int = 1) -> Result:
    ok = sum(p.n_ok for p in stream_stats.paths.values())
    if ok >= min_ok:
        return Fire(title="ok", summary=f"{ok} ok", remediation=Remediation("x", "y", "z", "v"))
    return Pass("none ok")
