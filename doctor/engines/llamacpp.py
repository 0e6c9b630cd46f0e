"""llama.cpp's ``llama-server`` (``ggml-org/llama.cpp``).

Log phrases from ``src/llama-context.cpp``, ``src/llama-kv-cache.cpp`` and ``tools/server``
(older builds: ``llama_new_context_with_model``, the JSON lines of early 2024, the ``INFO [ ]``
lines of mid-2024, the timing printouts before and after b3900); metric names from
``tools/server`` ``all_metrics_def``; flags from ``common/arg.cpp``; ``/props`` from
``tools/server`` ``get_props``. llama-server prints no periodic stats line, and its /metrics
has no KV usage, no preemption count and, since #13660, no KV size.
"""

from __future__ import annotations

from typing import Any

from doctor.engines.fields import count, text
from doctor.engines.record import SERVING_FACTS, EngineRecord, SelfReport


def _self_report(doc: dict[str, Any]) -> dict[str, Any]:
    """``/props``: ``total_slots`` (``-np``), ``default_generation_settings.n_ctx`` (one slot's
    context, already divided), ``build_info`` (``b4351-0e70ba68``; ``b0-unknown`` when built outside
    git), ``model_alias`` / ``model_path`` (the 2024 server: ``default_generation_settings.model``)."""
    settings = doc.get("default_generation_settings")
    settings = settings if isinstance(settings, dict) else {}
    build = text(doc.get("build_info"))
    model = text(doc.get("model_alias")) or text(doc.get("model_path")) or text(settings.get("model"))
    return {
        "version": build.split("-", 1)[0] if build and not build.startswith("b0-") else None,
        "max_running_requests": count(doc.get("total_slots")),
        "max_model_len": count(settings.get("n_ctx")),
        "model": model,
    }


RECORD = EngineRecord(
    id="llama.cpp",
    display="llama.cpp",
    cli="llama-server",
    cli_version="b7000 (2025-11)",
    metric_prefixes=("llamacpp:",),
    metrics={
        "prompt_tokens": ("llamacpp:prompt_tokens",),
        "generation_tokens": ("llamacpp:tokens_predicted",),
        "running": ("llamacpp:requests_processing",),
        # llama.cpp defers a request when every slot is busy: its queue.
        "waiting": ("llamacpp:requests_deferred",),
    },
    log_markers=(
        "llama_kv_cache",
        "llama_context:",
        "llama_new_context_with_model:",
        "n_slots =",
        "n_ctx_slot",
        "| task -1 | new slot",
        "main] build info |",  # the JSON-era server of 2024 (build 3579)
        '"msg":"initializing slots"',  # the server's JSON log lines of early 2024
        '"msg":"new slot"',
        "] initializing slots |",  # ... and its INFO [ function] lines of mid-2024
        "] new slot |",
        "KV self size",  # llama_new_context_with_model's KV line before the llama_context rename
        "llama_print_timings:",  # the timing printout of builds before b3900
        "llama_perf_context_print:",  # ... and after it
        "print_timing",  # tools/server's per-slot timings (``print_timings]``, ``slot print_timing:``)
        " - max context: ",  # the server of early 2024: "Available slots:", " -> Slot 0 - max context: 2048"
        '"message":"build info","build":',  # ... and its JSON build record
    ),
    log_openings=(
        rb"llama_kv_cache|llama_context: n_|llama_new_context_with_model: n_|llama_memory_recurrent: size"
        rb"|srv {1,12}init: initializing slots|load_model: initializing|slot {1,12}(?:init|load_model): id|build: \d"
        rb"|main: server is listening|INFO \[ {0,20}main\] build info"
        rb"|llama_print_timings:|llama_perf_context_print:|print_timing"  # timing printouts, old and new
        rb"|\"msg\":\"initializing slots\"|\"msg\":\"new slot\"|\] initializing slots \||\] new slot \|"  # 2024's JSON / INFO [ ] logs
        rb"|KV self size|llama_context: kv_unified"
        rb"|-> Slot \d{1,6} - max context: \d|\"message\":\"build info\",\"build\":\d"  # the server of early 2024
    ),
    line_start_openings=(rb"version: \d{1,6} \(",),  # ``--version`` output
    stats_marks=(b"print_timing", b"llama_perf_context_print"),
    model_owner="llamacpp",
    server_header="llama.cpp",  # its default ``Server`` header, every release since the server existed
    self_report=SelfReport(
        path="/props",
        kept=frozenset({"total_slots", "default_generation_settings", "build_info", "model_alias", "model_path"}),
        read=_self_report,
        guess=0,
    ),
    flags={
        "max_num_seqs": "-np / --parallel",
        "max_num_batched_tokens": "-b / --batch-size",
        "max_model_len": "-c / --ctx-size (split between the slots)",
        "enable_prefix_caching": "--cache-reuse",
        "pipeline_parallel_size": "--split-mode layer",
        "tensor_parallel_size": "--split-mode / --tensor-split",
        "kv_cache_dtype": "--cache-type-k / --cache-type-v",
    },
    not_exposed={
        "log": SERVING_FACTS,
        "metrics": frozenset({"kv_usage", "kv_usage_max", "preemptions", "kv_cache_tokens"}),  # gone since #13660
    },
    generating_check='POST /completion {"prompt": "ping", "n_predict": 1}',
)
