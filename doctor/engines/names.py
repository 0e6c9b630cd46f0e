"""The engines llm-doctor reads, how each is named, and how each is recognised.

Recognition is by what an engine cannot help printing: its metric-name prefix (``vllm:``,
``sglang:``, ``llamacpp:``, ``tgi_``, ``trtllm_`` / ``nv_trt_llm_``), a phrase of its startup log,
or its ``server`` response header. Each rule names its source in a comment.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

VLLM, SGLANG, LLAMACPP, TGI, TRTLLM = "vllm", "sglang", "llama.cpp", "tgi", "tensorrt-llm"

#: Engine id -> how a sentence names it.
DISPLAY: dict[str, str] = {
    VLLM: "vLLM",
    SGLANG: "SGLang",
    LLAMACPP: "llama.cpp",
    TGI: "TGI",
    TRTLLM: "TensorRT-LLM",
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
    # TGI: the router's and the launcher's Rust module paths, its warm-up line
    ("text_generation_router", TGI),
    ("Setting max batch total tokens", TGI),
    ("text_generation_launcher", TGI),
    # TensorRT-LLM: the C++ runtime's and the Python logger's tags, its executor's lines
    ("[TensorRT-LLM]", TRTLLM),
    ("TRTGptModel max", TRTLLM),
    ("tokens in paged KV cache", TRTLLM),
    ("[TRT-LLM]", TRTLLM),
    ("TensorRT LLM version", TRTLLM),
    ("TensorRT-LLM version", TRTLLM),
)


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
    """How a sentence names ``engine``; an unknown id as given, none as vLLM (the default)."""
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


def engine_of_log(lines: Iterable[str]) -> str | None:
    """The engine whose marker appears first in ``lines``; ``None``: none of the others (vLLM's
    own lines are recognised by its parser, which reads every log no other marker claims)."""
    for text in lines:
        for marker, engine in LOG_MARKERS:
            if marker in text:
                return engine
    return None


def engine_of_headers(headers: Mapping[str, str]) -> str | None:
    """The engine a response's headers name: llama-server sets ``Server: llama.cpp`` as its
    default header (``tools/server``, every release since the server existed). vLLM and SGLang
    both answer ``server: uvicorn`` and TGI sends no header of its own, which name none."""
    server = next((v for k, v in headers.items() if k.lower() == "server"), "")
    return LLAMACPP if "llama.cpp" in server.lower() else None


def engine_of_owner(owned_by: str | None) -> str | None:
    """The engine that lists its models as ``owned_by`` (``MODEL_OWNERS``); ``None`` otherwise."""
    return MODEL_OWNERS.get((owned_by or "").strip().lower())
