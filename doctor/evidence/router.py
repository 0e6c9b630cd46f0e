"""The ``router`` kind: the router between the gateway and the replicas, raw.

Its own /metrics before, during and after the probe (like the engine's), the raw answer of its
worker list, each replica's /metrics over the same window (the replicas the worker list names,
else the ``--engine`` given), its flags as deployed (``--router-args``) and its startup log
(``--router-log``). Parsed at analysis (``doctor.routers.reading``), so a newer llm-doctor re-reads
an old bundle. What is missing (a /metrics on another port, an unreachable replica) is said in
``notes`` and in each replica's scrapes, never raised.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from doctor.evidence.metrics import Scrape


@dataclass
class ReplicaScrapes:
    """One replica behind the router and its /metrics over the window (``source``: ``worker list``
    or ``--engine``); every scrape failed when the replica did not answer."""

    url: str
    source: str = "worker list"
    scrapes: list[Scrape] = field(default_factory=list)


@dataclass
class RouterEvidence:
    """The router's URL, its /metrics scrapes, its worker list's answer (``workers_route``,
    ``workers_answer``: the body, bounded), its replicas' scrapes, its flags and startup log lines
    as given, and ``notes`` saying what could not be read."""

    url: str
    metrics_url: str | None = None
    scrapes: list[Scrape] = field(default_factory=list)
    workers_route: str | None = None
    workers_answer: str | None = None
    replicas: list[ReplicaScrapes] = field(default_factory=list)
    args: list[str] = field(default_factory=list)
    log_lines: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
