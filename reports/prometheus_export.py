"""The report as Prometheus metrics: the families a dashboard or an alert reads after each run.

Built from the ``Report`` alone (its verdict, findings, run record and ``stream_stats`` view),
never from a probe, so a one-shot ``diagnose --metrics-textfile`` and a re-analysed bundle
export the same numbers. The names and labels are a published contract (README, "Exported
metrics"; ``deploy/prometheus/alerts.yaml`` reads them): keep them stable.

Every family carries ``region`` from the run record ("" when the run did not say), and
``target`` when one registry holds several runs (a canary beside its stable, a fleet's
replicas), so a Prometheus that gathers several regions' textfiles keeps each region's numbers apart (budgets
are local numbers). A path the run did not probe, or a statistic with no sample, is left out
rather than written as 0: 0 s TTFT would read as a fast answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from prometheus_client import CollectorRegistry, Gauge, generate_latest

from doctor.model import Report, Severity, Symptom
from doctor.outage import unreachable_paths

#: The families and their help text, in the order the file lists them.
FAMILIES: dict[str, str] = {
    "llm_doctor_ttft_p90_seconds": "Time to first token, p90 over the measured requests of a path (censored waits count at their lower bound).",
    "llm_doctor_ttft_p95_seconds": "Time to first token, p95 over the measured requests of a path: an autoscaler's latency signal.",
    "llm_doctor_tpot_p90_seconds": "Time per output token, p90 over the measured requests of a path.",
    "llm_doctor_itl_max_seconds": "Largest gap between two token events of any measured request of a path.",
    "llm_doctor_requests_failed_ratio": "Failed measured requests over measured requests, per path.",
    "llm_doctor_target_up": "1 when a request of the path reached its target, 0 when none did (refused, unresolved, no TLS, no connection in time).",
    "llm_doctor_requests_waiting_max": "Most requests waiting in the engine's queue (vllm:num_requests_waiting) during the probe: an autoscaler's queue signal, per replica.",
    "llm_doctor_verdict": "1 for the run's verdict, 0 for every other symptom.",
    "llm_doctor_findings": "Findings of the run, per severity.",
    "llm_doctor_run_timestamp_seconds": "When the run ended (Unix time).",
    "llm_doctor_run_duration_seconds": "How long the run took, from the run record's start to its end.",
    "llm_doctor_up": "1 when the run could diagnose (a verdict other than inconclusive), else 0.",
}

#: family -> (the stream_stats path field, the statistic) for the per-path latency families.
_PATH_STATS = {
    "llm_doctor_ttft_p90_seconds": ("ttft_felt", "p90"),
    "llm_doctor_ttft_p95_seconds": ("ttft_felt", "p95"),
    "llm_doctor_tpot_p90_seconds": ("tpot", "p90"),
    "llm_doctor_itl_max_seconds": ("itl", "max"),
}


def _epoch(stamp: str) -> float | None:
    try:
        return datetime.fromisoformat(stamp).timestamp()
    except (TypeError, ValueError):
        return None


class _Families:
    """The registry's gauges, each created on first use with the run's labels before its own."""

    def __init__(self, registry: CollectorRegistry, run_labels: tuple[str, ...]) -> None:
        self.registry, self.run_labels = registry, run_labels
        self.gauges: dict[str, Gauge] = {}

    def __call__(self, name: str, *labels: str) -> Gauge:
        if name not in self.gauges:
            self.gauges[name] = Gauge(name, FAMILIES[name], [*self.run_labels, *labels], registry=self.registry)
        return self.gauges[name]


def metrics_registry(report: Report | Mapping[str, Report]) -> CollectorRegistry:
    """A registry holding the report's families (its own: never the process-wide default one).

    Several reports, by target name (``watch`` with a canary, or a fleet's replicas), share the
    families, each sample labelled ``target`` too, so the canary's TTFT sits beside the stable's.
    """
    registry = CollectorRegistry(auto_describe=True)
    several = isinstance(report, Mapping)
    families = _Families(registry, ("region", "target") if several else ("region",))
    for target, one in (report.items() if isinstance(report, Mapping) else [("", report)]):
        run = {"region": one.bundle.run.region or "", **({"target": target} if several else {})}
        _add(one, families, run)
    return registry


def _add(report: Report, gauge: _Families, run: dict[str, str]) -> None:
    """One report's samples, labelled ``run`` (region, and target when there are several)."""
    paths: dict[str, Any] = (report.views.get("stream_stats") or {}).get("paths") or {}
    for name, (field_name, stat) in _PATH_STATS.items():
        family = gauge(name, "path")
        for path, stats in paths.items():
            value = (stats.get(field_name) or {}).get(stat)
            if value is not None:
                family.labels(**run, path=path).set(value)
    failed = gauge("llm_doctor_requests_failed_ratio", "path")
    for path, stats in paths.items():
        measured = stats.get("n_ok", 0) + stats.get("n_failed", 0)
        if measured:
            failed.labels(**run, path=path).set(stats.get("n_failed", 0) / measured)
    up_paths = gauge("llm_doctor_target_up", "path")
    down = unreachable_paths(report.bundle)
    for path in sorted({r.path for r in report.bundle.stream.requests} if report.bundle.stream else ()):
        up_paths.labels(**run, path=path).set(0 if path in down else 1)
    waiting = ((report.views.get("metrics_window") or {}).get("waiting") or {}).get("max")
    if waiting is not None:
        gauge("llm_doctor_requests_waiting_max").labels(**run).set(waiting)
    verdict = gauge("llm_doctor_verdict", "symptom")
    for symptom in Symptom:
        verdict.labels(**run, symptom=symptom.value).set(1 if report.verdict.symptom is symptom else 0)
    findings = gauge("llm_doctor_findings", "severity")
    for severity in Severity:
        findings.labels(**run, severity=severity.value).set(sum(1 for f in report.findings if f.severity is severity))
    record = report.bundle.run
    ended, started = _epoch(record.ended_at), _epoch(record.started_at)
    if ended is not None:
        gauge("llm_doctor_run_timestamp_seconds").labels(**run).set(ended)
        if started is not None:
            gauge("llm_doctor_run_duration_seconds").labels(**run).set(max(ended - started, 0.0))
    gauge("llm_doctor_up").labels(**run).set(0 if report.verdict.symptom is Symptom.INCONCLUSIVE else 1)


def render_metrics(report: Report) -> str:
    """The families in Prometheus' text exposition format (what node_exporter's textfile collector reads)."""
    return generate_latest(metrics_registry(report)).decode("utf-8")
