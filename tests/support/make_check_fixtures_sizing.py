"""Write the fixture bundles of the sizing check (LD406 kv-cache-size-mismatch).

Run ``.venv/bin/python -m tests.support.make_check_fixtures_sizing``. Model configs are the
ones under ``fixtures/model-configs`` (see fixtures/PROVENANCE.md); logs are real where one
exists for the model (the real-vLLM stage's tiny Llama, Qwen3-14B from LMCache#1739), else
lines in vLLM 0.32's format whose numbers are worked out by hand in each case's ``_why``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from doctor.bundle import load_path
from doctor.evidence import LogEvidence, ModelConfigEvidence
from doctor.probes.logfile import read_log
from tests.support.bundles import bundle, log
from tests.support.write_fixture import write_all, write_case

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "fixtures" / "model-configs"
NAME = "kv-cache-size-mismatch"


def config(name: str, **changes: object) -> ModelConfigEvidence:
    """A fixture config as the probe keeps it; ``changes`` edit it (a config that is not the served model's)."""
    path = CONFIGS / name / "config.json"
    text = path.read_text()
    if changes:
        text = json.dumps({**json.loads(text), **changes})
    return ModelConfigEvidence(source=f"fixtures/model-configs/{name}/config.json", text=text)


def realvllm_startup(scenario: str) -> LogEvidence:
    """The startup lines of a real-vLLM stage bundle's log (its periodic stats lines dropped: size)."""
    evidence = load_path(ROOT / "fixtures" / "bundles" / f"realvllm-{scenario}.json.gz").log
    assert evidence is not None
    evidence.matched = [line for line in evidence.matched if "Engine 000:" not in line.text]
    return evidence


def real_log(name: str) -> LogEvidence:
    evidence, errors = read_log(str(ROOT / "fixtures" / "logs" / name))
    assert evidence is not None and not errors, errors
    evidence.source = f"fixtures/logs/{name}"
    return evidence


def gpu_log(args: dict[str, object], kv_gib: float, tokens: int, max_len: int, concurrency: str) -> LogEvidence:
    shown = {"model_tag": "/srv/models/m", "model": "/srv/models/m", **args}
    return log([
        f"(APIServer pid=7) INFO 11-30 05:37:29 [api_utils.py:286] non-default args: {shown!r}",
        f"(EngineCore pid=9) INFO 11-30 05:38:37 [gpu_worker.py:298] Available KV cache memory: {kv_gib:.2f} GiB",
        (f"(EngineCore pid=9) INFO 11-30 05:38:37 [kv_cache_utils.py:2327] GPU KV cache size: {tokens:,} tokens, "
         f"Maximum concurrency for {max_len:,} tokens per request: {concurrency}"),
    ])


def cases_kv_cache_size_mismatch() -> None:
    write_case(
        NAME, "quiet-real-vllm-1gib",
        bundle(log=realvllm_startup("healthy"), model_config=config("tiny-llama-realvllm")),
        why="Real vLLM 0.32.0 CPU log of the real-vLLM stage (--kv-cache-memory-bytes 1G, max_model_len 1024) "
        "and the stage's tiny Llama config: 8 layers x 4 KV heads x 64 x 2 x bf16 = 8,192 bytes per token; "
        "2**30 // (128 x 1,024) // 8 = 1,024 blocks of 128 = 131,072 tokens, 1,024 / 8 = 128.00x, as logged.",
    )
    write_case(
        NAME, "quiet-real-vllm-32mib",
        bundle(log=realvllm_startup("kv-pressure"), model_config=config("tiny-llama-realvllm")),
        why="Real kv-pressure log (--kv-cache-memory-bytes 32M): 32 blocks of 128 = 4,096 tokens, 4.00x at 1,024.",
    )
    write_case(
        NAME, "quiet-real-qwen3-14b-gpu-rounded-gib",
        bundle(log=real_log("v0.10.2-lmcache1739-qwen3-14b-enginecore-dp0-kv.log"), model_config=config("qwen3-14b")),
        why="Real vLLM 0.10.2 GPU log (LMCache#1739): 6.51 GiB available, 42,656 tokens, 1.30x at 32,768. Qwen3-14B: "
        "40 layers x 8 KV heads x 128 x 2 x bf16 = 163,840 bytes per token; 6.505-6.515 GiB give 2,664-2,668 blocks "
        "of 16 (42,624-42,688 tokens); 2,666 blocks / 2,048 = 1.30x.",
    )
    write_case(
        NAME, "fires-real-vllm-config-not-the-served-model",
        bundle(log=realvllm_startup("healthy"), model_config=config("tiny-llama-realvllm", num_key_value_heads=8)),
        why="The real 1 GiB log against the tiny config edited to 8 KV heads: 16,384 bytes per token give 65,536 "
        "tokens where the engine reports 131,072; kv_cache_dtype fp8 or tensor_parallel_size 2 would give the log's.",
        expect={"severity": "warning", "setting": "kv_cache_dtype", "summary_contains": ["65,536", "131,072", "tensor_parallel_size 2"]},
    )
    write_case(
        NAME, "fires-kv-cache-dtype-fp8-not-in-the-log",
        bundle(log=gpu_log({"max_model_len": 8192}, 20.0, 327_680, 8192, "40.00x"), model_config=config("llama-3-8b")),
        why="Synthetic 0.32-format GPU log: Llama-3-8B (32 layers x 8 KV heads x 128) with 20.00 GiB and kv_cache_dtype "
        "auto (not in the args): bf16 pages are 16 x 8 x 128 x 2 x 2 = 65,536 bytes, 20 x 2**30 // 65,536 // 32 = "
        "10,240 blocks = 163,840 tokens; the log's 327,680 (20,480 blocks, 40.00x) is what an fp8 cache gives.",
        expect={"severity": "warning", "setting": "kv_cache_dtype", "summary_contains": ["163,792-163,872", "327,680", "kv_cache_dtype fp8"]},
    )
    write_case(
        NAME, "quiet-llama-3-70b-tp4",
        bundle(log=gpu_log({"max_model_len": 8192, "tensor_parallel_size": 4}, 30.0, 393_216, 8192, "48.00x"),
               model_config=config("llama-3-70b")),
        why="Synthetic 0.32-format GPU log, TP 4: Llama-3-70B keeps 8 / 4 = 2 KV heads per rank, 80 layers x 2 x 128 x 2 "
        "x 2 = 81,920 bytes per token; 30.00 GiB // (16 x 1,024) // 80 = 24,576 blocks = 393,216 tokens, / 512 = 48.00x.",
    )
    write_case(
        NAME, "fires-concurrency-not-these-blocks",
        bundle(log=gpu_log({"max_model_len": 8192, "tensor_parallel_size": 4}, 30.0, 393_216, 8192, "24.00x"),
               model_config=config("llama-3-70b")),
        why="The TP-4 log with its concurrency changed to 24.00x: 24,576 blocks / 512 per request is 48.00x, so the "
        "tokens agree and the concurrency does not (as a model with another block size or window would print).",
        expect={"severity": "warning", "setting": "--model-dir", "summary_contains": ["24.00x", "48.00x"]},
    )
    write_case(
        NAME, "na-no-kv-memory-in-the-log",
        bundle(log=log([
            "INFO 07-25 10:00:00 [kv_cache_utils.py:2146] GPU KV cache size: 1,823,372 tokens",
            "INFO 07-25 10:00:00 [kv_cache_utils.py:2147] Maximum concurrency for 1,048,576 tokens per request: 1.74x",
        ]), model_config=config("llama-3-8b")),
        why="A pasted excerpt with the KV lines only: the budget the tokens came from is unknown.",
    )
    write_case(
        NAME, "missing-no-model-config",
        bundle(log=realvllm_startup("healthy")),
        why="The real 1 GiB log without --model-dir: nothing to size.",
    )


def main() -> None:
    write_all(sys.modules[__name__])


if __name__ == "__main__":
    main()
