"""/metrics evidence: the raw Prometheus text of every scrape, parsed at analysis time."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Scrape:
    """One GET of /metrics. ``phase`` is ``before``, ``during`` or ``after`` the probe."""

    phase: str
    t: float  # seconds relative to the stream probe's t0 (negative before it)
    wall: float  # unix time
    status: int | None = None
    content_type: str | None = None
    text: str = ""  # raw exposition, redacted
    error: str | None = None
    # llama-server's /slots beside its /metrics (which has no KV gauge), taken with it: per slot
    # the fields ``doctor.engines.server_info.slot_fields`` keeps; None when not asked or absent.
    slots: list[dict[str, Any]] | None = None


@dataclass
class MetricsEvidence:
    """The ``metrics`` kind: every scrape of the engine's ``/metrics`` around the stream probe, raw,
    so ``metrics_window`` computes the deltas at analysis time with the parser of the day."""

    url: str
    scrapes: list[Scrape] = field(default_factory=list)
    interval_s: float | None = None


@dataclass
class PromQuery:
    """One Prometheus HTTP API call and its raw JSON answer."""

    name: str  # the quantity, e.g. "preemptions", "kv_usage_max"
    expr: str  # the PromQL sent
    endpoint: str = "query"  # "query" | "query_range"
    response: str = ""  # raw JSON body
    error: str | None = None


@dataclass
class PrometheusEvidence:
    """The ``prometheus`` kind: the queries asked of a Prometheus server for the ``since_s`` seconds
    up to ``end_wall`` (the engine's history when it was not scraped during the run), each with its
    raw answer; ``selector`` is the label matcher that picked the engine's series."""

    url: str
    since_s: float
    selector: str = ""
    end_wall: float = 0.0
    queries: list[PromQuery] = field(default_factory=list)
