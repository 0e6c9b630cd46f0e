"""Window deltas and gauge ranges from raw /metrics scrapes taken around the stream probe.

Counters and histogram parts are summed step by step over *every* usable scrape, the way
Prometheus's ``increase`` does, so an engine restart between two background scrapes is a
reset that clamps (the value after it counts from zero) rather than a negative delta.
Gauges keep every scrape: the before/after pair alone would miss a KV cache that filled up
and drained while the probe ran.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from doctor.engine_metrics.derived import derive_missing, derive_slots_kv_usage
from doctor.engine_metrics.metric_names import FAMILIES, FAMILY_BY_KEY, ExpositionError, Sample, parse_exposition
from doctor.engine_metrics.readings import EngineKey, GaugeSeries, HistogramDelta, NoWindow, Readings, assemble, combined
from doctor.engine_metrics.views import MetricsWindow
from doctor.engines import server_info
from doctor.engines.names import METRIC_PREFIXES
from doctor.evidence import Scrape


@dataclass
class ParsedScrape:
    """One usable /metrics scrape, parsed, at its time ``t`` on the probe's clock, with the engine whose
    families it declared: what the window's deltas and gauge series are computed from.
    """

    t: float
    samples: list[Sample]
    engine: str | None = None  # whose metric families the scrape declared
    slots_kv_usage: float | None = None  # llama-server's /slots taken with it, as a KV usage 0-1


def _summarised(failed: Sequence[tuple[Scrape, str]], total: int) -> list[str]:
    """One line per distinct reason: "17 of 17 scrapes: /metrics answered HTTP 404", not 17 lines
    (the reason reaches the report and a cron mail); a reason met once keeps its scrape's time."""
    by_reason: dict[str, list[Scrape]] = {}
    for scrape, reason in failed:
        by_reason.setdefault(reason, []).append(scrape)
    return [f"{group[0].phase} scrape at t={group[0].t:+.1f}s: {reason}" if len(group) == 1
            else f"{len(group)} of {total} scrapes: {reason}" for reason, group in by_reason.items()]


def parse_scrape(scrape: Scrape) -> tuple[ParsedScrape | None, str | None]:
    """The scrape's samples, or the reason it is unusable (an HTML page, garbage, no vllm: metric)."""
    if scrape.error:
        return None, scrape.error
    if scrape.status is not None and scrape.status != 200:
        return None, f"/metrics answered HTTP {scrape.status}"
    body = scrape.text.lstrip()
    if "html" in (scrape.content_type or "").lower() or body[:1] == "<":
        return None, "/metrics returned an HTML page, not Prometheus text (a proxy or error page?)"
    if not body:
        return None, "/metrics returned an empty body"
    try:
        samples, engine = parse_exposition(scrape.text)
    except ExpositionError as exc:
        return None, f"/metrics {exc}"
    if engine is None:
        known = ", ".join(prefix for prefix, _ in METRIC_PREFIXES)
        return None, f"/metrics has no vllm: metric, nor any other engine's ({known}): is the URL an engine's?"
    usage = server_info.slots_kv_usage(scrape.slots) if scrape.slots else None
    return ParsedScrape(scrape.t, samples, engine, usage), None


def window_from_scrapes(scrapes: Sequence[Scrape], *, since_start: bool = False) -> MetricsWindow:
    """The window between the first and the last usable scrape; ``NoWindow`` when there are < 2.

    ``since_start``: one usable scrape is enough, read as the window from the engine's start
    (every counter and histogram counted from zero), which is what a single saved scrape can
    say (``llm-doctor metrics FILE.prom``).
    """
    parsed: list[ParsedScrape] = []
    failed: list[tuple[Scrape, str]] = []
    for scrape in sorted(scrapes, key=lambda s: s.t):
        result, reason = parse_scrape(scrape)
        if result is None:
            failed.append((scrape, reason or "unusable"))
        else:
            parsed.append(result)
    skipped = _summarised(failed, len(scrapes))
    used = len(parsed)
    notes = [f"skipped {s}" for s in skipped]
    if since_start and used == 1:
        # An empty scrape before it: every series is then born inside the window, from zero.
        parsed.insert(0, ParsedScrape(parsed[0].t, [], parsed[0].engine))
        notes.insert(0, "one scrape: counters and histograms are totals since the engine started")
    if len(parsed) < 2:
        what = "no /metrics scrape succeeded" if not parsed else "only one /metrics scrape succeeded"
        raise NoWindow("; ".join([what, *skipped]))

    readings = Readings(notes=notes)
    _choose_metric_names(parsed, readings)
    _add_deltas(parsed, readings)
    _add_gauges(parsed, readings)
    window = assemble(readings, source="scrape", window_s=parsed[-1].t - parsed[0].t)
    derive_missing(window)
    derive_slots_kv_usage(window, [(p.t, p.slots_kv_usage) for p in parsed if p.slots_kv_usage is not None])
    window.scrapes_used = used
    window.engine_kind = parsed[-1].engine
    return window


def _add_deltas(parsed: Sequence[ParsedScrape], readings: Readings) -> None:
    """Counter and histogram increases of the chosen names, per engine."""
    series_values = _series_values(parsed, set(readings.metric_names.items()))
    for family_key, per_series in _deltas(series_values, readings.notes).items():
        if FAMILY_BY_KEY[family_key].kind == "counter":
            counters = readings.counters.setdefault(family_key, {})
            for sample, delta in per_series:
                subs = counters.setdefault((sample.engine, sample.model), {})
                subs[sample.sub] = subs.get(sample.sub, 0.0) + delta
            continue
        hists = readings.histograms.setdefault(family_key, {})
        for sample, delta in per_series:
            h = hists.setdefault((sample.engine, sample.model), HistogramDelta())
            if sample.part == "count":
                h.count += delta
            elif sample.part == "sum":
                h.sum += delta
            elif sample.le is not None:
                h.buckets[sample.le] = h.buckets.get(sample.le, 0.0) + delta


def _add_gauges(parsed: Sequence[ParsedScrape], readings: Readings) -> None:
    """Every scrape's value of each chosen gauge, per engine: an engine's series (its schedulers'
    label sets) combined as across engines, KV usage the fullest one's. SGLang labels each
    scheduler by ``tp_rank`` and ``pp_rank``, and without ``dp_rank`` under DP attention, where each
    attention group's scheduler has its own queue and its own share of the KV pool
    (``scheduler_metrics_mixin.py``): their usages are fractions of different pools."""
    for family in FAMILIES:
        metric = readings.metric_names.get(family.key)
        if family.kind != "gauge" or metric is None:
            continue
        per_engine: dict[EngineKey, dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
        for p in parsed:
            for s in p.samples:
                if s.family == family.key and s.metric == metric:
                    per_engine[(s.engine, s.model)][p.t].append(s.value)
        readings.gauges[family.key] = {
            key: GaugeSeries(samples=[(t, combined(family.aggregate, values)) for t, values in sorted(by_t.items())])
            for key, by_t in per_engine.items()
        }


def _choose_metric_names(parsed: Sequence[ParsedScrape], readings: Readings) -> None:
    """Per family, the newest vLLM name that has samples; note when an older one coexists."""
    seen: dict[str, set[str]] = defaultdict(set)
    for p in parsed:
        for s in p.samples:
            seen[s.family].add(s.metric)
    for family in FAMILIES:
        present = [name for name in family.names if name in seen[family.key]]
        if not present:
            continue
        readings.metric_names[family.key] = present[0]
        if len(present) > 1:
            readings.notes.append(
                f"{family.key}: both {' and '.join(present)} are exposed (rename window); read {present[0]}"
            )


def _series_values(
    parsed: Sequence[ParsedScrape], chosen: set[tuple[str, str]]
) -> dict[tuple[object, ...], tuple[Sample, list[float | None]]]:
    """Each counter-like series (counter, bucket, sum, count) -> its value in each scrape (None: absent)."""
    out: dict[tuple[object, ...], tuple[Sample, list[float | None]]] = {}
    for i, p in enumerate(parsed):
        for s in p.samples:
            if FAMILY_BY_KEY[s.family].kind == "gauge" or (s.family, s.metric) not in chosen:
                continue
            entry = out.get(s.series)
            if entry is None:
                entry = out[s.series] = (s, [None] * len(parsed))
            values = entry[1]
            values[i] = (values[i] or 0.0) + s.value
    return out


def _deltas(
    series_values: dict[tuple[object, ...], tuple[Sample, list[float | None]]], notes: list[str]
) -> dict[str, list[tuple[Sample, float]]]:
    """Family -> [(series, increase over the window)], clamping counter resets."""
    out: dict[str, list[tuple[Sample, float]]] = defaultdict(list)
    reset_families: set[str] = set()
    for sample, values in series_values.values():
        total = 0.0
        previous: float | None = None
        for i, value in enumerate(values):
            if value is None:
                continue
            if previous is None:
                # A series born after the first scrape started at zero within the window
                # (V0 creates labelled series lazily, e.g. the first "abort").
                total += value if i > 0 else 0.0
            elif value < previous:
                total += value  # reset: the engine restarted and counts from zero again
                reset_families.add(sample.family)
            else:
                total += value - previous
            previous = value
        out[sample.family].append((sample, total))
    for family in sorted(reset_families):
        notes.append(f"{family}: a counter went down during the window (engine restart?); counted from zero after it")
    return out
