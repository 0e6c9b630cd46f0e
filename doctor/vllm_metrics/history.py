"""The same ``MetricsWindow`` from the raw Prometheus API answers in ``PrometheusEvidence``.

Prometheus has already done the counter work (``increase`` handles resets and extrapolates to
the window edges, so its amounts need not be integers); this module only regroups answers by
engine and hands them to the shared assembly. Gauge samples are timed in seconds from the
window's start.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable

from doctor.evidence import PrometheusEvidence, PromQuery
from doctor.vllm_metrics.names import ENGINE_LABEL, FAMILIES, MODEL_LABEL, Family
from doctor.vllm_metrics.readings import (
    EngineKey,
    GaugeSeries,
    HistogramDelta,
    NoWindow,
    Readings,
    assemble,
    combine_gauges,
)
from doctor.vllm_metrics.views import MetricsWindow

#: Per family kind, the query part whose answer says whether the family exists under a name.
#: The probe asks it first and skips the other parts (and older names) by the same rule.
PRESENCE_PART = {"counter": "increase", "histogram": "count", "gauge": "max"}


def query_name(family: str, part: str, metric: str) -> str:
    """``PromQuery.name``: ``itl.count@vllm:inter_token_latency_seconds``."""
    return f"{family}.{part}@{metric}"


def split_query_name(name: str) -> tuple[str, str, str] | None:
    """``query_name``'s inverse; ``None`` for a name this version did not write."""
    head, at, metric = name.partition("@")
    family, dot, part = head.partition(".")
    return (family, part, metric) if at and dot else None


def window_from_history(evidence: PrometheusEvidence) -> MetricsWindow:
    answered: dict[tuple[str, str, str], PromQuery] = {}
    for query in evidence.queries:
        key = split_query_name(query.name)
        if key is not None and query.error is None and query.response:
            answered[key] = query
    if not answered:
        first_error = next((q.error for q in evidence.queries if q.error), "no query was sent")
        raise NoWindow(f"Prometheus answered no query ({first_error})")

    readings = Readings()
    start = evidence.end_wall - evidence.since_s
    for family in FAMILIES:
        presence = PRESENCE_PART[family.kind]
        metric = next((m for m in family.names if _rows(answered.get((family.key, presence, m)))), None)
        if metric is None:
            continue
        readings.metric_names[family.key] = metric
        parts = {part: _rows(q) for (fam, part, m), q in answered.items() if fam == family.key and m == metric}
        if family.kind == "counter":
            counters = readings.counters[family.key] = {}
            for labels, value in _instant(parts["increase"]):
                subs = counters.setdefault(_engine(labels), {})
                sub = labels.get(family.sub_label, "") if family.sub_label else ""
                subs[sub] = subs.get(sub, 0.0) + value
        elif family.kind == "histogram":
            hists = readings.histograms[family.key] = {}
            for part in ("count", "sum", "bucket"):
                for labels, value in _instant(parts.get(part, [])):
                    h = hists.setdefault(_engine(labels), HistogramDelta())
                    if part == "bucket":
                        h.buckets[float(labels["le"])] = value
                    else:
                        setattr(h, part, value)
        else:
            _gauge(readings, family, parts, start)
    if not readings.metric_names:
        raise NoWindow(
            f"no vllm: series matched {evidence.selector or 'any selector'} over the last {evidence.since_s:g} s"
        )
    return assemble(readings, source="prometheus", window_s=evidence.since_s)


def _gauge(readings: Readings, family: Family, parts: dict[str, list[dict]], start: float) -> None:
    per_engine: dict[EngineKey, GaugeSeries] = {}
    for row in parts.get("range", []):
        series = per_engine.setdefault(_engine(row["metric"]), GaugeSeries())
        series.samples = [(float(ts) - start, v) for ts, raw in row.get("values", []) if not math.isnan(v := float(raw))]
    for part, attr in (("max", "max"), ("min", "min")):
        for labels, value in _instant(parts.get(part, [])):
            setattr(per_engine.setdefault(_engine(labels), GaugeSeries()), attr, value)
    total = GaugeSeries()
    for part, attr in (("total_max", "max"), ("total_min", "min")):
        for _, value in _instant(parts.get(part, [])):
            setattr(total, attr, value)
    readings.gauges[family.key] = per_engine
    if total.max is not None or total.min is not None:
        total.samples = combine_gauges(per_engine, family.aggregate).samples
        readings.gauge_totals[family.key] = total


def _rows(query: PromQuery | None) -> list[dict]:
    if query is None:
        return []
    try:
        result = json.loads(query.response).get("data", {}).get("result", [])
    except (json.JSONDecodeError, AttributeError):  # a hand-edited bundle; the query counts as unanswered
        return []
    return result if isinstance(result, list) else []


def _instant(rows: Iterable[dict]) -> Iterable[tuple[dict[str, str], float]]:
    for row in rows:
        value = float(row["value"][1])
        if not math.isnan(value):
            yield row.get("metric", {}), value


def _engine(labels: dict[str, str]) -> EngineKey:
    return labels.get(ENGINE_LABEL, ""), labels.get(MODEL_LABEL, "")
