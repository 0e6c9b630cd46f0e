"""Hugging Face Text Generation Inference (``huggingface/text-generation-inference``):
``text-generation-launcher``.

Log phrases from the launcher's and the router's Rust module paths (``launcher/src/main.rs``
prints its ``Args`` and resolves unset limits; ``backends/v3/src/main.rs``, the v3 shard's
``flash_causal_lm.py``); metric names from ``docs/source/reference/metrics.md``; flags from
``launcher/src/main.rs``; ``/info`` from ``router/src/lib.rs`` ``Info``. TGI prints no periodic
stats line, and its /metrics has no KV usage nor preemption count.
"""

from __future__ import annotations

from typing import Any

from doctor.engines.fields import count, text
from doctor.engines.record import SERVING_FACTS, EngineRecord, SelfReport


def _self_report(doc: dict[str, Any]) -> dict[str, Any]:
    """``/info``: ``max_concurrent_requests``, ``max_total_tokens``, ``version``, ``model_id``, and
    up to 2.2.0 ``max_batch_total_tokens`` (the KV budget) and ``max_batch_prefill_tokens``."""
    return {
        "version": text(doc.get("version")),
        "kv_cache_tokens": count(doc.get("max_batch_total_tokens")),
        "max_running_requests": count(doc.get("max_concurrent_requests")),
        "max_model_len": count(doc.get("max_total_tokens")),
        "max_batch_tokens": count(doc.get("max_batch_prefill_tokens")),
        "model": text(doc.get("model_id")),
    }


RECORD = EngineRecord(
    id="tgi",
    display="TGI",
    cli="text-generation-launcher",
    cli_version="3.3.6",
    metric_prefixes=("tgi_",),
    metrics={
        # TGI's histograms are in seconds without a ``_seconds`` suffix.
        "queue": ("tgi_request_queue_duration",),
        "prefill_forward": ("tgi_batch_forward_duration",),
        # each request's mean time per token, not every gap: a coarser inter-token figure
        "itl": ("tgi_request_mean_time_per_token_duration",),
        "e2e": ("tgi_request_duration",),
        "running": ("tgi_batch_current_size",),
        "waiting": ("tgi_queue_size",),
    },
    # its KV budget, the ``Setting max batch total tokens`` of its log (``backends/v3/src/lib.rs``, PR #2595)
    capacity_gauges={"tgi_batch_max_total_tokens": "kv_cache_tokens"},
    log_markers=(
        "text_generation_router",
        "Setting max batch total tokens",
        "text_generation_launcher",
        "Args {",  # the launcher's Rust debug print of its arguments, with or without a log prefix
        "max_batch_prefill_tokens",  # an argument only TGI has (launcher, /info)
        "text-generation-router",  # /info's "router" field
        "Default `max_",  # the launcher resolving an unset limit (launcher/src/main.rs)
        "tokens defaulted to",  # ... and the v3 router (backends/v3/src/main.rs)
        "KV-cache blocks:",  # the v3 shard's warm-up (flash_causal_lm.py)
        "Runtime environment:",  # --env's build block (launcher/src/env_runtime.rs)
    ),
    log_openings=(
        rb"Args \{|Setting max batch total tokens|Model does not support automatic max batch total tokens"
        rb"|text_generation_router[\w:]{0,20}: [\w/.]{1,40}:\d{1,6}: Connected|\"message\":\"Connected\""
        rb"|text-generation-router"  # /info's "router" field, pasted into a report
        # ... its other fields, and those of an Args dump printed over many lines (pretty, or a
        # hard-wrapped JSON record); what the launcher and the v3 router resolve
        rb"|\"?(?:max_(?:concurrent_requests|total_tokens|input_length|input_tokens|batch_prefill_tokens"
        rb"|batch_total_tokens|batch_size)|model_id|model_dtype|num_shard|quantize)\"?: |\"version\": ?\"\d"
        rb"|Default `max_\w{1,40}` to \d|tokens defaulted to \d|KV-cache blocks: \d"
        rb"|Runtime environment:|Commit sha: [0-9a-f]"  # --env's block (env_runtime.rs)
    ),
    # a pretty-printed Args's ``Some(`` value on its own line
    line_start_openings=(rb" {8,12}(?:\d{1,12}|[A-Z]\w{1,20}),(?=\r?\n)",),
    self_report=SelfReport(
        path="/info",
        kept=frozenset({"version", "model_id", "max_concurrent_requests", "max_total_tokens", "max_input_tokens",
                        "max_input_length", "max_batch_total_tokens", "max_batch_prefill_tokens", "router"}),
        read=_self_report,
        guess=2,
    ),
    flags={
        "max_num_seqs": "--max-concurrent-requests",
        "max_num_batched_tokens": "--max-batch-prefill-tokens",
        "max_model_len": "--max-total-tokens",
        "gpu_memory_utilization": "--cuda-memory-fraction",
        "quantization": "--quantize",
        "tensor_parallel_size": "--num-shard",
        "kv_cache_dtype": "--kv-cache-dtype",
    },
    not_exposed={"log": SERVING_FACTS, "metrics": frozenset({"kv_usage", "kv_usage_max", "preemptions"})},
    generating_check='POST /generate {"inputs": "ping", "parameters": {"max_new_tokens": 1}}',
)
