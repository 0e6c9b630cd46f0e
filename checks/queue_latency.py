"""Requests spend long in vLLM's queue before their prefill starts.

What it detects:
The server-side queue time histogram (`vllm:request_queue_time_seconds`) over the window has
its p90 bucket bound at or above `max_queue_p90_s` (vllm-doctor's queue-latency rule reads the
p95 at 1 s; p90 is the nearest bound this view keeps).

Why it matters:
Queue time is time to first token the user waits with nothing to show, and it is invisible in
the running / waiting gauges when the queue drains between scrapes.

Evidence:
Metrics window: queue-time histogram delta (p90 bucket bound, mean, count), waiting gauge (max).
Startup log / run record: the KV cache size and gpu_memory_utilization; stream: tokens per request.

Remediation:
Add capacity (setting `replicas`) or lower the offered concurrency; when the batch limit rather
than the GPU is full, requests-queued-before-prefill (LD101) suggests a `max_num_seqs`. When the
KV cache (startup log) holds fewer than two requests of the size served, grow it instead
(`gpu_memory_utilization`): replicas would each queue the same way.

Options:
max_queue_p90_s: queue time p90 (its bucket bound) at or above which it fires (vllm-doctor's default
    threshold)

Example:
LD505 queue-latency: queue time p90 <= 2.5 s (mean 1.42 s, n=40 requests), waiting up to 9 ->
replicas: add capacity.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import metric_read, queue_remediation
from doctor.derive.engine import UNIDENTIFIED, EngineIdentity
from doctor.derive.log_facts import LogFacts
from doctor.derive.metrics_window import MetricsWindow
from doctor.evidence import RunRecord, StreamEvidence
from doctor.foundation.units import fmt_seconds
from doctor.model import Cause, EvidenceValue, Remediation, Severity, SymptomClass


@dataclass(frozen=True)
class Found:
    """The queue-time histogram's p90 bucket bound (else its mean), mean and count, the metric it was
    read from, and the waiting gauge's peak."""

    engine: str
    bound: float
    mean: float | None
    count: float
    metric: str
    waiting: float | None
    waiting_metric: str


@check(code="LD505", name="queue-latency", symptom=SymptomClass.GENERAL, cause=Cause.QUEUE_LOAD)
def queue_latency(
    metrics_window: MetricsWindow,
    log_facts: LogFacts | None = None,
    run: RunRecord | None = None,
    stream: StreamEvidence | None = None,
    engine: EngineIdentity = UNIDENTIFIED,
    *,
    max_queue_p90_s: float = 1.0,
) -> Result:
    q = metrics_window.queue
    if q is None or not q.count:
        return NotApplicable("no queue-time histogram delta in the window")
    bound = q.p90_le if q.p90_le is not None else q.mean
    if bound is None:
        return NotApplicable("the queue-time histogram has no finite bucket to read a p90 from")
    found = Found(engine.id, bound, q.mean, q.count, q.metric or metric_read(metrics_window, "queue"),
                  metrics_window.waiting.max if metrics_window.waiting is not None else None,
                  metric_read(metrics_window, "waiting"))
    if bound < max_queue_p90_s:
        return Pass(_short_queue(found))
    return Fire(
        title="Requests wait long in the queue",
        summary=_summary(found),
        remediation=_remediation(found, max_queue_p90_s, log_facts, run, stream),
        severity=Severity.WARNING,
        evidence=_evidence(found),
    )


def _short_queue(found: Found) -> str:
    return f"queue time p90 <= {fmt_seconds(found.bound)} (n={found.count:.0f} requests)"


def _summary(found: Found) -> str:
    summary = (f"queue time p90 <= {fmt_seconds(found.bound)} (mean {fmt_seconds(found.mean or 0.0)}, "
               f"n={found.count:.0f} requests)")
    if found.waiting is not None:
        summary += f", waiting up to {found.waiting:.0f}"
    return summary


def _evidence(found: Found) -> list[EvidenceValue]:
    evidence = [
        EvidenceValue("queue time p90 (bucket bound)", found.bound, "s", f"metrics: {found.metric} delta"),
        EvidenceValue("queue time mean", found.mean, "s", f"metrics: {found.metric} sum / count"),
        EvidenceValue("requests in the histogram", found.count, "requests", "metrics: histogram count delta"),
    ]
    if found.waiting is not None:
        evidence.append(EvidenceValue("waiting (max)", found.waiting, "requests", f"metrics: {found.waiting_metric}"))
    return evidence


def _remediation(found: Found, max_queue_p90_s: float, log_facts: LogFacts | None, run: RunRecord | None,
                 stream: StreamEvidence | None) -> Remediation:
    return queue_remediation(
        (f"One request in ten waited {fmt_seconds(found.bound)} or more before its prefill started. If the batch "
         "limit rather than the KV cache is full, raising max_num_seqs is cheaper (LD101)."),
        f"queue time p90 below {fmt_seconds(max_queue_p90_s)}", log_facts, run, stream, found.engine,
    )
