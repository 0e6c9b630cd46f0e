"""The phrases of other engines' logs that the log scanner keeps, as pieces of its gate.

``doctor.vllm_log.patterns`` joins ``OPENINGS`` into the scanner's gate, so one streaming scan
keeps the lines of whichever engine wrote the log; the parsers in this package then read only
what was kept. Bytes, bounded repeats only (the gate's rule: it is tried at every position of a
log without headers, and other engines' logs are read with that gate: their lines carry no vLLM
header, and newer SGLang puts a level and a file between its header and the message). Pure data: this module imports nothing, so the scanner can use it.
"""

from __future__ import annotations

#: Message openings (alternatives of one regex group), engine by engine.
OPENINGS = (
    # SGLang (memory_pool.py, scheduler.py, model_runner.py, http_server.py)
    rb"|KV Cache is allocated|Full KV Cache is allocated|SWA KV Cache is allocated|Mamba Cache is allocated"
    rb"|max_total_num_tokens=|max_running_requests is capped|Load weight end|Capture cuda graph end"
    rb"|Capture cuda graph bs \[|Capturing batches \(bs="  # cuda_graph_runner.py's sizes, tqdm's progress
    rb"|server_args=ServerArgs|Prefill batch|Decode batch|KV cache pool is full|Decode out of memory"
    rb"|The server is fired up"
    # llama.cpp llama-server (llama-context.cpp, llama-kv-cache*.cpp, tools/server)
    rb"|llama_kv_cache|llama_context: n_|llama_new_context_with_model: n_|llama_memory_recurrent: size"
    rb"|srv {1,12}init: initializing slots|load_model: initializing|slot {1,12}(?:init|load_model): id|build: \d"
    rb"|main: server is listening|INFO \[ {0,20}main\] build info"
    rb"|llama_print_timings:|llama_perf_context_print:|print_timing"  # timing printouts, old and new
    rb"|\"msg\":\"initializing slots\"|\"msg\":\"new slot\"|\] initializing slots \||\] new slot \|"  # 2024's JSON / INFO [ ] logs
    rb"|KV self size|llama_context: kv_unified"
    # TGI (text_generation_launcher's Args, the router's warm-up)
    rb"|Args \{|Setting max batch total tokens|Model does not support automatic max batch total tokens"
    rb"|text_generation_router[\w:]{0,20}: [\w/.]{1,40}:\d{1,6}: Connected|\"message\":\"Connected\""
    rb"|text-generation-router"  # /info's "router" field, pasted into a report
    # ... its other fields, and those of an Args dump printed over many lines (pretty, or a
    # hard-wrapped JSON record); what the launcher and the v3 router resolve
    rb"|\"?(?:max_(?:concurrent_requests|total_tokens|input_length|input_tokens|batch_prefill_tokens"
    rb"|batch_total_tokens|batch_size)|model_id|model_dtype|num_shard|quantize)\"?: |\"version\": ?\"\d"
    rb"|Default `max_\w{1,40}` to \d|tokens defaulted to \d|KV-cache blocks: \d"
    # TensorRT-LLM (the C++ runtime's TRTGptModel / KV cache manager lines, the Python LLM API)
    rb"|TRTGptModel max|Allocated \d{1,9}\.\d{1,4} GiB for max tokens in paged KV cache"
    rb"|\[MemUsageChange\] Allocated|Number of tokens per block|TensorRT.LLM version|Engine version \d"
    rb"|Using \d{1,12} tokens in paged KV cache|Max KV cache blocks per sequence"
    rb"|\"iterLatencyMS\"|host_step_time = "  # the executor's iteration stats (JSON), the PyTorch backend's iteration log
    rb"|num_scheduled_requests: \d|max_seq_len=\d{1,12}, max_num_requests="  # ... and trtllm-serve's limits
    # the Triton backend's batch-manager statistics (libtensorrtllm.cc), and the pieces of one a
    # terminal wrapped (inside a key: "Used KV cache\n blocks":1)
    rb"|\"(?:Active Request Count|Max Request Count|Tokens per KV cache block|Runtime GPU Memory Usage)\":"
    # Pieces of a record printed over lines, each at a line's start (one alternative, so the gate
    # tries one look-behind per position): an SGLang record a guide wrapped under its message, a
    # pretty-printed TGI Args's Some( value on its own line, the rest of a Triton backend key a
    # terminal wrapped ("Used KV cache\n blocks":1), llama.cpp's ``--version`` output.
    rb"|(?<=\n)(?: {8,40}(?:K size: |max_running_requests=|avail mem=)| {8,12}(?:\d{1,12}|[A-Z]\w{1,20}),(?=\r?\n)"
    rb"| ?blocks\":\d|version: \d{1,6} \()"
)

#: Kept lines of these kinds are bounded apart from the startup lines (``Scanner._buffer_of``),
#: so that a long-running server's stats do not push its startup out.
STATS_MARKS = (b"throughput:", b"throughput (token/s)", b"print_timing", b"llama_perf_context_print", b"iterLatencyMS",
               b"host_step_time = ", b"num_scheduled_requests: ", b'{"Active Request Count":')
PREEMPTION_MARKS = (b"preempted by", b"Retract requests", b"Decode out of memory")
