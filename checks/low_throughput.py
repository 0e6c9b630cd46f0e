"""The engine is underused: low token throughput with nothing waiting.

What it detects:
Over the metrics window the engine processed few prompt tokens and generated few tokens per
second, ran fewer than `min_running` requests at its busiest, and never had a request waiting:
it had capacity and did not use it (vllm-doctor's low-throughput rule).

Why it matters:
Continuous batching makes extra concurrent requests almost free: a GPU decoding one or two
sequences costs the same as one decoding thirty. An idle or trickle-fed engine is money spent
on a replica that could serve more, or traffic spread over too many replicas.

Evidence:
Metrics window: prompt and generation token deltas over the window length, `running` and
`waiting` gauges (max). Stream probe: its concurrency, so that a window whose only load was the
probe's own requests is not mistaken for production traffic.

Remediation:
Consolidate traffic onto fewer replicas (setting `replicas`), or send more concurrent requests
to each: throughput rises with the batch until the latency budget says stop.

Options:
min_prompt_tps: prompt tokens per second at or above which the engine is used (vllm-doctor 0.6.0's
    default)
min_generation_tps: generated tokens per second at or above which the engine is used (vllm-doctor
    0.6.0's default)
min_running: running requests at the busiest scrape at or above which the engine is used (vllm-
    doctor 0.6.0's default)

Example:
LD502 low-throughput: 3.1 prompt and 18.4 generated tokens/s over 60 s, running <= 1, waiting 0 ->
fewer replicas, more concurrency per replica.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import metric_read, rerun
from doctor.derive.metrics_window import MetricsWindow
from doctor.evidence import StreamEvidence
from doctor.model import Cause, EvidenceValue, Remediation, Severity, SymptomClass


@dataclass(frozen=True)
class Found:
    """Prompt and generated tokens per second over the window, the running and waiting peaks, and
    the metrics they were read from."""

    window_s: float
    prompt_tps: float
    gen_tps: float
    running: float
    waiting: float
    prompt_metric: str
    generation_metric: str
    running_metric: str
    waiting_metric: str


@check(code="LD502", name="low-throughput", symptom=SymptomClass.GENERAL, cause=Cause.THROUGHPUT)
def low_throughput(
    metrics_window: MetricsWindow,
    stream: StreamEvidence | None = None,
    *,
    min_prompt_tps: float = 10.0,
    min_generation_tps: float = 50.0,
    min_running: float = 2.0,
) -> Result:
    w = metrics_window
    if not w.window_s or w.generation_tokens is None or w.prompt_tokens is None or w.running is None:
        return NotApplicable("token counters, the running gauge or the window length are missing")
    running = w.running.max or 0.0
    waiting = (w.waiting.max or 0.0) if w.waiting is not None else 0.0
    if waiting > 0:
        return Pass(_saturated(waiting))
    if stream is not None and stream.requests and running <= stream.shape.concurrency:
        return NotApplicable(_probe_only(stream.shape.concurrency))
    found = Found(w.window_s, w.prompt_tokens / w.window_s, w.generation_tokens / w.window_s, running, waiting,
                  metric_read(w, "prompt_tokens"), metric_read(w, "generation_tokens"), metric_read(w, "running"),
                  metric_read(w, "waiting"))
    if found.prompt_tps >= min_prompt_tps or found.gen_tps >= min_generation_tps or running >= min_running:
        return Pass(_used(found))
    return Fire(
        felt=False,  # unused capacity, not a wait users had
        title="The engine is underused",
        summary=_summary(found),
        remediation=Remediation(
            setting="replicas",
            suggested="fewer replicas, more concurrent requests per replica",
            where="the deployment (replica count / load balancer)",
            why=(
                "The engine decoded fewer than two sequences at a time with nothing waiting: batching "
                "would serve more requests at almost the same cost per step."
            ),
            verify=rerun("higher generated tokens/s per replica at the same latency"),
        ),
        severity=Severity.INFO,
        evidence=_evidence(found),
    )


def _saturated(waiting: float) -> str:
    return f"up to {waiting:.0f} requests waited: the engine is saturated, not idle (see queue-pressure)"


def _probe_only(concurrency: int) -> str:
    return (f"the window's load was the probe's own {concurrency} stream(s): "
            "throughput under it says nothing about production traffic")


def _used(found: Found) -> str:
    return f"{found.prompt_tps:.1f} prompt and {found.gen_tps:.1f} generated tokens/s, running <= {found.running:.0f}"


def _summary(found: Found) -> str:
    return (f"{found.prompt_tps:.1f} prompt and {found.gen_tps:.1f} generated tokens/s over {found.window_s:.0f} s, "
            f"running <= {found.running:.0f}, waiting 0")


def _evidence(found: Found) -> list[EvidenceValue]:
    return [
        EvidenceValue("prompt tokens/s", round(found.prompt_tps, 2), "tokens/s",
                      f"metrics: {found.prompt_metric} delta / {found.window_s:.0f} s"),
        EvidenceValue("generated tokens/s", round(found.gen_tps, 2), "tokens/s",
                      f"metrics: {found.generation_metric} delta / {found.window_s:.0f} s"),
        EvidenceValue("running (max)", found.running, "requests", f"metrics: {found.running_metric}"),
        EvidenceValue("waiting (max)", found.waiting, "requests", f"metrics: {found.waiting_metric}"),
    ]
