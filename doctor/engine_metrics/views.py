"""The ``metrics_window`` view: what /metrics (or Prometheus history) says happened in a window.

Defined here, next to the code that computes it, and re-exported by
``doctor.derive.metrics_window`` where checks find it. A quantity whose family was absent is
``None`` and named in ``missing``; it is never 0, because "vLLM did not say" and "vLLM said
nothing happened" lead to different diagnoses.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class GaugeWindow:
    """A gauge over the window: min / max of the samples, and the samples for charts."""

    min: float | None = None
    max: float | None = None
    last: float | None = None
    samples: list[list[float]] = field(default_factory=list)  # [t, value] pairs


@dataclass
class HistogramWindow:
    """A server-side histogram's delta over the window: a latency in seconds (``step_tokens``: tokens)."""

    count: float = 0.0
    sum: float = 0.0
    mean: float | None = None  # sum / count deltas
    p50_le: float | None = None  # quantiles from buckets are upper bounds: "<= bucket bound"
    p90_le: float | None = None
    p99_le: float | None = None
    metric: str | None = None  # the vLLM name it was read from, e.g. "vllm:inter_token_latency_seconds"
    buckets: list[list[float]] = field(default_factory=list)  # [le, cumulative count delta], finite bounds
    derived: str | None = None  # how it was derived when the engine has no such histogram (TGI's TTFT)

    @property
    def max_le(self) -> float | None:
        """The smallest bucket bound every observation fell under ("the largest step <= 512 tokens");
        ``None`` when nothing was observed or some lay above the largest finite bound."""
        if not self.count:
            return None
        return next((le for le, cumulative in self.buckets if cumulative >= self.count - 1e-9), None)


@dataclass
class WindowQuantities:
    """The quantities of a window, declared once: for one ``engine`` / ``model_name`` label set
    (``EngineWindow``) and for the whole scrape (``MetricsWindow``)."""

    preemptions: float | None = None  # None = the family was missing, never 0
    prompt_tokens: float | None = None
    generation_tokens: float | None = None
    prefix_cache_hits: float | None = None
    prefix_cache_queries: float | None = None
    # Speculative decoding's draft, accepted and draft-count deltas; None also when it is off.
    spec_draft_tokens: float | None = None
    spec_accepted_tokens: float | None = None
    spec_drafts: float | None = None
    ttft: HistogramWindow | None = None
    queue: HistogramWindow | None = None
    prefill: HistogramWindow | None = None
    decode: HistogramWindow | None = None
    itl: HistogramWindow | None = None
    e2e: HistogramWindow | None = None
    step_tokens: HistogramWindow | None = None  # tokens per engine step (tokens, not seconds)
    kv_usage: GaugeWindow | None = None  # fraction 0..1; across engines (``MetricsWindow``), the fullest one
    running: GaugeWindow | None = None
    waiting: GaugeWindow | None = None


@dataclass(kw_only=True)
class EngineWindow(WindowQuantities):
    """The window's quantities for one ``engine`` / ``model_name`` label set."""

    engine: str
    model_name: str | None = None
    requests_finished: float | None = None


@dataclass(kw_only=True)
class MetricsWindow(WindowQuantities):
    """The ``metrics_window`` view: what the engine's ``/metrics`` (or Prometheus history) says
    happened over the probe window: counter deltas, server latency histograms, KV and queue gauges,
    per engine when several were scraped. A quantity whose family was absent is ``None`` and named
    in ``missing``, never 0 (see the module docstring); ``metric_names`` says which metric each
    quantity was read from."""

    source: str = "scrape"  # "scrape" | "prometheus"
    # The engine whose metrics these are ("vllm", "sglang", ... as ``doctor.engines.names``);
    # None when the source does not say (Prometheus history is asked by name, not by engine).
    engine_kind: str | None = None
    window_s: float | None = None
    finished_by_reason: dict[str, float] = field(default_factory=dict)
    # TGI's prefill forward steps (per batch), which its derived ``ttft`` is built from.
    prefill_forward: HistogramWindow | None = None
    engines: dict[str, EngineWindow] = field(default_factory=dict)
    # Field names of the quantities whose family was absent or declared with no sample
    # ("preemptions", "finished_by_reason", "ttft", "kv_usage", ...).
    missing: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # counter resets, renamed metrics chosen, scrapes skipped
    metric_names: dict[str, str] = field(default_factory=dict)  # field -> vLLM metric name read
    scrapes_used: int | None = None  # usable scrapes (source "scrape")
