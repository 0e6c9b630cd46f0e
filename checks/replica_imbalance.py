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
from dataclasses import dataclass

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import metric_read, rerun
from doctor.derive.metrics_window import EngineWindow, MetricsWindow
from doctor.model import Cause, EvidenceValue, Remediation, Severity, SymptomClass


def _peak(value: object) -> float | None:
    return getattr(value, "max", None)


@dataclass(frozen=True)
class Imbalance:
    """One imbalance signal: the busiest against the least busy engine's ``running max`` or
    ``finished`` (``hi`` and ``lo``), their ``KV usage`` peaks, or an engine that ``queued`` ``hi``
    while another had none."""

    kind: str
    hi: float
    lo: float = 0.0
    engine: str = ""


@dataclass(frozen=True)
class Found:
    """One model's engines, the imbalance they show, and the metrics each quantity was read from."""

    model: str
    engines: tuple[EngineWindow, ...]
    signals: tuple[Imbalance, ...]
    running_metric: str
    waiting_metric: str
    kv_metric: str
    finished_metric: str


def imbalance_signals(
    engines: list[EngineWindow],
    *,
    imbalance_factor: float,
    cache_gap: float,
    min_total_running: float,
    min_total_finished: float,
) -> list[Imbalance]:
    """The imbalance signals one model's engines show, each with its numbers."""
    signals: list[Imbalance] = []
    for label, values, floor in (
        ("running max", [_peak(e.running) for e in engines], min_total_running),
        ("finished", [e.requests_finished for e in engines], min_total_finished),
    ):
        known = [v for v in values if v is not None]
        if len(known) >= 2 and sum(known) >= floor:
            hi, lo = max(known), min(known)
            if lo == 0 or hi / lo >= imbalance_factor:
                signals.append(Imbalance(label, hi, lo))
    kv = [v for v in (_peak(e.kv_usage) for e in engines) if v is not None]
    if len(kv) >= 2 and max(kv) - min(kv) >= cache_gap:
        signals.append(Imbalance("KV usage", max(kv), min(kv)))
    waiting = {e.engine: peak for e in engines if (peak := _peak(e.waiting)) is not None}
    queued = [k for k, v in waiting.items() if v > 0]
    if queued and len(queued) < len(waiting):
        signals.append(Imbalance("queued", waiting[queued[0]], engine=queued[0]))
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
        found = Found(model, tuple(engines), tuple(signals), metric_read(metrics_window, "running"),
                      metric_read(metrics_window, "waiting"), metric_read(metrics_window, "kv_usage"),
                      metric_read(metrics_window, "finished_by_reason"))
        return Fire(
            felt=False,  # a risk to the busiest replica: its queue, when users wait in it, is LD504/LD505
            title="Load is spread unevenly over the engines",
            summary=_summary(found),
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
            evidence=_evidence(found),
        )
    return Pass(_even(sum(len(g) for g in groups.values())))


def _signal_said(signal: Imbalance) -> str:
    if signal.kind == "queued":
        return f"engine {signal.engine} queued {signal.hi:.0f} while another had none"
    if signal.kind == "KV usage":
        return f"KV usage {signal.hi:.2f} vs {signal.lo:.2f}"
    ratio = f"{signal.hi / signal.lo:.1f}x" if signal.lo else "one engine idle"
    return f"{signal.kind} {signal.hi:.0f} vs {signal.lo:.0f} ({ratio})"


def _summary(found: Found) -> str:
    return f"model {found.model} on {len(found.engines)} engines: " + "; ".join(map(_signal_said, found.signals))


def _evidence(found: Found) -> list[EvidenceValue]:
    return [
        EvidenceValue(f"engine {e.engine} {name}", value, unit, f"metrics: {metric}, engine={e.engine}")
        for e in found.engines
        for name, value, unit, metric in (
            ("running max", _peak(e.running), "requests", found.running_metric),
            ("waiting max", _peak(e.waiting), "requests", found.waiting_metric),
            ("KV usage max", _peak(e.kv_usage), "", found.kv_metric),
            ("finished", e.requests_finished, "requests", f"{found.finished_metric} delta"),
        )
        if value is not None
    ]


def _even(engines: int) -> str:
    return f"{engines} engines share the load evenly"
