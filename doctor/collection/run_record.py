"""Complete the run record from what the probes learned (pure; the collector calls it last).

Flags and the config file set provider, region and client location (the collector copies
them before the probes run); the rest comes from the evidence, the most direct source first:

- shape (route, prompt and output tokens, concurrency, requests, warm-up, arrivals): what the
  stream probe recorded it sent, the prompt length measured by the server's usage trailer;
- model, served name and revision: the startup log (``--revision`` among its non-default args),
  else ``/v1/models`` (``root`` is the path or Hugging Face id, ``id`` the served name); a
  revision also from a Hugging Face snapshot path;
- vLLM version and engine configuration: the startup log, else ``/version`` and ``/v1/models``,
  and the limits another engine states about itself (llama.cpp ``/props``, SGLang
  ``/get_server_info``, TGI ``/info``), under the log's keys (``max_num_seqs``...);
- GPU model, count and interconnect: NVML; CPU model and topology: psutil.

Scheduled runs are compared only when these agree, so a field nobody learned stays ``None``
rather than taking a default that would make unlike runs look alike.

Why at collection time, when parsing otherwise waits for analysis (``doctor.derive``): the
record is not a view of the bundle but part of it. It reads what the bundle holds nowhere else:
the collector's request (route, concurrency, requests, warm-up, rate, scenario, ``max_tokens``
and ``--payload``'s, the prompt length asked for, the model wanted, the metrics URL), which
stands in for the stream's shape when no request was sent. And it is what ``compare``,
``--baseline`` and ``watch --history`` match a saved run by (``doctor.runs.compare_runs``), so
it must travel in the file: a bundle read back, or written by an older version, carries the
identity it was measured under. The price, accepted knowingly: the startup log is parsed here
and again by the ``log_facts`` view at analysis, and a parser fixed later leaves the records of
bundles already written as they were, while their checks see the fix.
"""

from __future__ import annotations

import re
import statistics
from typing import Any

from doctor.derive.log_facts import LogFacts, derive_log_facts
from doctor.derive.missing import Missing
from doctor.derive.stream_stats import measured_prompt_tokens
from doctor.engine_readers.normal import FROM_LOG_KEYS
from doctor.engines import server_info
from doctor.evidence import Bundle, ModelInfo, RunRecord
from doctor.probes.plan import CollectConfig

#: Log facts that name the run rather than configure the engine.
_IDENTITY_FACTS = frozenset(
    {"vllm_version", "engine_generation", "model", "served_model_name", "revision", "model_revision"}
)
#: ``.../models--org--name/snapshots/<commit>/``: the Hugging Face cache names the revision served.
_HF_SNAPSHOT = re.compile(r"/snapshots/([0-9a-f]{40})(?:/|$)")


def complete_run_record(bundle: Bundle, config: CollectConfig) -> None:
    """Fill the run record in place from the request shape and what the probes learned."""
    run = bundle.run
    run.metrics_url = config.resolved_metrics_url() if config.metrics else None
    _shape(run, bundle, config)
    _engine(run, bundle, config)
    _machine(run, bundle)


def _shape(run: RunRecord, bundle: Bundle, config: CollectConfig) -> None:
    """The load the probe sent; left empty when no request was sent (no --engine or --gateway)."""
    if not config.targets() and bundle.stream is None:
        return
    shape = bundle.stream.shape if bundle.stream is not None else None
    run.route = shape.route if shape else config.route
    run.concurrency = shape.concurrency if shape else config.concurrency
    run.requests_per_path = shape.requests if shape else config.requests
    run.warmup_per_path = shape.warmup if shape else config.warmup
    rate = shape.rate if shape else config.rate
    run.arrival = f"poisson:{rate:g}/s" if rate else "closed-loop"
    run.scenario = shape.scenario if shape else config.scenario
    run.lengths = shape.lengths if shape else None
    if config.payload is not None:  # the application's own body decides the shape
        run.max_tokens = _first_int(config.payload, "max_tokens", "max_completion_tokens", "max_output_tokens")
        run.prompt_tokens = _measured_prompt_tokens(bundle)
    else:
        run.max_tokens = shape.max_tokens if shape and shape.max_tokens is not None else config.max_tokens
        run.prompt_tokens = _measured_prompt_tokens(bundle) or config.prompt_tokens


def _measured_prompt_tokens(bundle: Bundle) -> int | None:
    """The median prompt length the server counted (usage trailer) over measured requests."""
    if bundle.stream is None:
        return None
    counts = measured_prompt_tokens(bundle.stream)
    return int(statistics.median(counts)) if counts else None


def _engine(run: RunRecord, bundle: Bundle, config: CollectConfig) -> None:
    model = _probed_model(bundle, config.model)
    listed = bundle.endpoints.endpoints if bundle.endpoints else []
    engine_version = next((ep.version for ep in listed if ep.role == "engine" and ep.version), None)
    run.vllm_version = run.vllm_version or engine_version
    if model is not None:
        run.served_model_name = run.served_model_name or model.id
        run.model = run.model or model.root or model.id
        if model.max_model_len is not None:
            run.engine_config.setdefault("max_model_len", model.max_model_len)
    for ep in listed:
        if ep.role == "engine" and ep.engine_info is not None:
            stated = server_info.facts(ep.engine_info.engine, ep.engine_info.fields)
            for name, key in FROM_LOG_KEYS.items():
                if name in stated:
                    run.engine_config.setdefault(key, stated[name])
            run.model = run.model or stated.get("model")
    run.model = run.model or config.model
    facts = _log_facts(bundle)
    if facts is not None:
        run.vllm_version = facts.value("vllm_version") or run.vllm_version
        run.engine_generation = facts.value("engine_generation") or run.engine_generation
        run.model = facts.value("model") or run.model
        run.served_model_name = facts.value("served_model_name") or run.served_model_name
        non_default = facts.value("non_default_args")
        run.model_revision = (
            _known(facts.value("revision"))
            or _known(facts.value("model_revision"))
            or (_known(non_default.get("revision")) if isinstance(non_default, dict) else None)
        )
        for key, fact in facts.facts.items():
            if key not in _IDENTITY_FACTS:
                run.engine_config[key] = fact.value
    if run.model_revision is None:
        for source in (run.model, model.root if model else None):
            match = _HF_SNAPSHOT.search(source or "")
            if match:
                run.model_revision = match.group(1)
                break


def _probed_model(bundle: Bundle, wanted: str | None) -> ModelInfo | None:
    """The ``/v1/models`` entry the probe used (the engine's listing first), else the first listed."""
    if bundle.endpoints is None:
        return None
    listed = [m for ep in sorted(bundle.endpoints.endpoints, key=lambda e: e.role != "engine") for m in ep.models]
    return next((m for m in listed if m.id == wanted), listed[0] if listed else None)


def _log_facts(bundle: Bundle) -> LogFacts | None:
    try:
        return derive_log_facts(bundle)
    except Missing:
        return None


def _machine(run: RunRecord, bundle: Bundle) -> None:
    gpu = bundle.gpu
    if gpu is not None and gpu.available and gpu.devices:
        names = list(dict.fromkeys(d.name for d in gpu.devices if d.name))
        run.gpu_model = ", ".join(names) or None
        run.gpu_count = len(gpu.devices)
        if len(gpu.devices) > 1:
            if any(link.active for link in gpu.nvlinks):
                run.gpu_interconnect = "nvlink"
            elif gpu.topology:
                run.gpu_interconnect = "pcie"
    host = bundle.host
    if host is not None:
        run.cpu_model = host.cpu_model
        run.cpu_topology = _cpu_topology(host.cpu_sockets, host.cpu_count_physical, host.cpu_count_logical)


def _cpu_topology(sockets: int | None, cores: int | None, threads: int | None) -> str | None:
    """``2 sockets x 32 cores, 128 threads``; what is unknown is left out."""
    if not threads:
        return None
    if cores and sockets:
        plural = "s" if sockets > 1 else ""
        return f"{sockets} socket{plural} x {cores // sockets} cores, {threads} threads"
    if cores:
        return f"{cores} cores, {threads} threads"
    return f"{threads} threads"


def _first_int(payload: dict[str, Any], *keys: str) -> int | None:
    for key in keys:
        value = payload.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def _known(value: Any) -> str | None:
    """A logged value, or ``None`` for the ``None`` vLLM prints when the option is unset."""
    return None if value in (None, "None", "") else str(value)
