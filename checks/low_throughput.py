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

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import metric_read, rerun
from doctor.derive.metrics_window import MetricsWindow
from doctor.evidence import StreamEvidence
from doctor.model import Cause, EvidenceValue, Remediation, Severity, SymptomClass


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
        return Pass(
            f"up to {waiting:.0f} requests waited: the engine is saturated, not idle (see queue-pressure)"
        )
    if stream is not None and stream.requests and running <= stream.shape.concurrency:
        return NotApplicable(
            f"the window's load was the probe's own {stream.shape.concurrency} stream(s): "
            "throughput under it says nothing about production traffic"
        )
    prompt_tps, gen_tps = w.prompt_tokens / w.window_s, w.generation_tokens / w.window_s
    if prompt_tps >= min_prompt_tps or gen_tps >= min_generation_tps or running >= min_running:
        return Pass(f"{prompt_tps:.1f} prompt and {gen_tps:.1f} generated tokens/s, running <= {running:.0f}")
    return Fire(
        felt=False,  # unused capacity, not a wait users had
        title="The engine is underused",
        summary=(
            f"{prompt_tps:.1f} prompt and {gen_tps:.1f} generated tokens/s over {w.window_s:.0f} s, "
            f"running <= {running:.0f}, waiting 0"
        ),
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
        evidence=[
            EvidenceValue(
                "prompt tokens/s",
                round(prompt_tps, 2),
                "tokens/s",
                f"metrics: {metric_read(w, 'prompt_tokens')} delta / {w.window_s:.0f} s",
            ),
            EvidenceValue(
                "generated tokens/s",
                round(gen_tps, 2),
                "tokens/s",
                f"metrics: {metric_read(w, 'generation_tokens')} delta / {w.window_s:.0f} s",
            ),
            EvidenceValue("running (max)", running, "requests", f"metrics: {metric_read(w, 'running')}"),
            EvidenceValue("waiting (max)", waiting, "requests", f"metrics: {metric_read(w, 'waiting')}"),
        ],
    )
