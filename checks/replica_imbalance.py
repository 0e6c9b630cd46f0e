"""Load is spread unevenly over the engines behind one endpoint.

What it detects:
Several engines serve the same model (several `engine` label values in /metrics: data-parallel
ranks, or replicas scraped through one Prometheus) and one does much more than the others: the
busiest ran `imbalance_factor` times the requests of the least busy, or finished that many
more, or its KV cache is `cache_gap` fuller, or it had a queue while another had none
(vllm-doctor's replica-imbalance rule, plus finished requests).

Why it matters:
The overloaded engine queues and preempts while its peers idle: users routed to it see the
latency of a saturated server although the fleet has room. Adding replicas does not help
until the routing spreads the load.

Evidence:
Metrics window, per engine of one model: `running` and `waiting` (max), KV usage (max),
finished requests (delta).

Remediation:
Route by load (setting `load_balancing`): least outstanding requests rather than round-robin
over long-lived connections or sticky sessions (nginx: `least_conn;` in the `upstream` block);
check that every replica is ready and registered.

Options:
imbalance_factor: busiest / least busy engine's running or finished requests that fires (vllm-doctor
    0.6.0's default)
cache_gap: KV usage difference between engines that fires (vllm-doctor 0.6.0's default)
min_total_running: the running signal needs that much load in total
min_total_finished: the finished signal needs that many finished requests in total

Example:
LD506 replica-imbalance: model m on 2 engines: running max 8 vs 1 (8.0x), finished 46 vs 5, KV
usage 0.92 vs 0.11; engine 0 queued 6 while engine 1 had none -> least_conn routing.
"""

from __future__ import annotations

from collections import defaultdict

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import metric_read, rerun
from doctor.derive.metrics_window import EngineWindow, MetricsWindow
from doctor.model import Cause, EvidenceValue, Remediation, Severity, SymptomClass


def _peak(value: object) -> float | None:
    return getattr(value, "max", None)


def imbalance_signals(
    engines: list[EngineWindow],
    *,
    imbalance_factor: float,
    cache_gap: float,
    min_total_running: float,
    min_total_finished: float,
) -> list[str]:
    """The imbalance signals one model's engines show, each as a phrase with its numbers."""
    signals: list[str] = []
    for label, values, floor in (
        ("running max", [_peak(e.running) for e in engines], min_total_running),
        ("finished", [e.requests_finished for e in engines], min_total_finished),
    ):
        known = [v for v in values if v is not None]
        if len(known) >= 2 and sum(known) >= floor:
            hi, lo = max(known), min(known)
            if lo == 0 or hi / lo >= imbalance_factor:
                ratio = f"{hi / lo:.1f}x" if lo else "one engine idle"
                signals.append(f"{label} {hi:.0f} vs {lo:.0f} ({ratio})")
    kv = [v for v in (_peak(e.kv_usage) for e in engines) if v is not None]
    if len(kv) >= 2 and max(kv) - min(kv) >= cache_gap:
        signals.append(f"KV usage {max(kv):.2f} vs {min(kv):.2f}")
    waiting = {e.engine: peak for e in engines if (peak := _peak(e.waiting)) is not None}
    queued = [k for k, v in waiting.items() if v > 0]
    if queued and len(queued) < len(waiting):
        signals.append(f"engine {queued[0]} queued {waiting[queued[0]]:.0f} while another had none")
    return signals


@check(code="LD506", name="replica-imbalance", symptom=SymptomClass.GENERAL, cause=Cause.BALANCE)
def replica_imbalance(
    metrics_window: MetricsWindow,
    *,
    imbalance_factor: float = 2.0,
    cache_gap: float = 0.30,
    min_total_running: float = 5.0,
    min_total_finished: float = 10.0,
) -> Result:
    by_model: dict[str, list[EngineWindow]] = defaultdict(list)
    for eng in metrics_window.engines.values():
        by_model[eng.model_name or "?"].append(eng)
    groups = {m: engs for m, engs in by_model.items() if len(engs) >= 2}
    if not groups:
        return NotApplicable("one engine per model in /metrics: nothing to compare")
    for model, engines in sorted(groups.items()):
        signals = imbalance_signals(
            engines,
            imbalance_factor=imbalance_factor,
            cache_gap=cache_gap,
            min_total_running=min_total_running,
            min_total_finished=min_total_finished,
        )
        if not signals:
            continue
        evidence = [
            EvidenceValue(f"engine {e.engine} {name}", value, unit, f"metrics: {metric}, engine={e.engine}")
            for e in engines
            for name, value, unit, metric in (
                ("running max", _peak(e.running), "requests", metric_read(metrics_window, "running")),
                ("waiting max", _peak(e.waiting), "requests", metric_read(metrics_window, "waiting")),
                ("KV usage max", _peak(e.kv_usage), "", metric_read(metrics_window, "kv_usage")),
                ("finished", e.requests_finished, "requests", f"{metric_read(metrics_window, 'finished_by_reason')} delta"),
            )
            if value is not None
        ]
        return Fire(
            felt=False,  # a risk to the busiest replica: its queue, when users wait in it, is LD504/LD505
            title="Load is spread unevenly over the engines",
            summary=f"model {model} on {len(engines)} engines: " + "; ".join(signals),
            remediation=Remediation(
                setting="load_balancing",
                suggested="least outstanding requests (nginx: `least_conn;` in the upstream block)",
                where="the load balancer / gateway in front of the engines",
                why=(
                    "One engine carries most of the load while its peers idle: round-robin over long-lived "
                    "connections, sticky sessions or an unready replica. Routing by outstanding requests "
                    "evens the queues."
                ),
                verify=rerun("running and finished requests within 2x across the engines"),
            ),
            severity=Severity.WARNING if len(signals) >= 2 else Severity.INFO,
            evidence=evidence,
        )
    return Pass(f"{sum(len(g) for g in groups.values())} engines share the load evenly")
