"""Engine settings in use and where they were read: the lookups every engine-side check shares.

Written once so that "the max_num_seqs in use" means the same thing in every finding: the
startup log first, then the run record, then a vLLM default that is known not to move, then
what the gauges imply. Public through ``doctor.checklib``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from doctor.derive.engine import identify_engine
from doctor.derive.log_facts import LogFacts
from doctor.derive.metrics_window import MetricsWindow
from doctor.engine_metrics.metric_names import FAMILY_BY_KEY
from doctor.engine_metrics.runtime import Reading, between
from doctor.engines.names import VLLM, engine_of_metric
from doctor.evidence import EndpointsEvidence, RunRecord, StreamEvidence
from doctor.model import EvidenceValue


@dataclass
class Setting:
    """An engine setting in use and where it was read.

    ``lower_bound``: the value is a default the engine may exceed (vLLM picks a larger one on some
    hardware), so the setting in use is at least ``value``: ``running >= value`` does not show a
    full batch, and ``value`` must not be quoted as today's setting in a numeric suggestion.
    """

    value: Any
    source: str
    lower_bound: bool = False
    inferred: bool = False  # read off the engine's behaviour (a gauge), not its configuration

    def evidence(self, name: str, unit: str = "") -> EvidenceValue:
        return EvidenceValue(name, self.value, unit, self.source)

    def current(self) -> str:
        """The value as a remediation's ``current`` text: a lower bound says so, never a bare number."""
        if self.lower_bound:
            return f"at least {self.value} (vLLM's default for this GPU class)"
        return f"{self.value} (inferred: {self.source})" if self.inferred else str(self.value)


#: vLLM defaults that have not changed across versions, used when the log's ``non-default args``
#: line was read and does not name the setting (vLLM prints every argument that differs).
STABLE_DEFAULTS: dict[str, Any] = {"gpu_memory_utilization": 0.9}


def engine_setting(name: str, log_facts: LogFacts | None, run: RunRecord | None = None) -> Setting | None:
    """The value of a log-fact key (``max_num_seqs``, ``kv_cache_tokens``, ...), the log first.

    The startup log says what the engine actually resolved; the run record's ``engine_config``
    (filled by the collector, or by hand for an offline bundle) is the fallback; a stable vLLM
    default is the last resort when the log's ``non-default args`` line was read without it.
    """
    if log_facts is not None:
        fact = log_facts.facts.get(name)
        if fact is not None and fact.value is not None:
            where = f"log line {fact.line}" if fact.line is not None else f"log ({log_facts.source or 'startup'})"
            return Setting(fact.value, where)
    if run is not None and run.engine_config.get(name) is not None:
        return Setting(run.engine_config[name], "run record: engine_config")
    args = log_facts.facts.get("non_default_args") if log_facts is not None else None
    if args is not None and name in STABLE_DEFAULTS:
        return Setting(STABLE_DEFAULTS[name], f"vLLM default (absent from non-default args, log line {args.line})")
    return None


#: ``vllm serve``'s V1 default for max_num_seqs when it is not set: 128 on CPU builds (0.32), and on
#: GPUs 256, or more on large-memory GPUs in recent releases (1024 on cards with >= 70 GiB): 256 is
#: a lower bound there (``Setting.lower_bound``).
V1_SERVE_MAX_NUM_SEQS = {"CPU": 128, "GPU": 256}


def default_max_num_seqs(log_facts: LogFacts | None) -> Setting | None:
    """max_num_seqs when a V1 log's non-default args were read without it (vLLM then logs no value)."""
    if log_facts is None or log_facts.value("engine_generation") != "V1":
        return None
    args = log_facts.facts.get("non_default_args")
    device = log_facts.value("kv_cache_device")
    if args is None or device not in V1_SERVE_MAX_NUM_SEQS:
        return None
    bound = device != "CPU"
    return Setting(V1_SERVE_MAX_NUM_SEQS[device],
                   f"vLLM V1 serve default on {device}{', a lower bound' if bound else ''} "
                   f"(absent from non-default args, log line {args.line})", lower_bound=bound)


def max_num_seqs_stated(log_facts: LogFacts | None, run: RunRecord | None = None) -> Setting | None:
    """max_num_seqs as the log or run record gives it, else ``vllm serve``'s V1 default for the
    device: what was set, never read off the gauges (adapters taking turns in LoRA slots hold
    ``running`` flat below the limit, as a full batch holds it at the limit)."""
    return engine_setting("max_num_seqs", log_facts, run) or default_max_num_seqs(log_facts)


def max_num_seqs_in_use(log_facts: LogFacts | None, run: RunRecord | None = None,
                        metrics_window: MetricsWindow | None = None, *, kv_headroom: float = 0.8) -> Setting | None:
    """``max_num_seqs_stated``, else what the gauges imply (``inferred_max_num_seqs``)."""
    return (max_num_seqs_stated(log_facts, run)
            or (inferred_max_num_seqs(metrics_window, kv_headroom) if metrics_window is not None else None))


#: Samples of the running gauge, taken while requests waited, that must agree before its level is
#: read as the batch limit.
MIN_FLAT_SAMPLES = 3


def inferred_max_num_seqs(mw: MetricsWindow, kv_headroom: float = 0.8) -> Setting | None:
    """The batch limit the gauges imply without a startup log: ``running`` flat at N in every sample
    taken while requests waited, with the KV cache below ``kv_headroom``. Requests queue beside free
    memory only at a sequence limit, and the engine fills up to that limit, so N is it."""
    if mw.running is None or mw.waiting is None:
        return None
    waiting = {sample[0]: sample[1] for sample in mw.waiting.samples}  # [t, value] pairs
    levels = [v for t, v in mw.running.samples if waiting.get(t, 0.0) > 0]
    kv_max = mw.kv_usage.max if mw.kv_usage is not None else None
    if len(levels) < MIN_FLAT_SAMPLES or len(set(levels)) != 1 or levels[0] <= 0:
        return None
    if kv_max is not None and kv_max >= kv_headroom:
        return None
    n = int(levels[0])
    return Setting(n, f"running flat at {n} in {len(levels)} scrapes while requests waited, KV usage "
                      f"<= {kv_max * 100:.0f} %" if kv_max is not None else
                      f"running flat at {n} in {len(levels)} scrapes while requests waited", inferred=True)


def model_len(
    log_facts: LogFacts | None, run: RunRecord | None, endpoints: EndpointsEvidence | None
) -> Setting | None:
    """``max_model_len`` from the log / run record, else what /v1/models reports."""
    found = engine_setting("max_model_len", log_facts, run)
    if found is not None or endpoints is None:
        return found
    for ep in endpoints.endpoints:
        for model in ep.models:
            if model.max_model_len:
                return Setting(model.max_model_len, f"{ep.role} /v1/models")
    return None


def engine_of(log_facts: LogFacts | None, metrics_window: MetricsWindow | None = None,
              endpoints: EndpointsEvidence | None = None) -> str:
    """The engine that served (``vllm``, ``sglang``, ...; ``UNKNOWN`` when nothing tells), by the
    ``engine`` view's rule (``doctor.derive.engine``) on what the caller holds: a built-in check
    names the view itself, so that every finding of a run names the same engine."""
    return identify_engine(log_facts, metrics_window, endpoints).id


def metric_read(mw: MetricsWindow | None, key: str) -> str:
    """The metric a window field was read from (``sglang:num_retracted_requests`` for
    ``preemptions`` on SGLang), else the serving engine's own name for it, else vLLM's newest:
    what an evidence source or a verify text names, so that it names the metric the engine that
    served exposes."""
    engine = mw.engine_kind if mw is not None else None
    return engine_metric(key, engine, mw) or FAMILY_BY_KEY[key].names[0]


def engine_metric(key: str, engine: str | None, mw: MetricsWindow | None = None) -> str | None:
    """The metric of a window field on ``engine``: the one the window read, else the engine's
    own name for it (vLLM's when ``engine`` is None); ``None`` when the engine exposes none
    (llama.cpp and TGI count no preemption) or is unidentified, so that a verify text leaves that
    metric out."""
    read = mw.metric_names.get(key) if mw is not None else None
    if read:
        return read
    wanted = engine or VLLM
    return next((name for name in FAMILY_BY_KEY[key].names if engine_of_metric(name) == wanted), None)


_OFF = ("false", "0", "off", "no", "none", "disabled")


def is_off(value: Any) -> bool:
    """A flag value that means off, whether the log printed a bool, a number or a word."""
    return value is False or str(value).strip().lower() in _OFF


def foreign_prompt_tokens(stream: StreamEvidence, mw: MetricsWindow | None) -> float | None:
    """Prompt tokens /metrics counted in the window beyond the probe's own, when they outnumber
    them: other users' prompts the engine prefilled meanwhile (a frozen stream's cause, LD202; a
    slow first request's, LD103). None without the window's prompt-token count or the probe's
    usage trailers (what it sent itself)."""
    if mw is None or mw.prompt_tokens is None:
        return None
    own = [r.prompt_tokens for r in stream.requests if r.prompt_tokens is not None]
    if not own:
        return None
    foreign = mw.prompt_tokens - sum(own)
    return foreign if foreign > sum(own) else None


def process_cores(series: Sequence[Reading]) -> tuple[float, float] | None:
    """The serving process's CPU over the window, as (cores, seconds): ``process_cpu_seconds_total``
    from its first to its last reading (vLLM exports its API server's). None with fewer than two
    readings of it: the engine's /metrics does not expose it."""
    cpu = [(r.t, r.cpu_s) for r in series if r.cpu_s is not None]
    if len(cpu) < 2 or cpu[-1][0] <= cpu[0][0]:
        return None
    (t0, c0), (t1, c1) = cpu[0], cpu[-1]
    return max(c1 - c0, 0.0) / (t1 - t0), t1 - t0


def prompt_tokens_around(series: Sequence[Reading], stream: StreamEvidence, start: float, end: float) -> float | None:
    """Did a prompt arrive during ``[start, end]``: the prompt tokens the engine prefilled between the
    scrapes that bracket it, beyond the probe's own (its requests whose first token came inside that
    bracket, from their usage trailers); 0 when none did. None when no two scrapes bracket it: the
    caller weighs the unknown (LD202 counts such a freeze as prompted, LD210 as quiet)."""
    grew = between(series, start, end, lambda r: r.prompt_tokens)
    if grew is None:
        return None
    first = [r.t for r in series if r.t <= start][-1], next(r.t for r in series if r.t >= end)
    own = sum(r.prompt_tokens or 0 for r in stream.requests
              if r.t_first_token is not None and first[0] <= r.t_first_token <= first[1])
    return max(grew - own, 0.0)
