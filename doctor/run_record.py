"""Complete the run record from what the probes learned (pure; the collector calls it last).

Flags and the config file set provider, region and client location; the rest comes from the
evidence: model and max_model_len from /v1/models, version and engine configuration from the
log (else /version), GPU model, count and interconnect from NVML, CPU topology from psutil.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from doctor.derive.log_facts import derive_log_facts
from doctor.derive.missing import Missing
from doctor.evidence import Bundle

if TYPE_CHECKING:
    from doctor.collect import CollectConfig


def complete_run_record(bundle: Bundle, config: CollectConfig) -> None:
    run = bundle.run
    run.route = config.route
    run.prompt_tokens = config.prompt_tokens if config.payload is None else None
    run.max_tokens = config.max_tokens
    run.concurrency = config.concurrency
    run.requests_per_path = config.requests
    run.warmup_per_path = config.warmup
    run.arrival = f"poisson:{config.rate}/s" if config.rate else "closed-loop"
    run.metrics_url = config.resolved_metrics_url() if config.metrics else None
    run.model = run.model or config.model
    if bundle.endpoints:
        for ep in bundle.endpoints.endpoints:
            run.vllm_version = run.vllm_version or (ep.version if ep.role == "engine" else None)
            for m in ep.models:
                run.served_model_name = run.served_model_name or m.id
                run.model = run.model or m.root or m.id
                if m.max_model_len is not None:
                    run.engine_config.setdefault("max_model_len", m.max_model_len)
    try:
        facts = derive_log_facts(bundle)
    except Missing:
        facts = None
    if facts is not None:
        run.vllm_version = facts.value("vllm_version", run.vllm_version)
        run.engine_generation = facts.value("engine_generation", run.engine_generation)
        run.model = facts.value("model", run.model)
        for key, fact in facts.facts.items():
            if key not in ("vllm_version", "engine_generation", "model"):
                run.engine_config[key] = fact.value
    if bundle.gpu and bundle.gpu.available and bundle.gpu.devices:
        run.gpu_model = bundle.gpu.devices[0].name
        run.gpu_count = len(bundle.gpu.devices)
        if len(bundle.gpu.devices) > 1:
            run.gpu_interconnect = "nvlink" if any(link.active for link in bundle.gpu.nvlinks) else "pcie"
    if bundle.host:
        run.cpu_model = bundle.host.cpu_model
        if bundle.host.cpu_count_logical:
            run.cpu_topology = (
                f"{bundle.host.cpu_count_physical or '?'} cores, {bundle.host.cpu_count_logical} threads"
            )
