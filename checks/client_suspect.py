"""The probe's own client may have distorted the timings.

What it detects:
The stream probe's self-check flagged the client: its event loop lagged, it was slow to write
its requests, or the host's CPU was saturated while it measured (`stream.client.suspect`, with
the reasons it gave).

Why it matters:
A client that reads its socket late stamps tokens late and merges reads: TTFT grows, gaps
bunch up, and the report can blame the engine or the gateway for the client's own delay. The
other findings stand, but their numbers carry that error. It is a caveat about the
measurement, not a fault of the stack under diagnosis, so it is reported as info (the verdict
repeats it) and never fails a scheduled check on its own.

Evidence:
Stream probe client health: event-loop lag p99 and max, request send time p99, CPU percent max
and CPU count, the HTTP stack used, and the self-check's reasons.

Remediation:
Run the probe from a less loaded host, or with a lower `--concurrency` (setting `concurrency`,
suggested half the current value), then compare. A load run (`load`, `sweep`) is meant to carry
its concurrency, so where the host has CPUs its client did not use, the setting is
`client_workers` instead: one more worker process per busy one, up to the CPUs.

Example:
LD507 client-suspect: client event loop lagged 85 ms at p99 (max 240 ms), CPU up to 100 % of 2
cores -> run from a less loaded host or with --concurrency 4.
"""

from __future__ import annotations

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import rerun
from doctor.evidence import StreamEvidence
from doctor.model import Cause, EvidenceValue, Remediation, Severity, SymptomClass


@check(code="LD507", name="client-suspect", symptom=SymptomClass.GENERAL, cause=Cause.CLIENT)
def client_suspect(stream: StreamEvidence) -> Result:
    c = stream.client
    measured = c.loop_lag_p99_ms is not None or c.cpu_percent_max is not None
    if not measured and not c.suspect:
        return NotApplicable("the probe recorded no client self-check")
    if not c.suspect:
        return Pass(f"client event loop lag p99 {c.loop_lag_p99_ms or 0:.0f} ms; the client kept up")
    parts = []
    if c.loop_lag_p99_ms is not None:
        parts.append(
            f"client event loop lagged {c.loop_lag_p99_ms:.0f} ms at p99 (max {c.loop_lag_max_ms or 0:.0f} ms)"
        )
    if c.cpu_percent_max is not None:
        parts.append(
            f"CPU up to {c.cpu_percent_max:.0f} %" + (f" of {c.cpu_count} cores" if c.cpu_count else "")
        )
    parts += c.reasons
    return Fire(
        felt=False,  # the probe's own machine, not the service users reach
        title="The probe's client may have distorted the timings",
        summary="; ".join(parts),
        remediation=_remediation(stream),
        severity=Severity.INFO,
        evidence=[
            EvidenceValue("event loop lag p99", c.loop_lag_p99_ms, "ms", "stream: client self-check"),
            EvidenceValue("event loop lag max", c.loop_lag_max_ms, "ms", "stream: client self-check"),
            EvidenceValue("CPU percent max", c.cpu_percent_max, "%", "stream: client self-check"),
            EvidenceValue("CPU count", c.cpu_count, "", "stream: client self-check"),
            EvidenceValue("HTTP stack", c.transport, "", "stream: client self-check"),
        ],
    )


def _remediation(stream: StreamEvidence) -> Remediation:
    """Less load from this client, or, for a load run on a host with CPUs to spare, more client processes."""
    why = "A client that falls behind its socket stamps tokens late and merges reads, inflating TTFT and gaps."
    verify = rerun("the client self-check passes; compare the verdict with this run's")
    workers = max(1, len(stream.client.shards))
    cpus = stream.client.cpu_count or 0
    if stream.shape.scenario is not None and cpus > workers:
        return Remediation(
            setting="client_workers", suggested=f"{min(cpus, 2 * workers)} (one event loop per CPU)", current=str(workers),
            where="llm-doctor load / sweep --client-workers",
            why=why + " A load run must carry its concurrency: spread its streams over the CPUs it left idle.",
            verify=verify)
    conc = stream.shape.concurrency
    return Remediation(
        setting="concurrency", suggested=f"{max(1, conc // 2)} (or run from a less loaded host)", current=str(conc),
        where="llm-doctor --concurrency / the host running the probe", why=why, verify=verify)
