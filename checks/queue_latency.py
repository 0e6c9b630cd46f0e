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

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import metric_read, queue_remediation
from doctor.derive.engine import UNIDENTIFIED, EngineIdentity
from doctor.derive.log_facts import LogFacts
from doctor.derive.metrics_window import MetricsWindow
from doctor.evidence import RunRecord, StreamEvidence
from doctor.foundation.units import fmt_seconds
from doctor.model import Cause, EvidenceValue, Severity, SymptomClass


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
    if bound < max_queue_p90_s:
        return Pass(f"queue time p90 <= {fmt_seconds(bound)} (n={q.count:.0f} requests)")
    waiting = metrics_window.waiting.max if metrics_window.waiting is not None else None
    summary = f"queue time p90 <= {fmt_seconds(bound)} (mean {fmt_seconds(q.mean or 0.0)}, n={q.count:.0f} requests)"
    if waiting is not None:
        summary += f", waiting up to {waiting:.0f}"
    evidence = [
        EvidenceValue(
            "queue time p90 (bucket bound)",
            bound,
            "s",
            f"metrics: {q.metric or metric_read(metrics_window, 'queue')} delta",
        ),
        EvidenceValue(
            "queue time mean",
            q.mean,
            "s",
            f"metrics: {q.metric or metric_read(metrics_window, 'queue')} sum / count",
        ),
        EvidenceValue("requests in the histogram", q.count, "requests", "metrics: histogram count delta"),
    ]
    if waiting is not None:
        evidence.append(
            EvidenceValue("waiting (max)", waiting, "requests", f"metrics: {metric_read(metrics_window, 'waiting')}")
        )
    return Fire(
        title="Requests wait long in the queue",
        summary=summary,
        remediation=queue_remediation(
            (f"One request in ten waited {fmt_seconds(bound)} or more before its prefill started. If the batch "
             "limit rather than the KV cache is full, raising max_num_seqs is cheaper (LD101)."),
            f"queue time p90 below {fmt_seconds(max_queue_p90_s)}", log_facts, run, stream, engine.id,
        ),
        severity=Severity.WARNING,
        evidence=evidence,
    )
