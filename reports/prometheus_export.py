"""The report as Prometheus metrics: the families a dashboard or an alert reads after each run.

Built from the ``Report`` alone (its verdict, findings, run record and ``stream_stats`` view),
never from a probe, so a one-shot ``diagnose --metrics-textfile`` and a re-analysed bundle
export the same numbers. The names and labels are a published contract (``docs/scheduled.md``,
the metric tables; ``deploy/prometheus/alerts.yaml`` reads them): keep them stable.

Every family carries ``region`` from the run record ("" when the run did not say), and
``target`` when one registry holds several runs (a canary beside its stable, a fleet's
replicas), so a Prometheus that gathers several regions' textfiles keeps each region's numbers apart (budgets
are local numbers). A path the run did not probe, or a statistic with no sample, is left out
rather than written as 0: 0 s TTFT would read as a fast answer.

A load run adds its summary's families (``LOAD_FAMILIES``, built from the report and the
``LoadSummary`` of its bundle, which ``analyze`` of that bundle computes alike); a sweep has
families of its own (``SWEEP_FAMILIES``, from its ``SweepResult``): the knee and what bound it.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from prometheus_client import CollectorRegistry, Gauge, generate_latest

from doctor.derive.load_summary import LoadSummary
from doctor.derive.view_json import DistKey, Quantile, view
from doctor.model import Report, Severity, Symptom, SymptomClass
from doctor.runs.outage import unreachable_paths
from doctor.runs.sweep_knee import SweepResult

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

#: A load run's families (``load``, and ``analyze`` of a bundle it or a sweep level kept), labelled
#: ``scenario`` too; the per-path families above come with them. Apart from ``FAMILIES``: the
#: dashboard and the alerts read a diagnosis' numbers, and these exist only after a load run.
LOAD_FAMILIES: dict[str, str] = {
    "llm_doctor_load_ttft_p90_seconds": "TTFT p90 a load run is held to its budget by: MLPerf's early-stopping bound once n >= 64, else the p90.",
    "llm_doctor_load_tpot_p90_seconds": "TPOT p90 a load run is held to its budget by: MLPerf's early-stopping bound once n >= 64, else the p90.",
    "llm_doctor_load_within_budget": "1 when the load run's TTFT p90 and TPOT p90 are within both budgets, else 0.",
    "llm_doctor_load_requests_per_second": "Successful requests per second over the load run's measured span.",
    "llm_doctor_load_output_tokens_per_second": "Output tokens per second over the load run's measured span.",
    "llm_doctor_load_goodput_requests_per_second": "Requests within both budgets per second (goodput, DistServe's definition).",
    "llm_doctor_load_good_ratio": "Requests within both budgets over the requests sent (a failure is never good).",
    "llm_doctor_load_offered_requests_per_second": "The Poisson arrival rate asked for (open-loop scenarios only).",
    "llm_doctor_load_achieved_requests_per_second": "Arrivals per second the client managed to send.",
    "llm_doctor_load_late_arrivals": "Arrivals sent more than 10 ms after their schedule: the client could not offer the load.",
    "llm_doctor_load_cost_per_million_output_tokens": "What a million output tokens cost at this throughput (with --gpu-hour-price).",
}

#: The autoscaler's families, only when the run read one (a ``k8s://`` diagnosis, ``watch`` of one):
#: apart from ``FAMILIES`` for the same reason as the load families; docs/scaling.md.
SCALING_FAMILIES: dict[str, str] = {
    "llm_doctor_scaler_replicas": "An autoscaler's replica bounds and state (bound: min, max, current, desired), per object.",
    "llm_doctor_scaler_finding": "1 for each scaling finding (LD6xx) of the run, by code and severity.",
}

#: A sweep's families (``sweep``): the knee, what bound it and the one setting, labelled ``by``.
SWEEP_FAMILIES: dict[str, str] = {
    "llm_doctor_sweep_knee_streams": "Highest closed-loop concurrency within both budgets (a --by concurrency sweep; absent without a knee).",
    "llm_doctor_sweep_knee_requests_per_second": "Highest Poisson rate within both budgets (a --by rate sweep; absent without a knee).",
    "llm_doctor_sweep_binding": "1 for what the first level over the knee broke first (ttft, tpot, client, interrupted), 0 for the others.",
    "llm_doctor_sweep_recommended": "The value the sweep recommends for its one setting (max_num_seqs or replicas).",
    "llm_doctor_sweep_max_num_seqs": "The engine's max_num_seqs during the sweep, when its log or /metrics says it (what a max_num_seqs recommendation changes).",
    "llm_doctor_sweep_levels": "Levels of load the sweep measured.",
}

#: What ``llm_doctor_sweep_binding`` has a sample for (``doctor.runs.sweep_knee.Knee.binding``).
BINDINGS = ("ttft", "tpot", "client", "interrupted")

#: family -> (the stream_stats path field, the statistic) for the per-path latency families.
_PATH_STATS: dict[str, tuple[DistKey, Quantile]] = {
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
            text = FAMILIES.get(name) or LOAD_FAMILIES.get(name) or SCALING_FAMILIES.get(name) or SWEEP_FAMILIES[name]
            self.gauges[name] = Gauge(name, text, [*self.run_labels, *labels], registry=self.registry)
        return self.gauges[name]


def metrics_registry(report: Report | Mapping[str, Report], *, load: LoadSummary | None = None) -> CollectorRegistry:
    """A registry holding the report's families (its own: never the process-wide default one).

    Several reports, by target name (``watch`` with a canary, or a fleet's replicas), share the
    families, each sample labelled ``target`` too, so the canary's TTFT sits beside the stable's.
    ``load``: the summary of a load run's one report, whose ``llm_doctor_load_*`` families join them.
    """
    registry = CollectorRegistry(auto_describe=True)
    several = isinstance(report, Mapping)
    families = _Families(registry, ("region", "target") if several else ("region",))
    for target, one in (report.items() if isinstance(report, Mapping) else [("", report)]):
        run = {"region": one.bundle.run.region or "", **({"target": target} if several else {})}
        _add(one, families, run)
        if load is not None and not several:
            _add_load(load, families, run, one.bundle.run.scenario or "")
    return registry


#: LOAD_FAMILIES' family -> the ``LoadSummary`` field it carries (the rest are computed).
_LOAD_FIELDS = {
    "llm_doctor_load_ttft_p90_seconds": "ttft_judged_s",
    "llm_doctor_load_tpot_p90_seconds": "tpot_judged_s",
    "llm_doctor_load_requests_per_second": "requests_per_s",
    "llm_doctor_load_output_tokens_per_second": "output_tokens_per_s",
    "llm_doctor_load_goodput_requests_per_second": "goodput_rps",
    "llm_doctor_load_good_ratio": "good_fraction",
    "llm_doctor_load_offered_requests_per_second": "offered_rps",
    "llm_doctor_load_achieved_requests_per_second": "achieved_rps",
    "llm_doctor_load_cost_per_million_output_tokens": "cost_per_million_output_tokens",
}


def _add_load(summary: LoadSummary, gauge: _Families, run: dict[str, str], scenario: str) -> None:
    """A load summary's samples; a number it does not have (no Poisson rate, no price) is left out."""
    labels = {**run, "scenario": scenario}
    for name, attribute in _LOAD_FIELDS.items():
        value = getattr(summary, attribute)
        if value is not None:
            gauge(name, "scenario").labels(**labels).set(value)
    gauge("llm_doctor_load_within_budget", "scenario").labels(**labels).set(0 if summary.over_budgets else 1)
    if summary.offered_rps is not None:  # a closed loop's schedule is its send: never late
        gauge("llm_doctor_load_late_arrivals", "scenario").labels(**labels).set(summary.late)


def sweep_registry(result: SweepResult) -> CollectorRegistry:
    """A sweep's families: the knee in its unit, what bound it, the recommendation, labelled
    ``region`` (the sweep's run record) and ``by``."""
    registry = CollectorRegistry(auto_describe=True)
    gauge = _Families(registry, ("region", "by"))
    run = {"region": result.run.get("region") or "", "by": result.by}
    if result.knee.value is not None:
        name = "llm_doctor_sweep_knee_streams" if result.by == "concurrency" else "llm_doctor_sweep_knee_requests_per_second"
        gauge(name).labels(**run).set(result.knee.value)
    binding = gauge("llm_doctor_sweep_binding", "budget")
    for budget in BINDINGS:
        binding.labels(**run, budget=budget).set(1 if result.knee.binding == budget else 0)
    rec = result.recommendation
    if rec.suggested is not None:
        gauge("llm_doctor_sweep_recommended", "setting").labels(**run, setting=rec.setting).set(rec.suggested)
    if rec.current is not None:  # the engine's max_num_seqs, whichever setting is recommended
        gauge("llm_doctor_sweep_max_num_seqs").labels(**run).set(rec.current)
    gauge("llm_doctor_sweep_levels").labels(**run).set(len(result.levels))
    return registry


def _add(report: Report, gauge: _Families, run: dict[str, str]) -> None:
    """One report's samples, labelled ``run`` (region, and target when there are several)."""
    stream_stats, metrics_window = view(report, "stream_stats")[0], view(report, "metrics_window")[0]
    paths = stream_stats.paths if stream_stats else {}
    for name, (field_name, stat) in _PATH_STATS.items():
        family = gauge(name, "path")
        for path, stats in paths.items():
            value = getattr(getattr(stats, field_name), stat)
            if value is not None:
                family.labels(**run, path=path).set(value)
    failed = gauge("llm_doctor_requests_failed_ratio", "path")
    for path, stats in paths.items():
        measured = stats.n_ok + stats.n_failed
        if measured:
            failed.labels(**run, path=path).set(stats.n_failed / measured)
    up_paths = gauge("llm_doctor_target_up", "path")
    down = unreachable_paths(report.bundle)
    for path in sorted({r.path for r in report.bundle.stream.requests} if report.bundle.stream else ()):
        up_paths.labels(**run, path=path).set(0 if path in down else 1)
    waiting_gauge = metrics_window.waiting if metrics_window else None
    waiting = waiting_gauge.max if waiting_gauge else None
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
    _add_scaling(report, gauge, run)


def _add_scaling(report: Report, gauge: _Families, run: dict[str, str]) -> None:
    """The autoscalers the run read (their bounds and state) and its scaling findings; nothing without a scaler."""
    scaling, _ = view(report, "scalers")
    for scaler in scaling.scalers if scaling is not None else []:
        status = scaler.status
        bounds = {"min": scaler.floor.value if scaler.floor else None, "max": scaler.ceiling.value if scaler.ceiling else None,
                  "current": status.current if status else None, "desired": status.desired if status else None}
        for bound, value in bounds.items():
            number = value if isinstance(value, int | float) and not isinstance(value, bool) else None
            if number is not None:
                gauge("llm_doctor_scaler_replicas", "object", "bound").labels(**run, object=scaler.label, bound=bound).set(number)
    for finding in report.findings:
        if finding.symptom is SymptomClass.SCALING:
            gauge("llm_doctor_scaler_finding", "code", "severity").labels(**run, code=finding.code,
                                                                            severity=finding.severity.value).set(1)


def render_metrics(report: Report) -> str:
    """The families in Prometheus' text exposition format (what node_exporter's textfile collector reads)."""
    return generate_latest(metrics_registry(report)).decode("utf-8")
