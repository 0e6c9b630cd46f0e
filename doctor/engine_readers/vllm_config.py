"""The engine's arguments and resolved config, as facts: which printed names are facts
(``CONFIG_KEYS``), which argument values are credentials and never kept (``SECRET_ARG``),
``config_items`` for the ``key=value`` items of a config, ``Namespace`` or non-default-args line, and
``nested_config`` for the facts inside the engine config's nested configs. Apart from the parse loop
because this is the one place that maps vLLM's names, release by release, onto the facts' names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from doctor.engine_readers import vllm_patterns as P  # noqa: N812 - P.NAME reads as "the pattern NAME"
from doctor.engine_readers.vllm_startup import CONFIG, StartupState
from doctor.foundation.wire import number
from doctor.logscan.prefixes import Record
from doctor.logscan.printed_values import literal_value

#: Engine-argument / engine-config names -> fact names (values converted by ``config_items``).
CONFIG_KEYS: dict[str, str] = {
    "model": "model",
    "model_tag": "model",
    "served_model_name": "served_model_name",
    "revision": "revision",
    "dtype": "dtype",
    "max_model_len": "max_model_len",
    "max_seq_len": "max_model_len",  # the engine config's name for it, all releases
    "max_num_seqs": "max_num_seqs",
    "max_num_batched_tokens": "max_num_batched_tokens",
    "gpu_memory_utilization": "gpu_memory_utilization",
    "tensor_parallel_size": "tensor_parallel_size",
    "pipeline_parallel_size": "pipeline_parallel_size",
    "data_parallel_size": "data_parallel_size",
    "enforce_eager": "enforce_eager",
    "enable_prefix_caching": "enable_prefix_caching",
    "enable_chunked_prefill": "chunked_prefill",
    "chunked_prefill_enabled": "chunked_prefill",
    "block_size": "block_size",
    "kv_cache_dtype": "kv_cache_dtype",
    "quantization": "quantization",
    "speculative_config": "speculative_config",
    "speculative_model": "speculative_model",
    "num_speculative_tokens": "num_speculative_tokens",
    "stream_interval": "stream_interval",
    "trust_remote_code": "trust_remote_code",
    "load_format": "load_format",
    "port": "port",
    "swap_space": "swap_space",
    "cpu_offload_gb": "cpu_offload_gb",
    "num_gpu_blocks_override": "num_gpu_blocks_override",
    "kv_cache_memory_bytes": "kv_cache_memory_bytes",
    "max_seq_len_to_capture": "max_seq_len_to_capture",
    "max_cudagraph_capture_size": "max_cudagraph_capture_size",
    "scheduling_policy": "scheduling_policy",
    "async_scheduling": "async_scheduling",
    "enable_expert_parallel": "enable_expert_parallel",
}

# Argument names whose values are credentials; never kept, even in the non-default-args map.
SECRET_ARG = re.compile(r"(?:^|_)(?:key|token|secret|password)$", re.IGNORECASE)


def config_items(state: StartupState, items: Iterable[tuple[str, Any]], record: Record, rank: int) -> None:
    """Facts from ``key=value`` items: printed text (converted here) or values already parsed."""
    for key, raw in items:
        name = CONFIG_KEYS.get(key)
        if name is None:
            continue
        value = literal_value(raw) if isinstance(raw, str) else raw
        if isinstance(value, (int, float)) and not isinstance(value, bool):  # bounded, as every number read
            value = number(value, int) if isinstance(value, int) else number(value)
        if name == "served_model_name" and isinstance(value, (list, tuple)):
            value = value[0] if value else None
        state.set(name, value, record, rank)


def nested_config(state: StartupState, config: str, record: Record) -> None:
    """Facts printed inside the engine config's nested configs, read from the whole text because an
    excerpt often cuts the line inside ``compilation_config`` (its last item, which ``split_items``
    then drops): the CUDA-graph capture sizes, the largest of them, the structured-output backend."""
    if match := P.CAPTURE_SIZES.search(config):
        sizes = sorted({int(n) for n in re.findall(r"\d+", match["sizes"])})
        if sizes:
            state.set("cudagraph_capture_sizes", sizes, record, CONFIG)
            state.set("max_cudagraph_capture_size", sizes[-1], record, CONFIG)
    if match := P.MAX_CAPTURE_SIZE.search(config):
        state.set("max_cudagraph_capture_size", int(match["n"]), record, CONFIG)
    if match := P.STRUCTURED_BACKEND.search(config):
        state.set("structured_outputs_backend", match["backend"], record, CONFIG)

