"""``llm-doctor size MODEL``: weights and KV cache from the model's config, against a budget or a log.

MODEL is a local directory with ``config.json`` or the file itself (never a download). With
``--log`` the log's setup and budget are used (and compared with what the engine reported:
exit 1 when they disagree); otherwise the flags are, and a card (``--gpu``, ``--gpu-memory``) or
``--kv-cache-memory`` adds the capacity. Exit 2 for a config or flag that cannot be used.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass

from doctor.engine_readers.logs import parse_engine_log
from doctor.exit_codes import ExitCode
from doctor.foundation.console import reader_may_leave, warn
from doctor.foundation.errors import UsageError
from doctor.probes.logfile import read_log
from doctor.sizing.against_log import sizing_from_log
from doctor.sizing.architecture import Architecture, ConfigError, load_config_text, parse_architecture
from doctor.sizing.budget import DEFAULT_GPU_MEMORY_UTILIZATION, Budget, budget_from_card, gpu_memory, parse_bytes
from doctor.sizing.kv import DEFAULT_BLOCK_SIZE, kv_element_bytes
from doctor.sizing.model_fit import Setup, size_model
from doctor.sizing.sizing_json import SizingSummary, summary
from doctor.sizing.weights import model_dtype
from reports.sizing_report import print_sizing
from reports.terminal import stdout_console


@dataclass(frozen=True)
class SizeRequest:
    """The ``size`` command's flags in one value, so ``size_document`` runs (and is tested) without the CLI."""

    model: str
    setup: Setup
    gpu: str | None = None
    gpu_memory: str | None = None
    gpu_memory_utilization: float | None = None
    kv_cache_memory: str | None = None
    avg_tokens: int | None = None
    log: str | None = None
    as_json: bool = False


def setup(*, dtype: str | None, kv_cache_dtype: str, tp: int, block_size: int | None, device: str, max_model_len: int | None,
          max_num_batched_tokens: int | None) -> Setup:
    """The flags as a ``Setup``; a value the arithmetic cannot use is a usage error, said before any work."""
    if device not in DEFAULT_BLOCK_SIZE:
        raise UsageError(f"--device must be one of {', '.join(DEFAULT_BLOCK_SIZE)}, not {device!r}")
    for flag, value in (("--tp", tp), ("--block-size", block_size), ("--max-model-len", max_model_len),
                        ("--max-num-batched-tokens", max_num_batched_tokens)):
        if value is not None and value < 1:
            raise UsageError(f"{flag} must be at least 1, not {value}")
    try:
        kv_element_bytes(kv_cache_dtype, "bfloat16")
        model_dtype("bfloat16", dtype)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return Setup(dtype=dtype, kv_cache_dtype=kv_cache_dtype, tp=tp, block_size=block_size, device=device,
                 max_model_len=max_model_len, max_num_batched_tokens=max_num_batched_tokens)


def _architecture(model: str) -> Architecture:
    try:
        path, text = load_config_text(model)
        return parse_architecture(text, str(path))
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


def _budget(req: SizeRequest, arch: Architecture) -> Budget | None:
    if req.kv_cache_memory is not None:
        return Budget(parse_bytes(req.kv_cache_memory), f"--kv-cache-memory {req.kv_cache_memory}")
    if req.gpu is None and req.gpu_memory is None:
        return None
    card = parse_bytes(req.gpu_memory) if req.gpu_memory is not None else gpu_memory(req.gpu or "")
    utilization = req.gpu_memory_utilization if req.gpu_memory_utilization is not None else DEFAULT_GPU_MEMORY_UTILIZATION
    if not 0 < utilization <= 1:
        raise ValueError(f"--gpu-memory-utilization must be in (0, 1], not {utilization}")
    if req.avg_tokens is not None and req.avg_tokens < 1:
        raise ValueError(f"--avg-tokens must be at least 1, not {req.avg_tokens}")
    return budget_from_card(card, utilization, size_model(arch, req.setup).weights_bytes_per_rank)


def size_document(req: SizeRequest) -> tuple[SizingSummary, int]:
    """The summary ``size`` prints and its exit code (1 when a log disagrees with the config)."""
    arch = _architecture(req.model)
    longest, asked = arch.max_position_embeddings, req.setup.max_model_len
    if longest is not None and asked is not None and asked > longest:  # vLLM refuses to start with it
        warn(f"--max-model-len {asked} is beyond the {longest} positions the model was trained for "
             "(max_position_embeddings in its config): unless the config's RoPE scaling extends them, vLLM "
             "refuses it without VLLM_ALLOW_LONG_MAX_MODEL_LEN=1, and answers past that length degrade")
    try:
        if req.log is None:
            return summary(size_model(arch, req.setup, _budget(req, arch), req.avg_tokens)), int(ExitCode.HEALTHY)
        evidence, errors = read_log(req.log)
        if evidence is None:
            raise UsageError(errors[0].message if errors else f"cannot read the log {req.log}")
        sizing, comparison = sizing_from_log(arch, parse_engine_log(evidence.matched, req.log))
    except ValueError as exc:  # a flag value the arithmetic cannot use
        raise UsageError(str(exc)) from None
    doc = summary(sizing, comparison)
    if comparison is None:
        doc["notes"].append(f"the log {req.log} has no KV cache size and budget to compare with")
    return doc, int(ExitCode.SYMPTOM if comparison is not None and not comparison.agrees else ExitCode.HEALTHY)


def run(req: SizeRequest) -> int:
    doc, code = size_document(req)
    with reader_may_leave():
        if req.as_json:
            sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        else:
            print_sizing(doc, stdout_console())
    return code
