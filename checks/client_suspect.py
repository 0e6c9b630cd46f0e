"""The probe's own client may have distorted the timings.

What it detects:
The stream probe's self-check flagged the client: its event loop lagged, it was slow to write
its requests, or its process used a whole core while it measured (`stream.client.suspect`, with
the reasons it gave; a client sharded over worker processes is suspect when any worker was).
A busy client whose every read the kernel stamped (`stream.client.stamp_clock` "kernel", plain
HTTP on Linux) is not suspect for its lag or CPU: those delayed no stamp (they are the self-check's
notes); it still is when the loop read later than the gap between tokens (tokens read together
share the stamp of the last) or was slow to put its requests on the wire.

Why it matters:
A client that reads its socket late stamps tokens late and merges reads: TTFT grows, gaps
bunch up, and the report can blame the engine or the gateway for the client's own delay. The
other findings stand, but their numbers carry that error. It is a caveat about the
measurement, not a fault of the stack under diagnosis, so it is reported as info (the verdict
repeats it) and never fails a scheduled check on its own.

Evidence:
Stream probe client health: event-loop lag p99 and max, request send time p99, CPU percent max
and CPU count, the HTTP stack used, and the self-check's reasons; the processes that read the
streams (one, or each worker's self-check in `stream.client.shards`) and the run's concurrency.
host (psutil, a snapshot taken before the probe, absent with `--no-host`): the host's CPU percent
and its 1-minute load average against its logical CPUs.

Remediation:
One of two changes, the one that keeps what the run measures where it can.
More client processes (setting `client_workers`) when all three hold:
- streams to spread: the concurrency (slots; a Poisson run's cap) is at least twice the worker
  processes that read them (one when the client was not sharded), so each of twice the workers
  still reads a stream of its own;
- CPUs the client left idle: each of its processes is counted a whole CPU (a busy event loop
  takes one; CPU percent max says how close it came), and one more is the parent's, which keeps
  the schedule of a sharded client (docs/benchmarks.md: a worker without a core of its own is
  worse than one process). Suggested: twice the workers, at most the CPUs less the parent's one;
  it must be more than the workers now. The CPUs are the host's logical ones (psutil): in a
  container whose cpuset allows fewer, set no more workers than it allows;
- the host was not CPU-saturated: its CPU below ``host_percent`` and its load below its logical
  CPUs when the probe began (a host without that snapshot is taken as not saturated: the
  self-check alone cannot tell). On a saturated host more processes only compete for it.
Set it with `--client-workers N` on the command that made the run (`diagnose`, `collect`,
`watch`, `load`, `sweep`), or `client_workers = N` in the config file's `[probe]` (the flag wins).
This is the change for a diagnosis too: its concurrency is what the user chose to reproduce an
incident, and halving it changes what is measured.
Otherwise, less load on this client: run the probe from a less loaded host, or with half the
concurrency (`--concurrency` of `diagnose`, `collect`, `watch`, or `concurrency` in the config
file's `[probe]`; for `load` and `sweep`, which set their own concurrency, `--max-concurrency`),
then compare. At concurrency 1 there is nothing to halve: a less loaded host is the change.

Options:
host_percent: the host's CPU percent, before the probe, at which it counts as saturated (more
    client processes would only compete for it)

Example:
LD507 client-suspect: client event loop lagged 85 ms at p99 (max 240 ms), CPU up to 100 % of 8
cores, concurrency 64 over 1 client process -> llm-doctor diagnose --client-workers 2.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import host_saturated, host_values, rerun
from doctor.evidence import HostEvidence, RunRecord, StreamEvidence
from doctor.evidence.stream import ClientHealth
from doctor.model import Cause, EvidenceValue, Remediation, Severity, SymptomClass

#: The commands that take ``--client-workers`` (and read ``[probe] client_workers``).
SHARDING_COMMANDS = ("diagnose", "collect", "watch", "load", "sweep")
#: Those that take ``--concurrency``; ``load`` and ``sweep`` set their own and cap it with ``--max-concurrency``.
CONCURRENCY_COMMANDS = ("diagnose", "collect", "watch")
WHY = "A client that falls behind its socket stamps tokens late and merges reads, inflating TTFT and gaps."


@dataclass(frozen=True)
class Found:
    """The probe's client self-check, the concurrency over its worker processes, why the host was
    CPU-saturated ("" when it was not), the command that ran, whether a load scenario set the
    concurrency, and the remedy's choice: client worker processes to spread over (``spread``), else
    why not (``held``: ``saturated``, ``few-streams`` or ``no-cpus``)."""

    client: ClientHealth
    concurrency: int
    workers: int
    saturated: str
    command: str
    scenario: bool
    spread: int | None
    held: str


@check(code="LD507", name="client-suspect", symptom=SymptomClass.GENERAL, cause=Cause.CLIENT)
def client_suspect(
    stream: StreamEvidence,
    host: HostEvidence | None = None,
    run: RunRecord | None = None,
    *,
    host_percent: float = 90.0,
) -> Result:
    c = stream.client
    measured = c.loop_lag_p99_ms is not None or c.cpu_percent_max is not None
    if not measured and not c.suspect:
        return NotApplicable("the probe recorded no client self-check")
    if not c.suspect and c.stamp_clock == "kernel" and c.notes:
        return Pass(_kernel_stamped(c))
    if not c.suspect:
        return Pass(_kept_up(c))
    workers = max(1, len(c.shards))
    saturated = host_saturated(host, host_percent)
    spread, held = _spread(stream.shape.concurrency, workers, c.cpu_count or 0, saturated)
    found = Found(c, stream.shape.concurrency, workers, saturated, run.command if run is not None else "",
                  stream.shape.scenario is not None, spread, held)
    return Fire(
        felt=False,  # the probe's own machine, not the service users reach
        title="The probe's client may have distorted the timings",
        summary=_summary(found),
        remediation=_remediation(found),
        severity=Severity.INFO,
        evidence=_evidence(found) + (host_values(host) if host is not None else []),
    )


def _spread(concurrency: int, workers: int, cpus: int, saturated: str) -> tuple[int | None, str]:
    """(client worker processes to suggest, "") when more would help, else (None, why not): the host
    not ``saturated``, the streams filling twice the workers (else ``few-streams``), and the
    suggestion (twice the workers, at most ``cpus`` less the parent's one) more than the workers now
    (else ``no-cpus``)."""
    if saturated:
        return None, "saturated"
    if concurrency < 2 * workers:
        return None, "few-streams"
    suggested = min(2 * workers, cpus - 1)
    if suggested <= workers:
        return None, "no-cpus"
    return suggested, ""


def _kernel_stamped(c: ClientHealth) -> str:
    return (f"the client was busy ({'; '.join(c.notes)}), but the kernel stamped every read as it arrived: "
            f"the loop read {c.kernel_gap_p99_ms or 0:.1f} ms after it at p99, a delay in no token stamp")


def _kept_up(c: ClientHealth) -> str:
    return f"client event loop lag p99 {c.loop_lag_p99_ms or 0:.0f} ms; the client kept up"


def _processes(workers: int) -> str:
    return f"process{'es' if workers > 1 else ''}"


def _summary(found: Found) -> str:
    c, parts = found.client, []
    if c.loop_lag_p99_ms is not None:
        parts.append(
            f"client event loop lagged {c.loop_lag_p99_ms:.0f} ms at p99 (max {c.loop_lag_max_ms or 0:.0f} ms)"
        )
    if c.cpu_percent_max is not None:
        parts.append(
            f"CPU up to {c.cpu_percent_max:.0f} %" + (f" of {c.cpu_count} cores" if c.cpu_count else "")
        )
    parts.append(f"concurrency {found.concurrency} over {found.workers} client {_processes(found.workers)}")
    parts += c.reasons
    if found.saturated:
        parts.append(f"the host was CPU-saturated when the probe began ({found.saturated})")
    return "; ".join(parts)


def _evidence(found: Found) -> list[EvidenceValue]:
    c = found.client
    return [
        EvidenceValue("event loop lag p99", c.loop_lag_p99_ms, "ms", "stream: client self-check"),
        EvidenceValue("event loop lag max", c.loop_lag_max_ms, "ms", "stream: client self-check"),
        EvidenceValue("CPU percent max", c.cpu_percent_max, "%", "stream: client self-check"),
        EvidenceValue("CPU count", c.cpu_count, "", "stream: client self-check"),
        EvidenceValue("HTTP stack", c.transport, "", "stream: client self-check"),
        EvidenceValue("client processes", found.workers, "", "stream: client self-check (one per worker)"),
        EvidenceValue("concurrency", found.concurrency, "", "stream: probe shape"),
    ]


def _why_not(found: Found) -> str:
    """Why more client processes would not help."""
    if found.held == "saturated":
        return f"The host was CPU-saturated ({found.saturated}): more client processes would only compete for it."
    if found.held == "few-streams":
        return (f"Concurrency {found.concurrency} has too few streams to spread beyond {found.workers} client "
                f"{_processes(found.workers)}.")
    cpus = found.client.cpu_count or 0
    return (f"The host's {cpus} CPU(s) leave none for another client process (each takes one, and "
            "the parent of sharded ones one more)." if cpus else
            "The self-check did not record the host's CPUs to spread over.")


def _remediation(found: Found) -> Remediation:
    """More client processes where the streams, the idle CPUs and the host allow; else less load."""
    verify = rerun("the client self-check passes; compare the verdict with this run's")
    conc, command = found.concurrency, found.command
    if found.spread is not None:
        flag = f"llm-doctor {command} --client-workers" if command in SHARDING_COMMANDS else \
            f"--client-workers of llm-doctor {' / '.join(SHARDING_COMMANDS)}"
        return Remediation(
            setting="client_workers", suggested=f"{found.spread} (one event loop per CPU; one more CPU for the parent)",
            current=str(found.workers), where=f"{flag}, or client_workers in the config file's [probe]",
            why=WHY + f" Its {conc} streams can be spread over the CPUs it left idle, which keeps the concurrency "
                      "this run measured.",
            verify=verify)
    if found.scenario:  # a load run: its scenario sets the concurrency
        load = command if command in ("load", "sweep") else "load / sweep"
        where = f"llm-doctor {load} --max-concurrency, or the host running the probe"
    elif command == "demo":  # its scenario sets the concurrency; demo takes no --concurrency
        where = "the host running the probe (the demo's scenario sets its own concurrency)"
    elif command in CONCURRENCY_COMMANDS:
        where = f"llm-doctor {command} --concurrency (concurrency in the config file's [probe]), or the host running the probe"
    else:
        where = "llm-doctor --concurrency (concurrency in the config file's [probe]), or the host running the probe"
    suggested = "1 (nothing to halve: run from a less loaded host)" if conc <= 1 else \
        f"{conc // 2} (or run from a less loaded host)"
    return Remediation(setting="concurrency", suggested=suggested, current=str(conc), where=where,
                       why=f"{WHY} {_why_not(found)}", verify=verify)
