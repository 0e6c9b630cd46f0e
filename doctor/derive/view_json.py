"""The JSON of each view a renderer reads, as ``TypedDict``s: what ``Report.views`` holds.

``doctor.checking.runner.views_of`` turns each view's dataclass into JSON (``serial.to_jsonable``), so a
renderer reads field names as strings. Typed this way, mypy sees a renderer reading a key no
view has: a field renamed in ``stream_stats.py`` fails the type check instead of showing as "—"
in every report. Each class mirrors one dataclass field for field (enums become their string
value, nested dataclasses their own ``...Json``); ``tests/derive/test_view_json.py`` holds the two
together, and ``reports/schema/report.schema.json`` names the same keys. Like Lighthouse's
``types/lhr``, these are the contract of the report's ``views``; the dataclasses stay the types
checks receive. A view that could not be computed is ``MissingJson`` instead.

The ``sizing`` view is a JSON document from the start (``doctor.sizing.sizing_json.SizingSummary``).
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

from doctor.sizing.sizing_json import SizingSummary


class MissingJson(TypedDict):
    """A view that could not be computed, and why (``Missing``'s reason)."""

    missing: str | None


class DistJson(TypedDict):
    """``stream_stats.Dist``: a distribution summary; ``n`` is shown next to every percentile."""

    n: int
    min: float | None
    p50: float | None
    p90: float | None
    p99: float | None
    max: float | None
    mean: float | None
    p95: float | None
    p90_early: float | None
    p99_early: float | None
    note: str | None


#: The fields of ``PathStatsJson`` that hold a ``DistJson``: what a renderer's row names by key.
DistKey = Literal["client_frozen", "ttft", "tpot", "itl", "e2e", "max_gap", "client_queue", "events_per_read",
                  "bytes_per_read", "headers_to_first_token", "first_to_last_token", "warmup_ttft", "ttft_felt"]

#: The quantiles of a ``DistJson`` a renderer shows.
Quantile = Literal["min", "p50", "p90", "p99", "max", "mean", "p95"]


class RequestStatsJson(TypedDict):
    """``stream_stats.RequestStats``: one probe request's timings, the gap chart's input."""

    index: int
    path: str
    warmup: bool
    outcome: str
    ttft: float | None
    tpot: float | None
    e2e: float | None
    client_queue: float | None
    tokens: int
    events: int
    gaps: list[float]
    median_gap: float | None
    max_gap: float | None
    stall_above: float | None
    stalls: int
    events_per_read: float | None
    bytes_per_read: float | None
    headers_to_first_token: float | None
    first_to_last_token: float | None
    censored: bool
    client_frozen: float


class PathStatsJson(TypedDict):
    """``stream_stats.PathStats``: what the client felt on one path, a column of the per-path table."""

    path: str
    url: str | None
    n_ok: int
    n_failed: int
    n_warmup: int
    n_void: int
    failures: dict[str, int]
    client_frozen: DistJson
    ttft: DistJson
    tpot: DistJson
    itl: DistJson
    e2e: DistJson
    max_gap: DistJson
    client_queue: DistJson
    events_per_read: DistJson
    bytes_per_read: DistJson
    headers_to_first_token: DistJson
    first_to_last_token: DistJson
    warmup_ttft: DistJson
    ttft_felt: DistJson
    ttft_censored: int
    ttft_felt_p90_high: float | None
    gap_censored: int
    partial: int
    stalls: int
    headers: dict[str, str]
    http_version: str | None
    framing: str | None
    tokens_estimated: bool
    requests: list[RequestStatsJson]


class StreamStatsJson(TypedDict):
    """The ``stream_stats`` view (``stream_stats.StreamStats``): per path, keyed by ``ProbePath`` value."""

    route: str | None
    concurrency: int
    paths: dict[str, PathStatsJson]
    gateway_route: str | None
    gateway_kind: str | None


class GaugeWindowJson(TypedDict):
    """``engine_metrics.views.GaugeWindow``: a gauge's min, max, last and ``[t, value]`` samples."""

    min: float | None
    max: float | None
    last: float | None
    samples: list[list[float]]


class HistogramWindowJson(TypedDict):
    """``engine_metrics.views.HistogramWindow``: a server histogram's delta over the window."""

    count: float
    sum: float
    mean: float | None
    p50_le: float | None
    p90_le: float | None
    p99_le: float | None
    metric: str | None
    buckets: list[list[float]]
    derived: str | None


class WindowQuantitiesJson(TypedDict):
    """The quantities a window of ``/metrics`` holds for the whole scrape and for each engine in it,
    declared once for ``EngineWindowJson`` and ``MetricsWindowJson`` (``engine_metrics.views``'
    ``EngineWindow`` and ``MetricsWindow``, whose shared fields ``tests/derive/test_view_json.py``
    holds alike): counter deltas, server latency histograms, the KV and queue gauges."""

    preemptions: float | None
    prompt_tokens: float | None
    generation_tokens: float | None
    prefix_cache_hits: float | None
    prefix_cache_queries: float | None
    spec_draft_tokens: float | None
    spec_accepted_tokens: float | None
    spec_drafts: float | None
    ttft: HistogramWindowJson | None
    queue: HistogramWindowJson | None
    prefill: HistogramWindowJson | None
    decode: HistogramWindowJson | None
    itl: HistogramWindowJson | None
    e2e: HistogramWindowJson | None
    kv_usage: GaugeWindowJson | None
    running: GaugeWindowJson | None
    waiting: GaugeWindowJson | None


class EngineWindowJson(WindowQuantitiesJson):
    """``engine_metrics.views.EngineWindow``: one engine's share of a window scraped from several."""

    engine: str
    model_name: str | None
    requests_finished: float | None


#: The fields of ``MetricsWindowJson`` holding a ``HistogramWindowJson`` / ``GaugeWindowJson``.
HistogramKey = Literal["ttft", "queue", "prefill", "prefill_forward", "decode", "itl", "e2e"]
GaugeKey = Literal["kv_usage", "running", "waiting"]
#: Its counter deltas, each ``None`` when the family was absent.
CounterKey = Literal["preemptions", "prompt_tokens", "generation_tokens", "prefix_cache_hits", "prefix_cache_queries",
                     "spec_draft_tokens", "spec_accepted_tokens", "spec_drafts"]


class MetricsWindowJson(WindowQuantitiesJson):
    """The ``metrics_window`` view (``engine_metrics.views.MetricsWindow``): /metrics over the window."""

    source: str
    engine_kind: str | None
    window_s: float | None
    finished_by_reason: dict[str, float]
    prefill_forward: HistogramWindowJson | None
    engines: dict[str, EngineWindowJson]
    missing: list[str]
    errors: list[str]
    notes: list[str]
    metric_names: dict[str, str]
    scrapes_used: int | None


class FactJson(TypedDict):
    """``logscan.parsed.Fact``: one startup-log fact and the line it was read from."""

    value: Any
    line: int | None
    raw: str | None
    note: str | None


class StartupErrorJson(TypedDict):
    """``logscan.parsed.StartupError``: an error the engine logged while starting."""

    kind: str
    message: str
    line: int | None
    raw: str | None


class StatsPointJson(TypedDict):
    """``logscan.parsed.StatsPoint``: one periodic stats line of the log."""

    line: int
    timestamp: str | None
    running: float | None
    waiting: float | None
    swapped: float | None
    pending: float | None
    kv_usage_pct: float | None
    cpu_kv_usage_pct: float | None
    prefix_cache_hit_pct: float | None
    prompt_throughput: float | None
    generation_throughput: float | None
    preemptions: float | None
    engine: str | None
    startup: int | None


class StartupJson(TypedDict):
    """``logscan.parsed.Startup``: one engine start found in the log."""

    first_line: int
    last_line: int | None
    version: str | None
    engine_generation: str | None
    model: str | None
    errors: list[str]


class LogFactsJson(TypedDict):
    """The ``log_facts`` view (``logscan.parsed.LogFacts``): what the startup log says."""

    source: str
    engine: str
    identified_by: str
    facts: dict[str, FactJson]
    errors: list[StartupErrorJson]
    stats: list[StatsPointJson]
    preemption_warnings: int
    preemptions_cumulative: int | None
    startups: list[StartupJson]


class EstimateJson(TypedDict):
    """``user_felt.Estimate``: one latency as one witness saw it, its p90 between two bounds."""

    n: int
    p90_low: float
    p90_high: float | None
    mean: float | None
    censored: int
    mean_only: bool


class WitnessJson(TypedDict):
    """``user_felt.Witness``: one source of what users felt (the probe, a scrape, Prometheus)."""

    source: str
    path: str
    label: str
    ttft: EstimateJson | None
    tpot: EstimateJson | None
    max_gap: EstimateJson | None
    freeze_buckets: list[list[float]]
    requests: int


class UserFeltJson(TypedDict):
    """The ``user_felt`` view (``user_felt.UserFelt``): every witness, and why a source gave none."""

    witnesses: list[WitnessJson]
    notes: list[str]


class EngineIdentityJson(TypedDict):
    """The ``engine`` view (``engine.EngineIdentity``): the engine that served, and what told."""

    id: str
    by: str


class HopJson(TypedDict):
    """``request_hops.Hop``: one part of a request's wait for its first token, from its send."""

    name: str
    start: float
    seconds: float


class BehindJson(TypedDict):
    """``request_stalls.Behind``: another request's prefill that ran during a probe request's stall."""

    request_id: str | None
    probe: bool
    prompt_tokens: int | None
    prefill: float
    overlap: float


class StallJson(TypedDict):
    """``request_stalls.Stall``: a probe request's longest gap between two tokens, and whom it sat behind."""

    after_token: int
    start: float
    seconds: float
    usual: float
    covered: float
    behind: list[BehindJson]


class RequestHopsJson(TypedDict):
    """``request_hops.RequestHops``: one probe request joined with its spans."""

    index: int
    path: str
    trace_id: str
    ttft: float | None
    e2e: float | None
    engine_span: bool
    gateway_span: str | None
    request_id: str | None
    queue: float | None
    prefill: float | None
    engine_ttft: float | None
    decode: float | None
    prompt_tokens: int | None
    completion_tokens: int | None
    hops: list[HopJson]
    slowest_hop: str | None
    slowest_hop_s: float | None
    ticks: list[float]
    stall: StallJson | None


class ClockAlignmentJson(TypedDict):
    """``request_hops.ClockAlignment``: how the engine's span times were put on the client's clock."""

    offset_s: float
    low: float | None
    high: float | None
    consistent: bool
    requests: int


class RequestHopsViewJson(TypedDict):
    """The ``request_hops`` view (``request_hops.RequestHopsView``): the per-request join with the spans."""

    requests: list[RequestHopsJson]
    alignment: ClockAlignmentJson
    slow: list[int]
    slow_hop: str | None
    slow_hop_share: float | None
    typical_hop: str | None
    typical_hop_share: float | None
    hop_p90: dict[str, float]
    others: int
    others_queue: DistJson
    others_prefill: DistJson
    others_ttft: DistJson
    untraced: list[str]
    spans: int
    dropped: int
    malformed: int
    stalled: list[int]
    stalled_behind: int
    typical_stall_s: float | None
    typical_behind_share: float | None


#: The views by the name ``Report.views`` keys them with, as a renderer reads them.
ViewName = Literal["stream_stats", "metrics_window", "log_facts", "user_felt", "sizing", "engine", "request_hops"]

__all__ = [
    "BehindJson",
    "ClockAlignmentJson",
    "CounterKey",
    "DistJson",
    "DistKey",
    "EngineIdentityJson",
    "EngineWindowJson",
    "EstimateJson",
    "FactJson",
    "GaugeKey",
    "GaugeWindowJson",
    "HistogramKey",
    "HistogramWindowJson",
    "HopJson",
    "LogFactsJson",
    "MetricsWindowJson",
    "MissingJson",
    "PathStatsJson",
    "Quantile",
    "RequestHopsJson",
    "RequestHopsViewJson",
    "RequestStatsJson",
    "SizingSummary",
    "StallJson",
    "StartupErrorJson",
    "StartupJson",
    "StatsPointJson",
    "StreamStatsJson",
    "UserFeltJson",
    "ViewName",
    "WitnessJson",
]
