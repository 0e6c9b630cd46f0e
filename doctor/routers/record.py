"""What llm-doctor knows about one router product, as one record: how it is recognised, the metric
that answers each question about it, and how it spells each of its settings.

A router sits between the gateway and the engine replicas (vllm-router, sglang-router, llm-d's
endpoint picker, LiteLLM's router). Every table that lists routers (identification, the metric
read for each quantity, the flag a remediation names, the docs' table) is derived from the records
in ``doctor.routers.RECORDS``, so adding a product is one module of this package plus its
evidence (``tests/routers/test_records.py`` holds every record to the same questions: each
quantity and each setting is either named or said to be absent, with why).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

#: The questions every record answers, by a metric family name or by why the product has none.
#: ``requests``: requests sent to each replica (a counter with the replica as a label);
#: ``in_flight``: requests on each replica now, as the router counts them; ``queue``: requests
#: waiting in the router itself; ``retries``: requests sent again; ``ejections``: a replica taken
#: out of rotation by the router (circuit breaker open, cooled down); ``health``: each replica's
#: health as the router's own checks see it; ``saturation``: the router's view that the pool is full.
QUANTITIES: tuple[str, ...] = ("requests", "in_flight", "queue", "retries", "ejections", "health", "saturation")

#: The settings a remediation may name, each spelled by the product or said to be absent.
SETTINGS: tuple[str, ...] = (
    "policy", "max_concurrent", "queue_size", "queue_timeout", "rate_limit", "retries",
    "health_interval", "health_endpoint", "health_timeout", "health_failures",
    "balance_abs", "balance_rel", "cache_threshold", "circuit_breaker",
)


@dataclass(frozen=True)
class RouterSetting:
    """One setting as the product spells it (``--max-concurrent-requests``), its default as the
    product documents it (None: none, or not stated) and, for settings its startup log states, the
    pattern whose one group is the value in use."""

    flag: str
    default: str | None = None
    logged: str | None = None  # a regular expression over one startup-log line, group 1 the value


@dataclass(frozen=True)
class RouterRecord:
    """One router product.

    ``prefixes``: metric-name openings that only this product writes (how a /metrics answer names
    it); ``metrics``: quantity -> the family name read for it, and ``lacks``: quantity -> why the
    product has none (together exactly ``QUANTITIES``); ``replica_label``: the label that names the
    replica in its per-replica families; ``settings`` / ``no_settings`` the same for ``SETTINGS``;
    ``worker_list``: the route that lists its replicas (None: it publishes none); ``metrics_port``:
    where its /metrics listens when not on the serving port (a flag, said when /metrics is absent);
    ``evidence``: ``run`` when a test runs the real product, ``recorded`` when only recorded
    evidence (its source, its docs, public reports: ``fixtures/routers/``) holds the record;
    ``docs``: where its names are defined.
    """

    id: str
    display: str
    prefixes: tuple[str, ...]
    metrics: Mapping[str, str]
    lacks: Mapping[str, str]
    replica_label: str | None
    settings: Mapping[str, RouterSetting]
    no_settings: Mapping[str, str]
    worker_list: str | None = None
    metrics_port: str | None = None
    evidence: str = "recorded"
    docs: str = ""

    def names(self, metric: str) -> bool:
        """Whether a metric family name is this product's."""
        return metric.startswith(self.prefixes)

    def flag(self, setting: str) -> str | None:
        """How the product spells a setting; None when it has none."""
        known = self.settings.get(setting)
        return known.flag if known is not None else None
