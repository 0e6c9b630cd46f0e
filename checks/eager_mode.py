"""vLLM runs in eager mode: CUDA graphs are off.

What it detects:
Eager mode: the engine was started with ``enforce_eager`` (``--enforce-eager``), so decode
steps launch every kernel from Python instead of replaying captured CUDA graphs.

Why it matters:
At small and medium batch sizes a decode step is short enough that kernel-launch overhead is a
large part of it; CUDA graphs remove most of that, so eager mode makes every token slower. It
is a trade-off, not a bug: eager mode starts faster and saves the graphs' memory (more KV
cache), and is sometimes needed to work around a driver or model issue. Hence: info.

Evidence:
Startup log (``enforce_eager`` in the engine config or ``non-default args``), else the run
record's engine_config.

Remediation:
Remove ``--enforce-eager`` (``enforce_eager`` false) unless it was set to work around a
problem or to save memory; compare TPOT before and after.

Example:
enforce_eager = True (log line 12) -> remove --enforce-eager; expect lower TPOT at small batches.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import Setting, engine_flag, engine_setting, rerun
from doctor.derive.engine import UNIDENTIFIED, EngineIdentity
from doctor.derive.log_facts import LogFacts
from doctor.evidence import RunRecord
from doctor.model import Cause, Remediation, Severity, SymptomClass


@dataclass(frozen=True)
class Found:
    """``enforce_eager`` as the engine runs it, and where it was read."""

    eager: Setting


@check(code="LD204", name="eager-mode", symptom=SymptomClass.INTER_TOKEN, cause=Cause.DECODE)
def eager_mode(run: RunRecord, log_facts: LogFacts | None = None, engine: EngineIdentity = UNIDENTIFIED) -> Result:
    eager = engine_setting("enforce_eager", log_facts, run)
    if eager is None:
        return NotApplicable("enforce_eager unknown (no startup log with the engine config)")
    found = Found(eager)
    if not eager.value:
        return Pass(_graphs_on(found))
    return Fire(
        felt=False,  # a configuration: a slow decode shows as a TPOT witness
        title="CUDA graphs are off (enforce_eager)",
        summary=_summary(found),
        remediation=Remediation(
            setting="enforce_eager",
            suggested="false (remove --enforce-eager) unless it works around a problem or saves needed memory",
            why=("CUDA graphs replay a captured step and remove most kernel-launch overhead, which is a large part "
                 "of a decode step at small batch sizes; they cost some GPU memory and startup time"),
            verify=rerun("TPOT to fall, most at low concurrency"),
            current="true",
            where=engine_flag(engine.id, "enforce_eager"),
        ),
        severity=Severity.INFO,
        evidence=[eager.evidence("enforce_eager")],
    )


def _graphs_on(found: Found) -> str:
    return f"CUDA graphs on (enforce_eager = False, {found.eager.source})"


def _summary(found: Found) -> str:
    return f"enforce_eager = True ({found.eager.source}): every decode step launches its kernels one by one"
