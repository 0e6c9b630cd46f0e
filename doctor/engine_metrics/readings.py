"""What both sources (scrapes, Prometheus history) reduce to, and its assembly into a window.

Scrapes and Prometheus answers are read differently, but both end as per-engine counter
deltas, histogram deltas and gauge series. One ``assemble`` turns that into the
``MetricsWindow`` so the totals, the per-engine split and the quantile rule are written once.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from doctor.engine_metrics.metric_names import FAMILIES
from doctor.engine_metrics.views import EngineWindow, GaugeWindow, HistogramWindow, MetricsWindow

#: (engine label, model_name label); "" where the label is absent.
EngineKey = tuple[str, str]

QUANTILES = (("p50_le", 0.5), ("p90_le", 0.9), ("p99_le", 0.99))


class NoWindow(Exception):
    """No window can be computed from this source; the message says why (shown as ``Missing``)."""


@dataclass
class HistogramDelta:
    """One histogram's increase over the window (count, sum, cumulative bucket counts), the form
    both sources reduce to; ``add`` sums the engines' deltas into the total.
    """

    count: float = 0.0
    sum: float = 0.0
    buckets: dict[float, float] = field(default_factory=dict)  # le -> cumulative count delta

    def add(self, other: HistogramDelta) -> None:
        self.count += other.count
        self.sum += other.sum
        for le, n in other.buckets.items():
            self.buckets[le] = self.buckets.get(le, 0.0) + n


@dataclass
class GaugeSeries:
    """Samples of one gauge; ``min`` / ``max`` given when the source knows them exactly."""

    samples: list[tuple[float, float]] = field(default_factory=list)
    min: float | None = None
    max: float | None = None

    def window(self) -> GaugeWindow:
        values = [v for _, v in self.samples]
        return GaugeWindow(
            min=self.min if self.min is not None else min(values, default=None),
            max=self.max if self.max is not None else max(values, default=None),
            last=values[-1] if values else None,
            samples=[[t, v] for t, v in self.samples],
        )


@dataclass
class Readings:
    """Per-family, per-engine amounts over the window. A family absent from all three maps is missing."""

    counters: dict[str, dict[EngineKey, dict[str, float]]] = field(default_factory=dict)  # family -> engine -> sub -> delta
    histograms: dict[str, dict[EngineKey, HistogramDelta]] = field(default_factory=dict)
    gauges: dict[str, dict[EngineKey, GaugeSeries]] = field(default_factory=dict)
    gauge_totals: dict[str, GaugeSeries] = field(default_factory=dict)  # across engines
    metric_names: dict[str, str] = field(default_factory=dict)  # family -> vLLM name read
    notes: list[str] = field(default_factory=list)


def combine_gauges(per_engine: Mapping[EngineKey, GaugeSeries], aggregate: str) -> GaugeSeries:
    """Engines' samples taken at the same instants, summed (or max'd) instant by instant."""
    by_t: dict[float, list[float]] = defaultdict(list)
    for series in per_engine.values():
        for t, v in series.samples:
            by_t[t].append(v)
    return GaugeSeries(samples=[(t, combined(aggregate, vs)) for t, vs in sorted(by_t.items())])


def combined(aggregate: str, values: Sequence[float]) -> float:
    """Gauge values taken at one instant as one (``Family.aggregate``): their sum, or the largest."""
    return float(max(values) if aggregate == "max" else sum(values))


def quantile_bounds(buckets: Iterable[Sequence[float]], count: float, q: float) -> tuple[float, float | None] | None:
    """The bucket holding the ``q`` quantile, as ``histogram_quantile`` ranks it: ``(lower, upper)``.

    ``buckets`` are ``(le, cumulative count)`` in ascending ``le``. Only bounds can be stated
    honestly from buckets ("0.2 s < p90 <= 0.5 s"), so no interpolation. ``upper`` is None when
    the quantile lies above every finite bound (the +Inf bucket); the whole is None when nothing
    was observed.
    """
    if count <= 0:
        return None
    rank, low = q * count, 0.0
    for le, cumulative in buckets:
        if cumulative >= rank - 1e-9:
            return low, None if math.isinf(le) else le
        low = le
    return low, None


def quantile_le(buckets: Mapping[float, float], count: float, q: float) -> float | None:
    """The smallest bucket bound holding the ``q`` quantile ("p90 <= 0.5 s"); ``None`` when nothing
    was observed or the quantile is in the +Inf bucket."""
    bounds = quantile_bounds(sorted(buckets.items()), count, q)
    return bounds[1] if bounds is not None else None


def histogram_window(delta: HistogramDelta, metric: str | None) -> HistogramWindow:
    out = HistogramWindow(
        count=delta.count,
        sum=delta.sum,
        mean=delta.sum / delta.count if delta.count > 0 else None,
        metric=metric,
        buckets=[[le, n] for le, n in sorted(delta.buckets.items()) if not math.isinf(le)],
    )
    # The +Inf bucket is the count of what the buckets saw (an excerpt may lack ``_count``).
    observed = delta.buckets.get(math.inf, delta.count)
    for attr, q in QUANTILES:
        setattr(out, attr, quantile_le(delta.buckets, observed, q))
    return out


def _engine_labels(keys: Iterable[EngineKey]) -> dict[EngineKey, str]:
    """Name each engine by its ``engine`` label; add the model only where that is ambiguous."""
    keys = sorted(set(keys))
    per_engine: dict[str, int] = defaultdict(int)
    for engine, _ in keys:
        per_engine[engine] += 1
    names = {}
    for engine, model in keys:
        name = engine or "0"
        names[(engine, model)] = f"{name}/{model}" if per_engine[engine] > 1 else name
    return names


def assemble(readings: Readings, *, source: str, window_s: float | None) -> MetricsWindow:
    window = MetricsWindow(
        source=source, window_s=window_s, notes=list(readings.notes), metric_names=dict(readings.metric_names)
    )
    keys: set[EngineKey] = set()
    for table in (readings.counters, readings.histograms, readings.gauges):
        for per_engine in table.values():
            keys.update(per_engine)
    labels = _engine_labels(keys)
    engines = {
        key: EngineWindow(engine=labels[key], model_name=key[1] or None) for key in sorted(keys)
    }

    for family in FAMILIES:
        if family.kind == "counter" and family.key in readings.counters:
            _assemble_counter(window, engines, family.key, readings.counters[family.key])
        elif family.kind == "histogram" and family.key in readings.histograms:
            per_engine = readings.histograms[family.key]
            total = HistogramDelta()
            for key, delta in per_engine.items():
                total.add(delta)
                if hasattr(engines[key], family.key):
                    setattr(engines[key], family.key, histogram_window(delta, readings.metric_names.get(family.key)))
            setattr(window, family.key, histogram_window(total, readings.metric_names.get(family.key)))
            if family.quantiles:
                _note_open_quantiles(window, family.key, total)
        elif family.kind == "gauge" and family.key in readings.gauges:
            per_engine = readings.gauges[family.key]
            for key, series in per_engine.items():
                setattr(engines[key], family.key, series.window())
            total_series = readings.gauge_totals.get(family.key) or combine_gauges(per_engine, family.aggregate)
            setattr(window, family.key, total_series.window())
        elif family.only_with is None:
            window.missing.append(family.key)

    window.engines = {engine.engine: engine for engine in engines.values()}
    return window


def _assemble_counter(
    window: MetricsWindow,
    engines: dict[EngineKey, EngineWindow],
    key: str,
    per_engine: Mapping[EngineKey, Mapping[str, float]],
) -> None:
    if key == "finished_by_reason":
        by_reason: dict[str, float] = defaultdict(float)
        for engine_key, subs in per_engine.items():
            for reason, delta in subs.items():
                by_reason[reason or "unlabelled"] += delta
            engines[engine_key].requests_finished = sum(subs.values())
        window.finished_by_reason = dict(sorted(by_reason.items()))
        return
    total = 0.0
    for engine_key, subs in per_engine.items():
        amount = sum(subs.values())
        total += amount
        if hasattr(engines[engine_key], key):  # every counter but finished_by_reason, per engine too
            setattr(engines[engine_key], key, amount)
    setattr(window, key, total)


def _note_open_quantiles(window: MetricsWindow, key: str, total: HistogramDelta) -> None:
    finite = [le for le in total.buckets if not math.isinf(le)]
    observed = total.buckets.get(math.inf, total.count)
    if observed <= 0 or not finite:
        return
    top = max(finite)
    if total.buckets[top] < 0.99 * observed - 1e-9:
        window.notes.append(
            f"{key}: some quantiles lie above the largest bucket bound ({top:g}); they are left empty"
        )
