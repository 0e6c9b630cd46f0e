"""The report as Prometheus metrics: the families a dashboard or an alert reads after each run.

Built from the ``Report`` alone (its verdict, findings, run record and ``stream_stats`` view),
never from a probe, so a one-shot ``diagnose --metrics-textfile`` and a re-analysed bundle
export the same numbers. The names and labels are a published contract (README, "Exported
metrics"; ``deploy/prometheus/alerts.yaml`` reads them): keep them stable.

Every family carries ``region`` from the run record ("" when the run did not say), so a
Prometheus that gathers several regions' textfiles keeps each region's numbers apart (budgets
are local numbers). A path the run did not probe, or a statistic with no sample, is left out
rather than written as 0: 0 s TTFT would read as a fast answer.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from prometheus_client import CollectorRegistry, Gauge, generate_latest

from doctor.model import Report, Severity, Symptom

#: The families and their help text, in the order the file lists them.
FAMILIES: dict[str, str] = {
    "llm_doctor_ttft_p90_seconds": "Time to first token, p90 over the measured requests of a path (censored waits count at their lower bound).",
    "llm_doctor_tpot_p90_seconds": "Time per output token, p90 over the measured requests of a path.",
    "llm_doctor_itl_max_seconds": "Largest gap between two token events of any measured request of a path.",
    "llm_doctor_requests_failed_ratio": "Failed measured requests over measured requests, per path.",
    "llm_doctor_verdict": "1 for the run's verdict, 0 for every other symptom.",
    "llm_doctor_findings": "Findings of the run, per severity.",
    "llm_doctor_run_timestamp_seconds": "When the run ended (Unix time).",
    "llm_doctor_run_duration_seconds": "How long the run took, from the run record's start to its end.",
    "llm_doctor_up": "1 when the run could diagnose (a verdict other than inconclusive), else 0.",
}

#: family -> (the stream_stats path field, the statistic) for the per-path latency families.
_PATH_STATS = {
    "llm_doctor_ttft_p90_seconds": ("ttft_felt", "p90"),
    "llm_doctor_tpot_p90_seconds": ("tpot", "p90"),
    "llm_doctor_itl_max_seconds": ("itl", "max"),
}


def _epoch(stamp: str) -> float | None:
    try:
        return datetime.fromisoformat(stamp).timestamp()
    except (TypeError, ValueError):
        return None


def metrics_registry(report: Report) -> CollectorRegistry:
    """A registry holding this report's families (its own: never the process-wide default one)."""
    registry = CollectorRegistry(auto_describe=True)
    region = report.bundle.run.region or ""

    def gauge(name: str, *labels: str) -> Gauge:
        return Gauge(name, FAMILIES[name], ["region", *labels], registry=registry)

    paths: dict[str, Any] = (report.views.get("stream_stats") or {}).get("paths") or {}
    for name, (field_name, stat) in _PATH_STATS.items():
        family = gauge(name, "path")
        for path, stats in paths.items():
            value = (stats.get(field_name) or {}).get(stat)
            if value is not None:
                family.labels(region=region, path=path).set(value)
    failed = gauge("llm_doctor_requests_failed_ratio", "path")
    for path, stats in paths.items():
        measured = stats.get("n_ok", 0) + stats.get("n_failed", 0)
        if measured:
            failed.labels(region=region, path=path).set(stats.get("n_failed", 0) / measured)
    verdict = gauge("llm_doctor_verdict", "symptom")
    for symptom in Symptom:
        verdict.labels(region=region, symptom=symptom.value).set(1 if report.verdict.symptom is symptom else 0)
    findings = gauge("llm_doctor_findings", "severity")
    for severity in Severity:
        findings.labels(region=region, severity=severity.value).set(sum(1 for f in report.findings if f.severity is severity))
    run = report.bundle.run
    ended, started = _epoch(run.ended_at), _epoch(run.started_at)
    if ended is not None:
        gauge("llm_doctor_run_timestamp_seconds").labels(region=region).set(ended)
        if started is not None:
            gauge("llm_doctor_run_duration_seconds").labels(region=region).set(max(ended - started, 0.0))
    gauge("llm_doctor_up").labels(region=region).set(0 if report.verdict.symptom is Symptom.INCONCLUSIVE else 1)
    return registry


def render_metrics(report: Report) -> str:
    """The families in Prometheus' text exposition format (what node_exporter's textfile collector reads)."""
    return generate_latest(metrics_registry(report)).decode("utf-8")
