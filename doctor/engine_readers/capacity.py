"""The configuration an engine states in its /metrics, beside the readings: KV capacity, limits.

Engines publish a few settings as gauges or info labels, so a saved scrape can give what a log
would: vLLM ``vllm:cache_config_info{block_size, num_gpu_blocks}``, SGLang
``sglang:cache_config_info{page_size, num_pages}`` or
``sglang:max_total_num_tokens`` (and, in builds of late 2024, ``sglang:max_running_requests`` and
``sglang:context_len``), trtllm-serve ``trtllm_kv_cache_max_blocks`` x
``trtllm_kv_cache_tokens_per_block``, TGI ``tgi_batch_max_total_tokens`` (its KV budget, the
``Setting max batch total tokens`` of its log; ``backends/v3/src/lib.rs``, TGI PR #2595, 2024-10),
and Triton's TensorRT-LLM backend one gauge family per kind with the kind as a label
(``nv_trt_llm_request_metrics{request_type="max"}``, ``nv_trt_llm_kv_cache_block_metrics
{kv_cache_block_type="max"|"tokens_per"}``, ``inflight_batcher_llm`` backend since Triton 23.11).
Read with prometheus_client's parser, as every scrape is (``metric_families``: its lines bounded
first), each number bounded (``doctor.wire.number``).
"""

from __future__ import annotations

from typing import Any

from doctor.vllm_metrics.names import metric_families
from doctor.wire import number

_GAUGES = {
    "sglang:max_total_num_tokens": "kv_cache_tokens",
    "sglang:max_running_requests": "max_running_requests",
    "sglang:context_len": "max_model_len",
    "sglang:max_prefill_tokens": "max_prefill_tokens",
    "tgi_batch_max_total_tokens": "kv_cache_tokens",
    "trtllm_kv_cache_max_blocks": "num_blocks",
    "trtllm_kv_cache_tokens_per_block": "block_size",
}

#: Info metrics that carry the KV pool as labels: (block size label, block count label). SGLang
#: before v0.5.11 states its pool only so (``sglang:cache_config_info{page_size, num_pages}``,
#: ``srt/metrics/collector.py``; the gauges of ``max_total_num_tokens`` came later).
_INFO_LABELS = {
    "vllm:cache_config_info": ("block_size", "num_gpu_blocks"),
    "sglang:cache_config_info": ("page_size", "num_pages"),
}

#: Settings carried as a label value of one family: (family, label, value) -> neutral fact.
_LABELLED = {
    ("nv_trt_llm_request_metrics", "request_type", "max"): "max_running_requests",
    ("nv_trt_llm_kv_cache_block_metrics", "kv_cache_block_type", "max"): "num_blocks",
    ("nv_trt_llm_kv_cache_block_metrics", "kv_cache_block_type", "tokens_per"): "block_size",
}
_LABELS = {(family, label) for family, label, _value in _LABELLED}


def capacity_from_exposition(text: str) -> dict[str, Any]:
    """Neutral facts (``kv_cache_tokens``, ``block_size``, ``max_running_requests``, ...) that
    the exposition states; empty when it states none or does not parse."""
    out: dict[str, Any] = {}
    try:
        for family in metric_families(text):
            for sample in family.samples:
                if sample.name in _INFO_LABELS:
                    _info(out, sample.labels, _INFO_LABELS[sample.name])
                elif ((key := _GAUGES.get(sample.name) or _labelled(sample.name, sample.labels))
                      and (value := number(sample.value, int)) is not None):
                    out.setdefault(key, value)
    except ValueError:  # a syntax error or an overlong line (ExpositionError); the window reports it
        return {}
    if "kv_cache_tokens" not in out and "num_blocks" in out and "block_size" in out:
        out["kv_cache_tokens"] = out["num_blocks"] * out["block_size"]
    return out


def _info(out: dict[str, Any], labels: dict[str, str], names: tuple[str, str]) -> None:
    for label, key in zip(names, ("block_size", "num_blocks"), strict=True):
        if labels.get(label, "").isdigit() and (value := number(labels[label], int)) is not None:
            out.setdefault(key, value)


def _labelled(name: str, labels: dict[str, str]) -> str | None:
    return next((_LABELLED.get((name, label, labels[label])) for family, label in _LABELS
                 if family == name and label in labels), None)
