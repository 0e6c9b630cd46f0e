"""vLLM: the engine llm-doctor was written against; its log has a parser of its own
(``doctor.engine_readers.vllm``), tuned to every release from 0.1.7, and its metric names are listed across
their renames (``fixtures/vllm-formats/metrics-definitions-by-version.md``, 0.1.7 to 0.33.0).

Its flags are its settings' names (``max_num_seqs`` -> ``--max-num-seqs``, ``vllm serve``'s
``EngineArgs`` fields), so ``flags`` is empty and ``checklib.vllm_flag`` spells them.
"""

from __future__ import annotations

from doctor.engines.record import EngineRecord, Retired

_BY_VERSION = "fixtures/vllm-formats/metrics-definitions-by-version.md"

RECORD = EngineRecord(
    id="vllm",
    display="vLLM",
    cli="vllm serve",
    cli_version="0.12.0",
    metric_prefixes=("vllm:",),
    metrics={
        "preemptions": ("vllm:num_preemptions",),
        "finished_by_reason": ("vllm:request_success",),
        "prompt_tokens": ("vllm:prompt_tokens",),
        "generation_tokens": ("vllm:generation_tokens",),
        "prefix_cache_hits": ("vllm:prefix_cache_hits", "vllm:gpu_prefix_cache_hits"),
        "prefix_cache_queries": ("vllm:prefix_cache_queries", "vllm:gpu_prefix_cache_queries"),
        "ttft": ("vllm:time_to_first_token_seconds",),
        "queue": ("vllm:request_queue_time_seconds", "vllm:time_in_queue_requests"),
        "prefill": ("vllm:request_prefill_time_seconds",),
        "decode": ("vllm:request_decode_time_seconds",),
        "itl": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
        "e2e": ("vllm:e2e_request_latency_seconds",),
        "step_tokens": ("vllm:iteration_tokens_total",),
        "kv_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
        "running": ("vllm:num_requests_running",),
        "spec_draft_tokens": ("vllm:spec_decode_num_draft_tokens",),
        "spec_accepted_tokens": ("vllm:spec_decode_num_accepted_tokens",),
        "spec_drafts": ("vllm:spec_decode_num_drafts",),
        "waiting": ("vllm:num_requests_waiting",),
    },
    capacity_info={"vllm:cache_config_info": ("block_size", "num_gpu_blocks")},
    # What only vLLM prints (the phrases its parser opens on, ``doctor.engine_readers.vllm_patterns``), tried
    # after every other engine's markers, with vLLM's record header: a log none of these nor
    # another engine's marker claims is an unidentified engine's, not vLLM's.
    log_markers=(
        "vLLM API server version", "args: Namespace(", "non-default args", "Maximum concurrency for",
        "KV cache size:", "# GPU blocks:", "GPU blocks: ", "# CUDA blocks:", "Avg prompt throughput:",
        "Using max model len", "vllm cache_config_info", "the current vLLM instance",
    ),
    # The openings of the messages its reader reads (``vllm_patterns``), after its header.
    log_openings=(
        rb"Avg prompt throughput|Prefix cache hit rate: GPU|Sequence group"  # while serving
        rb"|vLLM API server version|[ \t]{0,40}\xe2\x96|args: Namespace|non-default args|Initializing"  # startup markers
        rb"|Using max model len|Chunked prefill|Cudagraph is disabled"
        rb"|# \w+ blocks|(?:GPU|CUDA|cuda) blocks: |Maximum concurrency|Overriding num_gpu_blocks|vllm cache_config_info"
        rb"|Available KV|Auto set|Explicitly set|Loading model weights|Model loading took|Memory profiling"
        rb"|the current vLLM|model weights take|total_gpu_memory|gpu_memory_utilization|non_torch_memory"
        rb"|PyTorch activation|available_kv_cache_memory|Graph capturing|Estimated CUDA graph|CUDA graph"
        rb"|torch\.compile takes|init engine|Capping cudagraph capture sizes"
        rb"|The model's max seq len|To serve at least|Free memory on device|No available memory"
    ),
    stats_marks=(b"throughput:",),
    preemption_marks=(b"preempted by",),
    model_owner="vllm",  # protocol.py ModelCard
    gc_freeze=(("a vLLM release that freezes the heap after start-up (vllm PR#44363); VLLM_GC_DEBUG=1 meanwhile to "
                "time each collection in the log"), "the vLLM version and its environment"),
    # From the metric definitions of each release's wheel (``_BY_VERSION``); vLLM's
    # ``--show-hidden-metrics-for-version`` brings a deprecated one back for one release only.
    retired_metrics={
        "vllm:gpu_cache_usage_perc": Retired("vllm:kv_cache_usage_perc", "0.11.0", "0.12.0",
                                             f"deprecated in 0.9.2 (vllm PR#18354); {_BY_VERSION}"),
        "vllm:cpu_cache_usage_perc": Retired(None, "0.9.0", "0.9.2", _BY_VERSION),
        "vllm:num_requests_swapped": Retired(None, "0.9.0", "0.9.2", f"V0 only; {_BY_VERSION}"),
        "vllm:gpu_prefix_cache_hit_rate": Retired("vllm:prefix_cache_hits / vllm:prefix_cache_queries", "0.9.0", "0.9.2",
                                                  _BY_VERSION),
        "vllm:gpu_prefix_cache_hits": Retired("vllm:prefix_cache_hits", "0.11.0", "0.12.0", _BY_VERSION),
        "vllm:gpu_prefix_cache_queries": Retired("vllm:prefix_cache_queries", "0.11.0", "0.12.0", _BY_VERSION),
        "vllm:time_per_output_token_seconds": Retired("vllm:inter_token_latency_seconds", "0.14.0", "0.17.0", _BY_VERSION),
        "vllm:time_in_queue_requests": Retired("vllm:request_queue_time_seconds", "0.9.0", "0.9.2", _BY_VERSION),
        "vllm:avg_prompt_throughput_toks_per_s": Retired("rate(vllm:prompt_tokens_total[1m])", "0.6.6.post1", "0.7.0",
                                                         _BY_VERSION),
        "vllm:avg_generation_throughput_toks_per_s": Retired("rate(vllm:generation_tokens_total[1m])", "0.6.6.post1",
                                                             "0.7.0", _BY_VERSION),
    },
    front_end_lever=("api_server_count", "2 (more API server processes; one per 2-4 busy cores)",
                     "vllm serve flag --api-server-count"),
)
