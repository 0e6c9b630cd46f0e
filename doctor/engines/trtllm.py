"""NVIDIA TensorRT-LLM (``NVIDIA/TensorRT-LLM``): ``trtllm-serve``, and Triton's TensorRT-LLM
backend.

Log phrases from the C++ runtime (``trtGptModelInflightBatching.cpp``, the KV cache manager),
the Python LLM API's ``[TRT-LLM]`` logger, ``_torch/pyexecutor`` (the limits line, the
iteration log) and the Triton backend's ``libtensorrtllm.cc``; metric names from trtllm-serve's
``/prometheus/metrics`` (TensorRT-LLM PR #5785, 2025: its histograms have no prefix, as a real
scrape shows, vllm-project/aibrix#2004), the Gateway API Inference Extension's ``trtllm_``
names and the Triton backend's ``nv_trt_llm_`` families; flags from
``tensorrt_llm/commands/serve.py``.
"""

from __future__ import annotations

from doctor.engines.record import EngineRecord

RECORD = EngineRecord(
    id="tensorrt-llm",
    display="TensorRT-LLM",
    cli="trtllm-serve",
    cli_version="main at 00209af1",
    metric_prefixes=("trtllm_", "nv_trt_llm_"),
    metrics={
        "finished_by_reason": ("trtllm_request_success",),
        "prompt_tokens": ("trtllm_prompt_tokens",),
        "generation_tokens": ("trtllm_generation_tokens",),
        "ttft": ("trtllm_time_to_first_token_seconds", "time_to_first_token_seconds"),
        "queue": ("trtllm_request_queue_time_seconds", "request_queue_time_seconds"),
        "e2e": ("trtllm_e2e_request_latency_seconds", "e2e_request_latency_seconds"),
        "kv_usage": ("trtllm_kv_cache_utilization",),
        "running": ("trtllm_num_requests_running",),
        "waiting": ("trtllm_num_requests_waiting",),
    },
    unprefixed_metrics=("e2e_request_latency_seconds", "time_to_first_token_seconds", "request_queue_time_seconds"),
    capacity_gauges={"trtllm_kv_cache_max_blocks": "num_blocks", "trtllm_kv_cache_tokens_per_block": "block_size"},
    # Triton's backend: one gauge family per kind, the kind a label (``inflight_batcher_llm``, Triton 23.11+)
    capacity_labelled={
        ("nv_trt_llm_request_metrics", "request_type", "max"): "max_running_requests",
        ("nv_trt_llm_kv_cache_block_metrics", "kv_cache_block_type", "max"): "num_blocks",
        ("nv_trt_llm_kv_cache_block_metrics", "kv_cache_block_type", "tokens_per"): "block_size",
    },
    log_markers=(
        "[TensorRT-LLM]",
        "TRTGptModel max",
        "tokens in paged KV cache",
        "[TRT-LLM]",
        "TensorRT LLM version",
        "TensorRT-LLM version",
        '"iterLatencyMS"',  # the executor's per-iteration statistics as JSON
        "host_step_time =",  # the PyTorch backend's iteration log
        "num_scheduled_requests:",  # ... of 2025 (print_iter_log)
        "max_num_requests=",  # trtllm-serve's limits line (_torch/pyexecutor)
        "libtensorrtllm.cc",  # the Triton backend's source file, in its log records
        '"Active Request Count"',  # ... and its batch-manager statistics
    ),
    log_openings=(
        rb"TRTGptModel max|Allocated \d{1,9}\.\d{1,4} GiB for max tokens in paged KV cache"
        rb"|\[MemUsageChange\] Allocated|Number of tokens per block|TensorRT.LLM version|Engine version \d"
        rb"|Using \d{1,12} tokens in paged KV cache|Max KV cache blocks per sequence"
        rb"|\"iterLatencyMS\"|host_step_time = "  # the executor's iteration stats (JSON), the PyTorch backend's iteration log
        rb"|num_scheduled_requests: \d|max_seq_len=\d{1,12}, max_num_requests="  # ... and trtllm-serve's limits
        # the Triton backend's batch-manager statistics (libtensorrtllm.cc)
        rb"|\"(?:Active Request Count|Max Request Count|Tokens per KV cache block|Runtime GPU Memory Usage)\":"
    ),
    # the rest of a Triton backend key a terminal wrapped ("Used KV cache\n blocks":1)
    line_start_openings=(rb" ?blocks\":\d",),
    stats_marks=(b"iterLatencyMS", b"host_step_time = ", b"num_scheduled_requests: ", b'{"Active Request Count":'),
    flags={
        "max_num_seqs": "--max_batch_size",
        "max_num_batched_tokens": "--max_num_tokens",
        "max_model_len": "--max_seq_len",
        "gpu_memory_utilization": "--kv_cache_free_gpu_memory_fraction",
        "enable_chunked_prefill": "--enable_chunked_prefill",
        "pipeline_parallel_size": "--pp_size",
        "tensor_parallel_size": "--tp_size",
    },
    # Its log states running, queued and KV blocks in the executor's iteration statistics (when
    # they are printed), never a preemption count; paused requests are a gauge, not a count.
    not_exposed={"log": frozenset({"preemptions"}), "metrics": frozenset({"preemptions"})},
    gc_freeze=("TRTLLM_SERVER_FREEZE_GC=1", "trtllm-serve's environment"),
)
