"""The lab engine's log, in vLLM 0.32's format (fixtures/logs/startup-0.32.0-cpu-default.log).

The lines a diagnosis reads are reproduced with vLLM's prefixes, source locations and number
formats: the ``non-default args`` dict, ``Initializing a V1 LLM engine (v0.32.0) with config:``,
``Chunked prefill is enabled with max_num_batched_tokens=N.``, ``Available KV cache memory``,
the combined ``GPU KV cache size: N tokens, Maximum concurrency for L tokens per request: X.XXx``
line, the server start, and the periodic ``Engine 000: Avg prompt throughput ...`` stats line.
The lab presents itself as a GPU deployment of an 8B Llama (128 KiB of KV per token in bf16).
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import TextIO

from doctor.lab.protocol import VLLM_VERSION
from doctor.lab.scheduler import EngineConfig

KV_BYTES_PER_TOKEN = 32 * 8 * 128 * 2 * 2  # layers x kv heads x head dim x (k, v) x bf16


def _prefix(process: str, level: str, where: str) -> str:
    stamp = time.strftime("%m-%d %H:%M:%S")
    return f"({process} pid={os.getpid()}) {level} {stamp} [{where}] "


class EngineLog:
    """Appends vLLM-format lines to a file; safe to call from the engine loop thread."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._file: TextIO = self.path.open("w", encoding="utf-8")

    def close(self) -> None:
        with self._lock:
            self._file.close()

    def _write(self, lines: list[str]) -> None:
        with self._lock:
            if not self._file.closed:
                self._file.write("".join(line + "\n" for line in lines))
                self._file.flush()

    def startup(self, config: EngineConfig, host: str, port: int) -> None:
        def api(where: str) -> str:
            return _prefix("APIServer", "INFO", where)

        def core(where: str) -> str:
            return _prefix("EngineCore", "INFO", where)

        chunked = (
            f"Chunked prefill is enabled with max_num_batched_tokens={config.max_num_batched_tokens}."
            if config.enable_chunked_prefill
            else "Chunked prefill is disabled."
        )
        args = {"model_tag": config.model, "host": host, "port": port, "model": config.model}
        args.update(config.non_default_args())
        kv_gib = config.kv_cache_tokens * KV_BYTES_PER_TOKEN / (1 << 30)
        concurrency = config.kv_cache_tokens / config.max_model_len
        engine_config = (
            f"model='{config.model}', speculative_config=None, tokenizer='{config.model}', "
            f"skip_tokenizer_init=False, tokenizer_mode=auto, revision=None, trust_remote_code=False, "
            f"dtype=torch.bfloat16, max_seq_len={config.max_model_len}, download_dir=None, load_format=auto, "
            f"tensor_parallel_size=1, pipeline_parallel_size=1, data_parallel_size=1, quantization=None, "
            f"enforce_eager=False, kv_cache_dtype=auto, device_config=cuda, seed=0, "
            f"served_model_name={config.model}, enable_prefix_caching={config.enable_prefix_caching}, "
            f"enable_chunked_prefill={config.enable_chunked_prefill}, pooler_config=None"
        )
        self._write(
            [
                api("api_utils.py:347") + f"version {VLLM_VERSION}  model   {config.model}",
                api("api_utils.py:286") + f"non-default args: {args!r}",
                api("model.py:2152") + f"Using max model len {config.max_model_len}",
                api("scheduler.py:231") + chunked,
                core("core.py:133") + f"Initializing a V1 LLM engine (v{VLLM_VERSION}) with config: {engine_config}",
                _prefix("Worker", "INFO", "gpu_model_runner.py:5088")
                + "Model loading took 14.99 GiB memory and 3.120411 seconds",
                _prefix("Worker", "INFO", "gpu_worker.py:772") + f"Available KV cache memory: {kv_gib:.2f} GiB",
                core("kv_cache_utils.py:2327") + f"GPU KV cache size: {config.kv_cache_tokens:,} tokens, "
                f"Maximum concurrency for {config.max_model_len:,} tokens per request: {concurrency:.2f}x",
                core("core.py:402") + "init engine (profile, create kv cache, warmup model) took 0.01 s",
                api("entry.py:140") + f"Starting vLLM server on http://{host}:{port}",
            ]
        )

    def stats(
        self,
        prompt_tps: float,
        generation_tps: float,
        running: int,
        waiting: int,
        kv_usage: float,
        prefix_hit_rate: float,
    ) -> None:
        self._write(
            [
                _prefix("APIServer", "INFO", "loggers.py:335")
                + f"Engine 000: Avg prompt throughput: {prompt_tps:.1f} tokens/s, "
                f"Avg generation throughput: {generation_tps:.1f} tokens/s, Running: {running} reqs, "
                f"Waiting: {waiting} reqs, GPU KV cache usage: {kv_usage * 100:.1f}%, "
                f"Prefix cache hit rate: {prefix_hit_rate * 100:.1f}%"
            ]
        )
