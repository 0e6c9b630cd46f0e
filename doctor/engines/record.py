"""What llm-doctor knows about one engine, as one record: how it is recognised, what it exposes,
how it spells each setting.

Every table that lists engines (display names, metric prefixes, log markers, the scanner's
gate, the metric names of each quantity, the flags a remediation names, the self-description
routes, what an engine never exposes) is derived from the records in ``doctor.engines.RECORDS``,
so that adding an engine is one module of this package plus its fixtures (and, when it writes a
log format of its own, its reader in ``doctor.engine_readers``, which ``engine_readers.logs.PARSERS``
names by the record's id).

Pure data: this package imports nothing of the parser packages (``doctor.logscan``,
``doctor.engine_metrics``, ``doctor.engine_readers``), which all import it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: The neutral serving readings (``doctor.engine_readers.normal``): what a periodic stats line or
#: a /metrics gauge gives, and an engine without either never states.
SERVING_FACTS = frozenset({"running", "waiting", "kv_usage", "kv_usage_max", "preemptions"})

#: The neutral limits a log, /metrics or self-description states (``normal.FROM_LOG_KEYS``).
LIMIT_FACTS = frozenset({"kv_cache_tokens", "max_running_requests", "max_model_len", "max_batch_tokens"})


@dataclass(frozen=True)
class SelfReport:
    """The route an engine describes itself on (``GET /props``, ``/get_server_info``, ``/info``),
    the top-level fields kept from its answer (never the rest: secrets, the chat template), and
    how the kept fields read as neutral facts (``doctor.engines.server_info.facts``). ``guess``:
    where the route comes when the probe does not know the engine and tries each in turn, lowest
    first."""

    path: str
    kept: frozenset[str]
    read: Callable[[dict[str, Any]], dict[str, Any]]
    guess: int


@dataclass(frozen=True)
class Retired:
    """A metric an engine no longer exports by default: what replaced it (None: nothing), the last
    release that exported it and the first without it (sampled releases: the removal lies between),
    and where that is recorded. A scaler or dashboard still reading it reads nothing."""

    replacement: str | None
    last_release: str
    first_without: str
    source: str


@dataclass(frozen=True)
class EngineRecord:
    """One engine, everything llm-doctor derives its tables from.

    ``flags``: the vLLM setting a remediation names (``max_num_seqs``) -> the engine's own flag
    as its launcher spells it; a setting absent here reads "not exposed by ENGINE". vLLM's own
    record leaves it empty: its flag is the setting's name (``--max-num-seqs``,
    ``checklib.vllm_flag``). ``cli_version`` is the release whose command line
    ``fixtures/engine-cli/<id>.txt`` records, the one the flags are checked against.

    ``metrics``: ``doctor.engine_metrics.metric_names`` family key -> this engine's metric names for that
    quantity, newest first; ``log_openings`` the alternatives this engine adds to the log
    scanner's gate (bytes joined by ``|``, none leading; bounded repeats only),
    ``line_start_openings`` those tried only at a line's start; ``not_exposed``: per source ("log", "metrics"), the neutral facts the engine
    never states there ("not exposed by ENGINE's log").
    """

    id: str
    display: str
    cli: str  # the launcher a user types: "vllm serve", "python -m sglang.launch_server"
    cli_version: str
    metric_prefixes: tuple[str, ...]
    metrics: Mapping[str, tuple[str, ...]]
    log_markers: tuple[str, ...] = ()
    log_openings: bytes = b""
    line_start_openings: tuple[bytes, ...] = ()
    stats_marks: tuple[bytes, ...] = ()
    preemption_marks: tuple[bytes, ...] = ()
    unprefixed_metrics: tuple[str, ...] = ()
    model_owner: str | None = None  # ``owned_by`` of its ``/v1/models`` entries
    server_header: str | None = None  # a word of its ``Server`` response header
    self_report: SelfReport | None = None
    flags: Mapping[str, str] = field(default_factory=dict)
    not_exposed: Mapping[str, frozenset[str]] = field(default_factory=dict)
    # The settings the engine states in its /metrics (``doctor.engine_readers.capacity``): a gauge
    # -> the fact it states, an info metric -> its (block size, block count) labels, a (family,
    # label, value) -> the fact that series states.
    capacity_gauges: Mapping[str, str] = field(default_factory=dict)
    capacity_info: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    capacity_labelled: Mapping[tuple[str, str, str], str] = field(default_factory=dict)
    # The levers of particular remediations, ``None`` where the engine has none (the check then
    # says "not exposed by ENGINE"): the health check that generates one token (LD105), what
    # freezes the heap after start-up (LD212: lever, where), the front end's process count
    # (LD211: setting, suggested, where).
    generating_check: str | None = None
    # Metrics it exported once and no longer does (name as exposed, counters without ``_total``).
    retired_metrics: Mapping[str, Retired] = field(default_factory=dict)
    gc_freeze: tuple[str, str] | None = None
    front_end_lever: tuple[str, str, str] | None = None
