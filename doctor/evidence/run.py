"""The run record: what was measured, where, when, and with what, for comparing runs later."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class AnalysisRecord:
    """The analysis settings a report was made with, so that re-analysing it gives its verdict.

    Effective values, after flags, the config file and the region's budgets were resolved;
    ``llm-doctor analyze`` takes them as its defaults (flags and an explicit ``--config`` win).
    ``settings`` holds only the overridden options, keyed by check code, so a newer default
    still reaches options nobody set. ``None`` budgets mean "not recorded": the defaults apply.
    """

    ttft_budget_s: float | None = None
    tpot_budget_s: float | None = None
    settings: dict[str, dict[str, Any]] = field(default_factory=dict)  # check code -> option -> value
    select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    fail_on: str | None = None  # felt | info | warning | critical


@dataclass
class RunRecord:
    """Every field is optional: a run records what it could learn and says so.

    Filled from flags and the config file (provider, region, client location, shape), and
    completed by the collector from what the probes learned (model, versions, engine config,
    GPU and CPU topology). Scheduled checks compare runs only when these agree.
    """

    tool_version: str = ""
    command: str = ""  # diagnose | collect | probe | demo
    started_at: str = ""  # ISO 8601 UTC
    ended_at: str = ""
    model: str | None = None
    model_revision: str | None = None
    served_model_name: str | None = None
    vllm_version: str | None = None
    engine_generation: str | None = None  # "V0" | "V1"
    engine_config: dict[str, Any] = field(default_factory=dict)  # every config fact found
    gpu_model: str | None = None
    gpu_count: int | None = None
    gpu_interconnect: str | None = None  # "nvlink" | "pcie" | None
    cpu_model: str | None = None
    cpu_topology: str | None = None  # e.g. "2 sockets x 32 cores, 128 threads"
    provider: str | None = None
    region: str | None = None
    client_location: str | None = None
    route: str | None = None  # completions | chat | responses
    streaming: bool = True
    prompt_tokens: int | None = None
    max_tokens: int | None = None
    concurrency: int | None = None
    requests_per_path: int | None = None
    warmup_per_path: int | None = None
    arrival: str | None = None  # "closed-loop" | "poisson:<rate>/s"
    scenario: str | None = None  # llm-doctor load / sweep: single | server | offline; None for a diagnosis
    lengths: str | None = None  # per-request lengths when drawn from a range or replayed from --shapes
    engine_url: str | None = None
    gateway_url: str | None = None
    metrics_url: str | None = None
    log_source: str | None = None
    labels: dict[str, str] = field(default_factory=dict)  # free-form run-record fields from config
    # The run's --deadline (seconds from the collector's start), and per network step what it was
    # given: min(its own timeout, what was left of the deadline); 0 for a step not started for lack
    # of time (``doctor.probes.deadlines.RunDeadline``). Empty in a bundle from before.
    deadline_s: float | None = None
    steps: dict[str, float] = field(default_factory=dict)
    analysis: AnalysisRecord | None = None  # set by analyze/diagnose; None in a bundle from collect
