"""What vLLM prints at startup and while serving, release by release, as patterns.

Each pattern is written from the logger and ``raise`` statements of the PyPI wheels from 0.1.7
to 0.33 (``fixtures/vllm-formats``), so that one pattern covers every wording a fact has had;
the comment above it names the releases. Patterns run on a record's message (the text after
vLLM's header), anchored at its start where vLLM puts the phrase there, so that a user prompt
echoed by a request log cannot forge a fact.

The scanner's gate, which keeps the lines these patterns read, is ``doctor.logscan.gate``; a
message the parser reads must start with one of its openings, vLLM's in its record
(``doctor.engines.vllm``, ``log_openings``; the fixture tests read every log through the gate). The errors every engine's parser reads (``OUT_OF_MEMORY``, ``OTHER_ERROR``) are there too.
"""

from __future__ import annotations

import re

# --- the startup: version, configuration ---------------------------------------------------

# 0.4.0+ "vLLM API server version 0.10.2"; 0.3.3 printed it from api_server.py too.
API_VERSION = re.compile(r"vLLM API server version (?P<version>\d[\w.+-]*)")
# 0.30+ banner drawn with block elements: "▄▄ ▄█ █ ... version 0.32.0", then "... model /path".
# Anchored at the start and reaching the first block element by its complement, so a long run
# of block elements costs one pass, not one pass per element (a search from each of them).
BANNER_VERSION = re.compile(r"^[^\u2580-\u259f]*[\u2580-\u259f].*\bversion (?P<version>\d+\.\d+[\w.+-]*)\s*$")
BANNER_MODEL = re.compile(r"^[^\u2580-\u259f]*[\u2580-\u259f].*\bmodel\s+(?P<model>\S+)\s*$")
# 0.1.7-0.3.3 "Initializing an LLM engine with config: ..."; 0.4.0+ "(v0.4.0)"; 0.6.4-0.7.0 V1
# core.py used the same words; 0.7.2+ "Initializing a V1 LLM engine" / "a V0 LLM engine".
ENGINE_INIT = re.compile(
    r"Initializing an? (?:(?P<generation>V[01]) )?LLM engine(?: \(v(?P<version>[^)\s]+)\))? with config: (?P<config>.*)"
)
# api_server.py 0.3.3 .. 0.20 "args: Namespace(...)"; 0.9+ "non-default args: {...}".
# Xinference 0.x-1.x vllm/core.py, the engine arguments it passes to vLLM as a dict.
WRAPPER_CONFIG = re.compile(r"with following model config: (?P<body>\{.*)")
ARGS_NAMESPACE = re.compile(r"args: Namespace\((?P<body>.*)")
NON_DEFAULT_ARGS = re.compile(r"non-default args: (?P<body>\{.*)")
MAX_MODEL_LEN = re.compile(r"Using max model len (?P<n>\d+)")
# config.py / scheduler.py 0.5+ "Chunked prefill is enabled with max_num_batched_tokens=512."
CHUNKED_PREFILL = re.compile(r"Chunked prefill is enabled with max_num_batched_tokens=(?P<n>\d+)")
# arg_utils.py 0.6 "Chunked prefill is enabled by default for models with max_model_len > 32K."
CHUNKED_PREFILL_DEFAULT = re.compile(r"Chunked prefill is enabled by default")
EAGER_MODE = re.compile(r"Cudagraph is disabled under eager mode")

# --- KV-cache capacity ---------------------------------------------------------------------

# 0.1.7-0.6.6 "# GPU blocks: N, # CPU blocks: M"; 0.7.0-0.11 "# CUDA blocks" / "# cuda blocks"
# (platform name); V1 0.6.4-0.7.3 "# GPU blocks: N" alone. Pasted into a GitHub issue without
# its header, the line starts with "# ", which Markdown takes for a heading and drops: without
# it, only the devices vLLM names there are read.
BLOCKS = re.compile(
    r"(?:# (?P<device>\w+)|(?P<bare>GPU|CUDA|cuda)) blocks: (?P<gpu>\d+)(?:, # CPU blocks: (?P<cpu>\d+))?"
)
# V1 0.8-0.25 "GPU KV cache size: 1,234 tokens"; 0.30+ one line with the concurrency and the
# device ("CPU" on CPU builds, "GPU + host" with offloading in 0.33).
KV_CACHE_SIZE = re.compile(
    r"(?P<device>[A-Za-z]+(?: ?\+ ?[A-Za-z]+)*) KV cache size: (?P<tokens>\d[\d,]*) tokens"
    r"(?:, Maximum concurrency for (?P<length>\d[\d,]*) tokens per request: (?P<x>\d+(?:\.\d+)?)x)?"
)
# 0.6.3+ (own line until 0.25).
CONCURRENCY = re.compile(r"Maximum concurrency for (?P<length>\d[\d,]*) tokens per request: (?P<x>\d+(?:\.\d+)?)x")
OVERRIDE_BLOCKS = re.compile(r"Overriding num_gpu_blocks=(?P<computed>\d+) with num_gpu_blocks_override=(?P<n>\d+)")
CACHE_CONFIG_INFO = re.compile(r"(?:Engine \d+: )?vllm cache_config_info with initialization after num_gpu_blocks is: (?P<n>\d+)")

# --- memory and time of the startup phases --------------------------------------------------

# V1 0.9.2+ "Available KV cache memory: 6.51 GiB".
AVAILABLE_KV = re.compile(r"Available KV cache memory: (?P<gib>\d+(?:\.\d+)?) GiB")
# CPU builds: "Auto set (8.32/18.09) GiB for KV cache on node 0", "Explicitly set (0.01/23.59) GiB ...".
CPU_KV_SET = re.compile(r"(?:Auto|Explicitly) set \((?P<gib>\d+(?:\.\d+)?)/(?P<total>\d+(?:\.\d+)?)\) GiB for KV cache")
# 0.4.0-0.7.3 "Loading model weights took 1.9028 GB" (GiB: divided by 2**30); 0.8.0 "Model
# loading took X GB and Y seconds"; 0.8.5+ "... GiB and ..."; 0.12+ "... GiB memory and ...".
WEIGHTS = re.compile(r"(?:Loading model weights took|Model loading took) (?P<gib>\d+(?:\.\d+)?) Gi?B")
# V0 worker.py 0.6.5-0.10.2, one message over three logged lines.
PROFILING_TIME = re.compile(r"Memory profiling takes (?P<s>\d+(?:\.\d+)?) seconds")
INSTANCE_CAN_USE = re.compile(
    r"the current vLLM instance can use total_gpu_memory \((?P<total>\d+(?:\.\d+)?)GiB\) x "
    r"gpu_memory_utilization \((?P<util>\d+(?:\.\d+)?)\) = (?P<usable>\d+(?:\.\d+)?)GiB"
)
PROFILING_BREAKDOWN = re.compile(
    r"model weights take (?P<weights>\d+(?:\.\d+)?)GiB; non_torch_memory takes (?P<non_torch>\d+(?:\.\d+)?)GiB; "
    r"PyTorch activation peak memory takes (?P<activation>\d+(?:\.\d+)?)GiB; "
    r"the rest of the memory reserved for KV Cache is (?P<kv>\d+(?:\.\d+)?)GiB"
)
# 0.6.5 development builds: a "Memory profiling results:" table, one row per logged line.
PROFILING_ROW = re.compile(
    r"(?P<key>total_gpu_memory|gpu_memory_utilization|the current vLLM instance can use|"
    r"model weights take|non_torch_memory|PyTorch activation peak memory|available_kv_cache_memory)"
    r"\s+(?P<value>\d+(?:\.\d+)?)(?:GiB| seconds)?$"
)
# 0.6.4 one-line results.
PROFILING_064 = re.compile(
    r"Memory profiling results: total_gpu_memory=(?P<total>\d+(?:\.\d+)?)GiB .*?"
    r"kv_cache_size=(?P<kv>\d+(?:\.\d+)?)GiB gpu_memory_utilization=(?P<util>\d+(?:\.\d+)?)"
)
# 0.2.7+ "Graph capturing finished in 5 secs."; 0.6.4+ ", took 0.17 GiB".
GRAPH_CAPTURED = re.compile(r"Graph capturing finished in (?P<s>\d+(?:\.\d+)?) secs?(?:, took (?P<gib>\d+(?:\.\d+)?) GiB)?")
# The engine config's compilation_config: the CUDA-graph capture sizes (a JSON list 0.7-0.11, a
# Python list 0.12+, descending before vllm PR#26016, ascending after) and the largest of them
# ("max_capture_size" until 0.11, "max_cudagraph_capture_size" after). Bounded repeats: a config
# line is one long record.
CAPTURE_SIZES = re.compile(r"""["']cudagraph_capture_sizes["']: ?\[(?P<sizes>[\d, ]{0,4000})\]""")
MAX_CAPTURE_SIZE = re.compile(r"""["']max_(?:cudagraph_)?capture_size["']: ?(?P<n>\d{1,6})""")
# 0.18+ compilation.py: "Capping cudagraph capture sizes from max 512 to 352 to fit Mamba cache blocks ..."
CAPTURE_CAPPED = re.compile(r"Capping cudagraph capture sizes from max (?P<was>\d+) to (?P<n>\d+)")
# The structured-output backend: 0.32 StructuredOutputsConfig(backend='auto', ...), 0.8-0.10
# DecodingConfig(backend='auto', ...), 0.6-0.7 DecodingConfig(guided_decoding_backend='xgrammar', ...).
STRUCTURED_BACKEND = re.compile(
    r"(?:StructuredOutputsConfig|DecodingConfig)\((?:guided_decoding_)?backend='(?P<backend>[\w:-]{1,40})'"
)
GRAPH_ESTIMATE = re.compile(r"Estimated CUDA graph memory: (?P<gib>\d+(?:\.\d+)?) GiB")
GRAPH_POOL = re.compile(r"CUDA graph pool memory: (?P<gib>\d+(?:\.\d+)?) GiB \(actual\)")
# 0.21+ advisory printed when CUDA-graph memory profiling changes the meaning of the flag.
GRAPH_PROFILING_ADVICE = re.compile(
    r"The current --gpu-memory-utilization=(?P<util>\d+(?:\.\d+)?) is equivalent to "
    r"--gpu-memory-utilization=(?P<equivalent>\d+(?:\.\d+)?) without CUDA graph memory profiling"
    r"(?:.*?increase --gpu-memory-utilization to (?P<suggested>\d+(?:\.\d+)?))?"
)
TORCH_COMPILE = re.compile(r"torch\.compile takes (?P<s>\d+(?:\.\d+)?) s in total")
# 0.6.5+ "... took 2.60 seconds"; 0.20+ "... took 61.54 s (compilation: ...)".
INIT_ENGINE = re.compile(r"init engine \(profile, create kv cache, warmup model\) took (?P<s>\d+(?:\.\d+)?) s")

# --- startup errors (searched anywhere: they arrive inside tracebacks and wrappers) --------

# 0.1.7+ V0 and V1: "No available memory for the cache blocks. Try increasing ...".
NO_CACHE_MEMORY = re.compile(r"No available memory for the cache blocks")
# V1 0.7-0.24 "the models's max seq len", 0.25+ "the model's"; GB before 0.8.5.
V1_LEN_EXCEEDS_KV = re.compile(
    r"To serve at least one request with the models?'s? max seq len \((?P<length>\d+)\), "
    r"\((?P<needed>\d+(?:\.\d+)?) Gi?B KV cache is needed, which is larger than the available KV cache "
    r"memory \((?P<available>\d+(?:\.\d+)?) Gi?B\)\.?(?:.*?estimated maximum model length is (?P<estimate>\d+))?"
)
# V0 worker.py 0.4-0.10 raise_if_cache_size_invalid (a paste may have lost "The model's").
V0_LEN_EXCEEDS_KV = re.compile(
    r"max seq len \((?P<length>\d+)\) is larger than the maximum number of tokens "
    r"that can be stored in KV cache \((?P<capacity>\d+)\)"
)
# V1 0.9.2+ "Free memory on device (a/b GiB) on startup is less than desired GPU memory
# utilization (0.9, c GiB)"; 0.14+ names the device; 0.33 "less than the engine's budget ...".
FREE_MEMORY_BELOW = re.compile(
    r"Free memory on device(?: \S+)? \((?P<free>\d+(?:\.\d+)?)/(?P<total>\d+(?:\.\d+)?) GiB\) on startup is less than "
    r"(?:desired GPU memory utilization|the engine's budget[^(]*)\s*\((?P<util>\d+(?:\.\d+)?), (?P<requested>\d+(?:\.\d+)?) GiB\)"
)

# --- while serving -------------------------------------------------------------------------

# V0 scheduler.py 0.5.0-0.10.2; the cumulative count is printed from 0.5.0 on.
PREEMPTION = re.compile(
    r"Sequence group (?P<request>\S+) is preempted by (?:PreemptionMode\.)?(?P<mode>\w+) mode"
    r"(?:.*?total_num_cumulative_preemption=(?P<total>\d+))?"
)
# Stats line: V0 0.1.7-0.11 and V1 0.7.2+ (0.8.5+ "Engine 000: ", DP "2 Engines Aggregated: ").
# The count's digits start where no digit precedes them: unguarded, a search tried "\d+ Engines"
# from every digit of a long run, each try to the run's end (quadratic: 64 KiB of digits, 30 s).
STATS = re.compile(
    r"(?:Engine (?P<engine>\d+): |(?<!\d)(?P<aggregated>\d+ Engines Aggregated): )?"
    r"Avg prompt throughput: (?P<prompt>\d+(?:\.\d+)?) tokens/s, Avg generation throughput: (?P<generation>\d+(?:\.\d+)?) tokens/s"
)
STATS_PART = re.compile(
    r"(?P<queue>Running|Waiting|Swapped|Pending): (?P<reqs>\d+) reqs"
    r"|Preemptions: (?P<preemptions>\d+)"
    r"|(?<![A-Za-z])(?P<device>[A-Za-z]+(?: \+ [A-Za-z]+)?) KV cache usage: (?P<usage>\d+(?:\.\d+)?)%"
    r"|Prefix cache hit rate: (?P<hit>\d+(?:\.\d+)?)%"
)
# V0 0.6.0-0.11 own line after the stats line.
V0_PREFIX_HIT = re.compile(r"Prefix cache hit rate: GPU: (?P<gpu>\d+(?:\.\d+)?)%, CPU: (?P<cpu>\d+(?:\.\d+)?)%")
