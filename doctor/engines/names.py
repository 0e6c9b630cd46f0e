"""The engines llm-doctor reads, how each is named, and how each is recognised.

Recognition is by what an engine cannot help printing: its metric-name prefix (``vllm:``,
``sglang:``, ``llamacpp:``, ``tgi_``, ``trtllm_`` / ``nv_trt_llm_``), a phrase of its startup log,
or its ``server`` response header. Each rule names its source in a comment.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

VLLM, SGLANG, LLAMACPP, TGI, TRTLLM = "vllm", "sglang", "llama.cpp", "tgi", "tensorrt-llm"
#: A log or answer that names no engine llm-doctor knows: its facts keep neutral names and a
#: remediation names the limit, never one engine's flag (a wrong engine is worse than none).
UNKNOWN = "unknown"

#: Engine id -> how a sentence names it.
DISPLAY: dict[str, str] = {
    VLLM: "vLLM",
    SGLANG: "SGLang",
    LLAMACPP: "llama.cpp",
    TGI: "TGI",
    TRTLLM: "TensorRT-LLM",
    UNKNOWN: "an unidentified engine",
}

#: Metric-name prefixes, each engine's own (sglang ``collector.py``, llama.cpp
#: ``tools/server`` ``all_metrics_def``, TGI ``docs/source/reference/metrics.md``,
#: trtllm-serve's Prometheus endpoint, Triton's TensorRT-LLM backend).
METRIC_PREFIXES: tuple[tuple[str, str], ...] = (
    ("vllm:", VLLM),
    ("sglang:", SGLANG),
    ("llamacpp:", LLAMACPP),
    ("tgi_", TGI),
    ("trtllm_", TRTLLM),
    ("nv_trt_llm_", TRTLLM),
)

#: Phrases of a log that only one engine prints, tried in this order on the kept lines.
LOG_MARKERS: tuple[tuple[str, str], ...] = (
    # SGLang: memory_pool.py, scheduler.py, the launch banner of http_server.py
    ("KV Cache is allocated.", SGLANG),
    ("max_total_num_tokens=", SGLANG),
    ("Decode batch", SGLANG),
    ("Prefill batch", SGLANG),
    ("Decode out of memory", SGLANG),  # scheduler.py's retraction on decode OOM
    ("server_args=ServerArgs(", SGLANG),
    ("The server is fired up and ready to roll", SGLANG),
    # llama.cpp: llama-context.cpp, llama-kv-cache.cpp, tools/server
    ("llama_kv_cache", LLAMACPP),
    ("llama_context:", LLAMACPP),
    ("llama_new_context_with_model:", LLAMACPP),
    ("n_slots =", LLAMACPP),
    ("n_ctx_slot", LLAMACPP),
    ("| task -1 | new slot", LLAMACPP),
    ("main] build info |", LLAMACPP),  # the JSON-era server of 2024 (build 3579)
    ('"msg":"initializing slots"', LLAMACPP),  # the server's JSON log lines of early 2024
    ('"msg":"new slot"', LLAMACPP),
    ("] initializing slots |", LLAMACPP),  # ... and its INFO [ function] lines of mid-2024
    ("] new slot |", LLAMACPP),
    ("KV self size", LLAMACPP),  # llama_new_context_with_model's KV line before the llama_context rename
    ("llama_print_timings:", LLAMACPP),  # the timing printout of builds before b3900
    ("llama_perf_context_print:", LLAMACPP),  # ... and after it
    ("print_timing", LLAMACPP),  # tools/server's per-slot timings (``print_timings]``, ``slot print_timing:``)
    # TGI: the router's and the launcher's Rust module paths, its warm-up line
    ("text_generation_router", TGI),
    ("Setting max batch total tokens", TGI),
    ("text_generation_launcher", TGI),
    ("Args {", TGI),  # the launcher's Rust debug print of its arguments, with or without a log prefix
    ("max_batch_prefill_tokens", TGI),  # an argument only TGI has (launcher, /info)
    ("text-generation-router", TGI),  # /info's "router" field
    ("Default `max_", TGI),  # the launcher resolving an unset limit (launcher/src/main.rs)
    ("tokens defaulted to", TGI),  # ... and the v3 router (backends/v3/src/main.rs)
    ("KV-cache blocks:", TGI),  # the v3 shard's warm-up (flash_causal_lm.py)
    # TensorRT-LLM: the C++ runtime's and the Python logger's tags, its executor's lines
    ("[TensorRT-LLM]", TRTLLM),
    ("TRTGptModel max", TRTLLM),
    ("tokens in paged KV cache", TRTLLM),
    ("[TRT-LLM]", TRTLLM),
    ("TensorRT LLM version", TRTLLM),
    ("TensorRT-LLM version", TRTLLM),
    ('"iterLatencyMS"', TRTLLM),  # the executor's per-iteration statistics as JSON
    ("host_step_time =", TRTLLM),  # the PyTorch backend's iteration log
    ("num_scheduled_requests:", TRTLLM),  # ... of 2025 (print_iter_log)
    ("max_num_requests=", TRTLLM),  # trtllm-serve's limits line (_torch/pyexecutor)
    ("libtensorrtllm.cc", TRTLLM),  # the Triton backend's source file, in its log records
    ('"Active Request Count"', TRTLLM),  # ... and its batch-manager statistics
)

#: What only vLLM prints (the phrases its parser opens on, ``doctor.vllm_log.patterns``): a log
#: none of these nor another engine's marker claims is an unidentified engine's, not vLLM's.
VLLM_MARKERS: tuple[str, ...] = (
    "vLLM API server version", "args: Namespace(", "non-default args", "Maximum concurrency for",
    "KV cache size:", "# GPU blocks:", "GPU blocks: ", "# CUDA blocks:", "Avg prompt throughput:",
    "Using max model len", "vllm cache_config_info", "the current vLLM instance",
)

#: vLLM's record header (``INFO 10-14 09:31:02 [file.py:N]``), another engine never prints it.
_VLLM_HEADER = re.compile(r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d")


#: trtllm-serve's ``/prometheus/metrics`` (TensorRT-LLM PR #5785, 2025) names its histograms
#: without a prefix, as a real scrape shows (vllm-project/aibrix#2004, 2026):
#: ``e2e_request_latency_seconds{engine_type="undefined",model_name="undefined"}``.
UNPREFIXED: dict[str, str] = {
    "e2e_request_latency_seconds": TRTLLM,
    "time_to_first_token_seconds": TRTLLM,
    "request_queue_time_seconds": TRTLLM,
}


#: ``owned_by`` of the models an engine's ``/v1/models`` lists (vLLM ``protocol.py`` ModelCard,
#: SGLang ``serving_models``, llama.cpp ``tools/server``); TGI puts the model id there.
MODEL_OWNERS: dict[str, str] = {"vllm": VLLM, "sglang": SGLANG, "llamacpp": LLAMACPP}


def display(engine: str | None) -> str:
    """How a sentence names ``engine``; an id not in ``DISPLAY`` as given, none as vLLM (no
    evidence said otherwise: the probe alone, against an OpenAI route)."""
    return DISPLAY.get(engine or VLLM, engine or "vLLM")


def engine_of_metric(name: str) -> str | None:
    """The engine a metric name belongs to, by its prefix; ``None`` for anyone else's."""
    return next((engine for prefix, engine in METRIC_PREFIXES if name.startswith(prefix)), UNPREFIXED.get(name))


def engine_of_metrics(names: Iterable[str]) -> str | None:
    """The engine most of ``names`` belong to (a scrape also holds process and Python metrics)."""
    counts: dict[str, int] = {}
    for name in names:
        engine = engine_of_metric(name)
        if engine is not None:
            counts[engine] = counts.get(engine, 0) + 1
    return max(counts, key=lambda e: counts[e]) if counts else None


@dataclass(frozen=True)
class LogIdentity:
    """Whose log it is and why: ``engine`` is ``None`` when only vLLM's parser can tell (no marker
    of any engine: its facts decide), ``UNKNOWN`` never here (``doctor.engines.logs`` decides it)."""

    engine: str | None
    why: str


#: Lines read for identification: enough for any startup, bounded for a pasted megabyte.
_IDENTIFY_LINES = 20_000


def identify_log(lines: Iterable[str]) -> LogIdentity:
    """Score every engine by the kept lines that carry one of its markers (``LOG_MARKERS``,
    ``VLLM_MARKERS`` and vLLM's header) and take the one with most; a tie goes to the engine
    whose marker came first. A log of an inference server wrapping vLLM may quote another
    engine's word once; a count, not the first word, says whose lines these are."""
    counts: dict[str, int] = {}
    first: dict[str, str] = {}
    for n, text in enumerate(lines):
        if n >= _IDENTIFY_LINES:
            break
        hit = next(((marker, engine) for marker, engine in LOG_MARKERS if marker in text), None)
        if hit is None and (_VLLM_HEADER.search(text) or any(m in text for m in VLLM_MARKERS)):
            hit = ("vLLM's header or phrases", VLLM)
        if hit is not None:
            counts[hit[1]] = counts.get(hit[1], 0) + 1
            first.setdefault(hit[1], hit[0])
    if not counts:
        return LogIdentity(None, "no line carries a marker of vLLM, SGLang, llama.cpp, TGI or TensorRT-LLM")
    order = list(first)
    engine = max(order, key=lambda e: (counts[e], -order.index(e)))
    return LogIdentity(engine, f"{counts[engine]} line(s) with {display(engine)}'s markers (first: {first[engine]!r})")


def engine_of_headers(headers: Mapping[str, str]) -> str | None:
    """The engine a response's headers name: llama-server sets ``Server: llama.cpp`` as its
    default header (``tools/server``, every release since the server existed). vLLM and SGLang
    both answer ``server: uvicorn`` and TGI sends no header of its own, which name none."""
    server = next((v for k, v in headers.items() if k.lower() == "server"), "")
    return LLAMACPP if "llama.cpp" in server.lower() else None


def engine_of_owner(owned_by: str | None) -> str | None:
    """The engine that lists its models as ``owned_by`` (``MODEL_OWNERS``); ``None`` otherwise."""
    return MODEL_OWNERS.get((owned_by or "").strip().lower())
