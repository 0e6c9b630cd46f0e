"""Requests pile up waiting for the engine.

What it detects:
More than `max_waiting` requests were waiting in vLLM's queue at some scrape of the window
(`vllm:num_requests_waiting`); with the engine running at least `high_running` requests at once,
the engine is saturated rather than briefly bursting (vllm-doctor's queue-pressure rule).

Why it matters:
Every waiting request adds its whole wait to its time to first token. A queue that builds
during a short probe is a queue production traffic meets all day.

Evidence:
Metrics window: `waiting` and `running` gauges (max over the scrapes), KV cache usage (max).
Startup log (or run record): `max_num_seqs`, to say whether the batch limit was reached.

Remediation:
Add capacity (setting `replicas`) or lower the offered concurrency. When running sat at
`max_num_seqs` with KV usage low, the batch limit is the queue's cause: see
requests-queued-before-prefill (LD101) for a `max_num_seqs` value.

Options:
max_waiting: requests waiting at some scrape above which it fires (vllm-doctor 0.6.0's default)
high_running: running requests at which the engine counts as saturated, which makes it a warning
    (vllm-doctor 0.6.0's default)

Example:
LD504 queue-pressure: up to 12 requests waiting while 8 ran (= max_num_seqs 8), KV usage <= 31 %
-> replicas: add capacity or lower offered concurrency.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import Setting, add_capacity, engine_setting, metric_read
from doctor.derive.log_facts import LogFacts
from doctor.derive.metrics_window import MetricsWindow
from doctor.evidence import RunRecord
from doctor.foundation.units import fmt_pct
from doctor.model import Cause, EvidenceValue, Remediation, Severity, SymptomClass


@dataclass(frozen=True)
class Found:
    """The waiting, running and KV usage peaks (with the metrics read) and the batch limit."""

    waiting: float
    running: float | None
    kv: float | None
    seqs: Setting | None
    waiting_metric: str
    running_metric: str
    kv_metric: str


@check(code="LD504", name="queue-pressure", symptom=SymptomClass.GENERAL, cause=Cause.QUEUE_LOAD)
def queue_pressure(
    metrics_window: MetricsWindow,
    log_facts: LogFacts | None = None,
    run: RunRecord | None = None,
    *,
    max_waiting: float = 5.0,
    high_running: float = 50.0,
) -> Result:
    w = metrics_window
    if w.waiting is None or w.waiting.max is None:
        return NotApplicable("the waiting gauge is not in /metrics")
    waiting = w.waiting.max
    running = w.running.max if w.running is not None else None
    if waiting <= max_waiting:
        return Pass(_few_waiting(waiting, max_waiting))
    found = Found(waiting, running, w.kv_usage.max if w.kv_usage is not None else None,
                  engine_setting("max_num_seqs", log_facts, run), metric_read(w, "waiting"), metric_read(w, "running"),
                  metric_read(w, "kv_usage"))
    saturated = running is not None and running >= high_running
    return Fire(
        title="Requests pile up waiting for the engine",
        summary=_summary(found),
        remediation=_remediation(found),
        severity=Severity.WARNING if saturated or waiting > 2 * max_waiting else Severity.INFO,
        evidence=_evidence(found),
    )


def _few_waiting(waiting: float, max_waiting: float) -> str:
    return f"at most {waiting:.0f} requests waiting (threshold {max_waiting:.0f})"


def _summary(found: Found) -> str:
    summary = f"up to {found.waiting:.0f} requests waiting"
    if found.running is not None:
        summary += f" while {found.running:.0f} ran"
        if found.seqs is not None and found.running >= found.seqs.value:
            summary += f" (= max_num_seqs {found.seqs.value})"
    if found.kv is not None:
        summary += f", KV usage <= {fmt_pct(found.kv)}"
    return summary


def _evidence(found: Found) -> list[EvidenceValue]:
    evidence = [EvidenceValue("waiting (max)", found.waiting, "requests", f"metrics: {found.waiting_metric}")]
    if found.running is not None:
        evidence.append(EvidenceValue("running (max)", found.running, "requests", f"metrics: {found.running_metric}"))
    if found.kv is not None:
        evidence.append(EvidenceValue("KV usage (max)", found.kv, "", f"metrics: {found.kv_metric}"))
    if found.seqs is not None:
        evidence.append(found.seqs.evidence("max_num_seqs"))
    return evidence


def _remediation(found: Found) -> Remediation:
    return add_capacity(
        why=(
            f"{found.waiting:.0f} requests waited for a slot: arrivals outpace what the engine admits. If running "
            "sat at max_num_seqs with the KV cache far from full, raising max_num_seqs is cheaper (LD101)."
        ),
        verify="waiting at 0 (or close) throughout the probe",
    )
