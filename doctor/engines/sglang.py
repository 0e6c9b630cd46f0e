"""SGLang (``sgl-project/sglang``): ``python -m sglang.launch_server``.

Log phrases from ``python/sglang/srt/mem_cache/memory_pool.py``, ``managers/scheduler.py``,
``model_executor/model_runner.py`` and the launch banner of ``entrypoints/http_server.py``;
metric names from ``srt/metrics/collector.py`` (its first collector, PR #1853 of 2024-11, used
``num_requests_running`` / ``_waiting``, ``time_per_output_token_seconds`` and
``waiting_request_latency_seconds``: they follow the newer names); flags from
``srt/server_args.py``; ``/get_server_info`` from ``entrypoints/http_server.py``.
"""

from __future__ import annotations

from typing import Any

from doctor.engines.fields import count, text
from doctor.engines.record import EngineRecord, SelfReport


def _self_report(doc: dict[str, Any]) -> dict[str, Any]:
    """``/get_server_info``: every ``ServerArgs`` field, the scheduler's ``max_total_num_tokens``,
    and per data-parallel scheduler ``internal_states`` (``memory_usage.token_capacity``,
    ``max_running_requests``), preferred to the top-level argument."""
    states = [s for s in doc.get("internal_states") or () if isinstance(s, dict)]
    resolved = [n for s in states if (n := count(s.get("max_running_requests"))) is not None]
    capacity = [n for s in states if isinstance(s.get("memory_usage"), dict)
                and (n := count(s["memory_usage"].get("token_capacity"))) is not None]
    return {
        "version": text(doc.get("version")),
        "kv_cache_tokens": count(doc.get("max_total_num_tokens")) or (capacity[0] if capacity else None),
        "max_running_requests": resolved[0] if resolved else count(doc.get("max_running_requests")),
        "max_model_len": count(doc.get("context_length")),
        "max_batch_tokens": count(doc.get("chunked_prefill_size")),  # -1: chunked prefill off
        "model": text(doc.get("model_path")),
    }


RECORD = EngineRecord(
    id="sglang",
    display="SGLang",
    cli="python -m sglang.launch_server",
    cli_version="0.5.x (2025-26)",
    metric_prefixes=("sglang:",),
    metrics={
        # SGLang counts retracted requests (its preemption: KV pool full, requests sent back to the queue).
        "preemptions": ("sglang:num_retracted_requests",),
        "finished_by_reason": ("sglang:request_success",),
        "prompt_tokens": ("sglang:prompt_tokens",),
        "generation_tokens": ("sglang:generation_tokens",),
        "ttft": ("sglang:time_to_first_token_seconds",),
        "queue": ("sglang:queue_time_seconds", "sglang:waiting_request_latency_seconds"),
        "itl": ("sglang:inter_token_latency_seconds", "sglang:time_per_output_token_seconds"),
        "e2e": ("sglang:e2e_request_latency_seconds",),
        # the fullest pool of a hybrid model
        "kv_usage": ("sglang:token_usage",),
        "running": ("sglang:num_running_reqs", "sglang:num_requests_running"),
        "waiting": ("sglang:num_queue_reqs", "sglang:num_requests_waiting"),
    },
    # its KV pool before v0.5.11 only as labels (``collector.py``), then as gauges (late 2024 builds
    # add the limits)
    capacity_gauges={
        "sglang:max_total_num_tokens": "kv_cache_tokens",
        "sglang:max_running_requests": "max_running_requests",
        "sglang:context_len": "max_model_len",
        "sglang:max_prefill_tokens": "max_prefill_tokens",
    },
    capacity_info={"sglang:cache_config_info": ("page_size", "num_pages")},
    log_markers=(
        "KV Cache is allocated.",
        "max_total_num_tokens=",
        "Decode batch",
        "Prefill batch",
        "Decode out of memory",  # scheduler.py's retraction on decode OOM
        "server_args=ServerArgs(",
        "The server is fired up and ready to roll",
    ),
    log_openings=(
        rb"KV Cache is allocated|Full KV Cache is allocated|SWA KV Cache is allocated|Mamba Cache is allocated"
        rb"|max_total_num_tokens=|max_running_requests is capped|Load weight end|Capture cuda graph end"
        rb"|Capture cuda graph bs \[|Capturing batches \(bs="  # cuda_graph_runner.py's sizes, tqdm's progress
        rb"|server_args=ServerArgs|Prefill batch|Decode batch|KV cache pool is full|Decode out of memory"
        rb"|The server is fired up"
    ),
    # a record a guide wrapped under its message
    line_start_openings=(rb" {8,40}(?:K size: |max_running_requests=|avail mem=)",),
    stats_marks=(b"throughput (token/s)",),
    preemption_marks=(b"Retract requests", b"Decode out of memory"),
    model_owner="sglang",  # serving_models
    self_report=SelfReport(
        path="/get_server_info",
        kept=frozenset({"version", "max_total_num_tokens", "max_running_requests", "chunked_prefill_size",
                        "context_length", "model_path", "page_size", "internal_states"}),
        read=_self_report,
        guess=1,
    ),
    flags={
        "max_num_seqs": "--max-running-requests",
        "max_num_batched_tokens": "--chunked-prefill-size",
        "max_model_len": "--context-length",
        "gpu_memory_utilization": "--mem-fraction-static",
        "enable_prefix_caching": "--disable-radix-cache (remove it)",
        "enable_chunked_prefill": "--chunked-prefill-size",
        "enforce_eager": "--disable-cuda-graph (remove it)",
        "max_cudagraph_capture_size": "--cuda-graph-max-bs",
        "max_loras": "--max-loras-per-batch",
        "structured_outputs_config": "--grammar-backend",
        "tool_call_parser": "--tool-call-parser",
        "pipeline_parallel_size": "--pp-size",
        "quantization": "--quantization",
        "tensor_parallel_size": "--tp-size",
        "kv_cache_dtype": "--kv-cache-dtype",
        "stream_interval": "--stream-interval",
    },
    generating_check="GET /health_generate (it runs one generation)",
    gc_freeze=("SGLang's freeze_gc once the server is warm (sglang PR#9241)", "the SGLang server"),
    front_end_lever=("tokenizer_worker_num", "2 (more tokenizer workers)", "SGLang flag --tokenizer-worker-num"),
)
