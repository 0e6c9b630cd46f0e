"""The configuration an engine states in its /metrics, beside the readings: KV capacity, limits.

Engines publish a few settings as gauges or info labels, so a saved scrape can give what a log
would: vLLM ``vllm:cache_config_info{block_size, num_gpu_blocks}``, SGLang ``sglang:max_total_num_tokens``,
Triton's TensorRT-LLM backend one gauge family per kind with the kind as a label
(``nv_trt_llm_request_metrics{request_type="max"}``). Each engine's record names its own
(``capacity_gauges``, ``capacity_info``, ``capacity_labelled``, ``doctor.engines``) and their source.
Read with prometheus_client's parser, as every scrape is (``metric_families``: its lines bounded
first), each number bounded (``doctor.foundation.wire.number``).
"""

from __future__ import annotations

from typing import Any

from doctor.engine_metrics.metric_names import metric_families
from doctor.engines import RECORDS
from doctor.foundation.wire import number

#: Each engine's settings in its /metrics (``EngineRecord.capacity_*``): gauge -> fact; info metric
#: -> its (block size, block count) labels; (family, label, value) -> fact.
_GAUGES = {name: fact for r in RECORDS for name, fact in r.capacity_gauges.items()}
_INFO_LABELS = {name: labels for r in RECORDS for name, labels in r.capacity_info.items()}
_LABELLED = {key: fact for r in RECORDS for key, fact in r.capacity_labelled.items()}
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
