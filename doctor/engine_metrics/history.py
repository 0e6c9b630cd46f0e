"""The same ``MetricsWindow`` from the raw Prometheus API answers in ``PrometheusEvidence``.

Prometheus has already done the counter work (``increase`` handles resets and extrapolates to
the window edges, so its amounts need not be integers); this module only regroups answers by
engine and hands them to the shared assembly. Gauge samples are timed in seconds from the
window's start.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from doctor.engine_metrics.derived import derive_missing
from doctor.engine_metrics.metric_names import ENGINE_LABEL, FAMILIES, MODEL_LABEL, Family
from doctor.engine_metrics.readings import (
    EngineKey,
    GaugeSeries,
    HistogramDelta,
    NoWindow,
    Readings,
    assemble,
    combine_gauges,
)
from doctor.engine_metrics.views import MetricsWindow
from doctor.engines.names import engine_of_metrics
from doctor.evidence import PrometheusEvidence, PromQuery
from doctor.foundation import wire

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
        metric = next((m for m in family.names if result_rows(answered.get((family.key, presence, m)))), None)
        if metric is None:
            continue
        readings.metric_names[family.key] = metric
        parts = {part: result_rows(q) for (fam, part, m), q in answered.items() if fam == family.key and m == metric}
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
                        le = _number(labels.get("le"))
                        if le is not None:
                            h.buckets[le] = value
                    else:
                        setattr(h, part, value)
        else:
            _gauge(readings, family, parts, start)
    if not readings.metric_names:
        raise NoWindow(
            f"no vllm: series matched {evidence.selector or 'any selector'} over the last {evidence.since_s:g} s"
        )
    window = assemble(readings, source="prometheus", window_s=evidence.since_s)
    derive_missing(window)
    window.engine_kind = engine_of_metrics(readings.metric_names.values())  # the series it answered with name it
    return window


def _gauge(readings: Readings, family: Family, parts: dict[str, list[dict]], start: float) -> None:
    per_engine: dict[EngineKey, GaugeSeries] = {}
    for row in parts.get("range", []):
        series = per_engine.setdefault(_engine(row["metric"]), GaugeSeries())
        series.samples = [(t - start, v) for t, v in (sample_point(p) for p in row.get("values") or []) if t is not None and v is not None]
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


def result_rows(query: PromQuery | None) -> list[dict]:
    """The answer's result rows that have the API's shape, each with a ``metric`` label map.

    The answer is the server's (or a hand-edited bundle's): a row that is not an object, labels
    that are not a map of strings, a value that is not a ``[time, "number"]`` pair are skipped
    one by one (``sample_point``), so one odd row costs itself, not the history view.
    """
    if query is None:
        return []
    try:
        data = wire.loads(query.response)
    except wire.WireError:  # the query counts as unanswered
        return []
    data = data.get("data") if isinstance(data, dict) else None
    result = data.get("result") if isinstance(data, dict) else None
    rows = []
    for row in result if isinstance(result, list) else []:
        labels = row.get("metric", {}) if isinstance(row, dict) else None
        if isinstance(labels, dict):
            rows.append({**row, "metric": {str(k): str(v) for k, v in labels.items()}})
    return rows


def _number(raw: object) -> float | None:
    """A sample value or timestamp as the API writes it (``"1.5"``, ``1700000000.1``); None if it is none."""
    if isinstance(raw, bool) or not isinstance(raw, (str, int, float)):
        return None
    try:
        value = float(raw)
    except (ValueError, OverflowError):
        return None
    return None if math.isnan(value) else value


def sample_point(pair: object) -> tuple[float | None, float | None]:
    """``[time, "value"]`` -> (time, value); (None, None) for anything else."""
    if not isinstance(pair, list) or len(pair) != 2:
        return None, None
    return _number(pair[0]), _number(pair[1])


def _instant(rows: Iterable[dict]) -> Iterable[tuple[dict[str, str], float]]:
    for row in rows:
        _, value = sample_point(row.get("value"))
        if value is not None:
            yield row["metric"], value


def _engine(labels: dict[str, str]) -> EngineKey:
    return labels.get(ENGINE_LABEL, ""), labels.get(MODEL_LABEL, "")
