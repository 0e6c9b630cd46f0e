"""Write the fixture bundles of the capacity / configuration checks (LD401-LD405).

Run ``.venv/bin/python -m tests.support.make_check_fixtures_capacity``. Logs are the real ones
under ``fixtures/logs`` (see its INDEX.md), read by the real log probe, so a fixture holds what
``llm-doctor collect --log`` would keep; settings the log does not print (vLLM logs only
non-default arguments) come from the run record, as for an offline bundle. GPU readings are
written as NVML reports them.
"""

from __future__ import annotations

import sys

from doctor.evidence import GpuDevice, GpuEvidence, GpuProcess, LogEvidence, NvLink, RunRecord
from tests.support import make_check_fixtures_sizing as sizing_fixtures
from tests.support.bundles import bundle, log, real_log, request, stream
from tests.support.write_fixture import write_all, write_case

GIB = 1024**3


def run_with(**engine_config: object) -> RunRecord:
    return RunRecord(tool_version="test", engine_config=dict(engine_config))


def probe(prompt_tokens: int, max_tokens: int):
    ev = stream([request("direct", i, ttft=0.1, gaps=[0.03] * 4, start=i * 1.0) for i in range(2)])
    ev.shape.prompt_tokens, ev.shape.max_tokens = prompt_tokens, max_tokens
    return ev


def gpu(
    *devices: GpuDevice,
    topology: dict[str, str] | None = None,
    nvlinks: list[NvLink] | None = None,
    visible: str | None = None,
) -> GpuEvidence:
    return GpuEvidence(
        available=True,
        driver_version="550.54.15",
        nvml_version="12.550.54.15",
        cuda_visible_devices=visible,
        devices=list(devices),
        topology=topology or {},
        nvlinks=nvlinks or [],
    )


def device(index: int, *, total_gib: float = 79.6, free_gib: float = 7.5, procs: int = 1) -> GpuDevice:
    total, free = int(total_gib * GIB), int(free_gib * GIB)
    processes = [
        GpuProcess(
            pid=4242 + p, name="python3" if p == 0 else "other", used_memory_bytes=(total - free) // procs
        )
        for p in range(procs)
    ]
    return GpuDevice(
        index=index,
        name="NVIDIA H100 80GB HBM3",
        memory_total_bytes=total,
        memory_used_bytes=total - free,
        memory_free_bytes=free,
        processes=processes,
    )


def llama3_8b_h100_log(utilization: float = 0.95, kv_gib: float = 60.73, tokens: int = 497_488,
                       **args: object) -> LogEvidence:
    """Startup lines in vLLM 0.32's format (synthetic values) of Llama-3-8B on an H100 at ``utilization``."""
    args = {"model_tag": "meta-llama/Meta-Llama-3-8B", "model": "meta-llama/Meta-Llama-3-8B",
            "gpu_memory_utilization": utilization, "max_model_len": 8192, **args}
    return log([
        f"(APIServer pid=7) INFO 11-30 05:37:29 [api_utils.py:286] non-default args: {args!r}",
        f"(EngineCore_DP0 pid=9) INFO 11-30 05:38:37 [gpu_worker.py:298] Available KV cache memory: {kv_gib:.2f} GiB",
        (f"(EngineCore_DP0 pid=9) INFO 11-30 05:38:37 [kv_cache_utils.py:2327] GPU KV cache size: {tokens:,} tokens, "
         f"Maximum concurrency for 8,192 tokens per request: {tokens / 8192:.2f}x"),
    ])


def cases_kv_capacity_short() -> None:
    name = "kv-capacity-short"
    override = real_log("startup-0.32.0-cpu-num-gpu-blocks-override-32.log")
    write_case(
        name,
        "fires-real-log-requests-do-not-fit",
        bundle(log=override, run=run_with(max_num_seqs=8), stream=probe(512, 512)),
        why="Real vLLM 0.32.0 log with --num-gpu-blocks-override 32: 4,096 KV tokens, max_model_len 2,048 "
        "(Maximum concurrency 2.00x); max_num_seqs 8 from the run record; the probe sends 512 + 512 "
        "tokens: 4 fit, 8 admitted.",
        expect={"severity": "warning", "setting": "max_num_seqs", "summary_contains": ["4,096", "8 x"]},
    )
    write_case(
        name,
        "fires-real-log-full-length-only",
        bundle(log=override, run=run_with(max_num_seqs=8)),
        why="Same log, no probe: only the full-length arithmetic (2 of 8 fit) is known: info.",
        expect={"severity": "info", "setting": "max_num_seqs"},
    )
    default = real_log("startup-0.32.0-cpu-default.log")
    write_case(
        name,
        "quiet-real-log-default",
        bundle(log=default, run=run_with(max_num_seqs=256)),
        why="Real vLLM 0.32.0 default startup: 4,361,088 KV tokens for max_model_len 8,192 (532x) "
        "against max_num_seqs 256.",
    )
    write_case(
        name,
        "quiet-real-log-cpu-default-max-num-seqs",
        bundle(log=default),
        why="Real default log: max_num_seqs is absent from the non-default args, so vllm serve's CPU "
        "default 128 applies; 532 full-length requests fit.",
    )
    write_case(
        name,
        "fires-real-log-cpu-default-max-num-seqs",
        bundle(log=override),
        why="Real override log, no run record: the CPU default max_num_seqs 128 against 2 full-length "
        "requests that fit (the real-vLLM kv-pressure stage hit exactly this).",
        expect={"setting": "max_num_seqs", "summary_contains": ["max_num_seqs 128"]},
    )
    write_case(
        name,
        "fires-real-vllm-with-model-config",
        bundle(log=sizing_fixtures.realvllm_startup("kv-pressure"), model_config=sizing_fixtures.config("tiny-llama-realvllm"),
               stream=probe(208, 512)),
        why="Real vLLM 0.32.0 kv-pressure log (--kv-cache-memory-bytes 32M: 4,096 tokens, CPU default max_num_seqs "
        "128) with the stage's tiny model config (--model-dir): the remediation adds that an fp8 KV cache holds "
        "8,192 tokens in the same 32 MiB, 2.0x the sequences.",
        expect={"setting": "max_num_seqs", "summary_contains": ["4,096"]},
    )
    sglang = real_log("sglang/v0.5.4.post3-issue12726-startup-kv-graph-limits.log", folder="engines")
    write_case(
        name,
        "fires-real-sglang-log-full-length",
        bundle(log=sglang),
        why="Real SGLang 0.5.4.post3 startup (sgl-project/sglang#12726): a KV pool of 421,472 tokens, "
        "max_running_requests 48 and context_len 40,960: 10 full-length requests fit, 48 are admitted; the "
        "remediation names SGLang's --max-running-requests.",
        expect={"severity": "info", "setting": "max_num_seqs", "summary_contains": ["421,472"]},
    )
    write_case(
        name,
        "na-max-num-seqs-unknown",
        bundle(log=log([
            "INFO 07-25 10:00:00 [kv_cache_utils.py:2146] GPU KV cache size: 1,823,372 tokens",
            "INFO 07-25 10:00:00 [kv_cache_utils.py:2147] Maximum concurrency for 1,048,576 tokens per request: 1.74x",
        ])),
        why="A pasted excerpt with the KV lines only: no args line, so neither max_num_seqs nor its "
        "default is known.",
    )


def cases_chunked_prefill_config() -> None:
    name = "chunked-prefill-config"
    v0 = ["INFO 09-10 12:00:00 api_server.py:495] vLLM API server version 0.5.4"]
    args = (
        "INFO 09-10 12:00:00 api_server.py:496] args: Namespace(host=None, port=8000, "
        "model='meta-llama/Llama-3.1-8B-Instruct', max_model_len=8192, enable_chunked_prefill={chunked}, "
        "max_num_batched_tokens={batched}, max_num_seqs=256, gpu_memory_utilization=0.9)"
    )
    write_case(
        name,
        "fires-v0-args-small-step",
        bundle(log=log([*v0, args.format(chunked=False, batched=2048)])),
        why="vLLM 0.5.4-format args line (synthetic values): chunked prefill off, max_num_batched_tokens "
        "2048 < max_model_len 8192.",
        expect={"severity": "warning", "setting": "max_num_batched_tokens", "summary_contains": ["2,048"]},
    )
    write_case(
        name,
        "quiet-v0-args-step-holds-prompt",
        bundle(log=log([*v0, args.format(chunked=False, batched=8192)])),
        why="Same args line with max_num_batched_tokens 8192 = max_model_len.",
    )
    write_case(
        name,
        "quiet-real-log-chunked-on",
        bundle(log=real_log("v0.6.4.post1-issue10537-chunked-prefill-warnings-engine-config.log")),
        why="Real vLLM 0.6.4.post1 log (vllm-project/vllm#10537): chunked prefill on, max_num_batched_tokens "
        "512: a long prompt is split, nothing to flag.",
    )
    write_case(
        name,
        "na-real-log-unknown",
        bundle(log=real_log("v0.6.3-mlcommons2267-tp8-llama3.1-8b-gpu-blocks-max-concurrency.log")),
        why="Real vLLM 0.6.3 excerpt: the chunked-prefill setting is not in it.",
    )


def cases_startup_error() -> None:
    name = "startup-error"
    write_case(
        name,
        "fires-real-log-max-len-exceeds-kv",
        bundle(log=real_log("startup-0.32.0-cpu-FAILED-kv-too-small-for-max-model-len.log")),
        why="Real vLLM 0.32.0 startup that fails: max_model_len 8192 needs 0.02 GiB of KV cache, 0.01 GiB "
        "available; vLLM estimates 3968 fits.",
        expect={"severity": "critical", "setting": "max_model_len", "summary_contains": ["line 75"]},
    )
    write_case(
        name,
        "fires-real-log-no-cache-memory",
        bundle(log=real_log("v0.2.7-qanything302-qwen7b-gpu-blocks-0-no-available-memory.log")),
        why="Real vLLM 0.2.7 log (QAnything#302): # GPU blocks: 0.",
        expect={"severity": "critical", "setting": "gpu_memory_utilization"},
    )
    free = (
        "ERROR 06-01 10:00:00 [core.py:700] ValueError: Free memory on device (14.02/79.19 GiB) on startup is "
        "less than desired GPU memory utilization (0.9, 71.27 GiB). Decrease GPU memory utilization or reduce "
        "GPU memory used by other processes."
    )
    write_case(
        name,
        "fires-memory-below-utilisation",
        bundle(log=log(["INFO 06-01 09:59:50 [api_server.py:1000] vLLM API server version 0.10.0", free])),
        why="The vLLM 0.9.2-0.12 message (doctor's vllm-formats/errors.md) with synthetic numbers: 14.02 of "
        "79.19 GiB free against 0.9 requested -> 0.15.",
        expect={"severity": "critical", "setting": "gpu_memory_utilization"},
    )
    write_case(
        name,
        "quiet-real-log-default",
        bundle(log=real_log("startup-0.32.0-cpu-default.log")),
        why="Real vLLM 0.32.0 default startup that completed (the log probe keeps its startup lines).",
    )
    write_case(
        name,
        "missing-no-log",
        bundle(run=RunRecord(engine_config={"max_num_seqs": 8})),
        why="No startup log (no --log): the run record's engine_config gives settings, never a startup error.",
    )


def cases_tp_without_nvlink() -> None:
    name = "tp-without-nvlink"
    tp2 = real_log("v0.10.2dev-pr24162-serve-tp2-non-default-args-v1-init.log")
    write_case(
        name,
        "fires-real-log-tp2-over-pcie",
        bundle(log=tp2, gpu=gpu(device(0), device(1), topology={"0-1": "PHB"})),
        why="Real vLLM 0.10.2 log (vllm-project/vllm PR #24162) with tensor_parallel_size 2; NVML puts the "
        "two GPUs behind a host bridge (PHB), no active NVLink.",
        expect={"severity": "warning", "setting": "pipeline_parallel_size"},
    )
    linked = [NvLink(gpu=0, link=k, active=True, remote_gpu=1) for k in range(4)]
    write_case(
        name,
        "quiet-real-log-tp2-over-nvlink",
        bundle(log=tp2, gpu=gpu(device(0), device(1), topology={"0-1": "NVLINK"}, nvlinks=linked)),
        why="Same log; the GPUs share four active NVLink links.",
    )
    write_case(
        name,
        "na-real-log-tp1",
        bundle(log=real_log("startup-0.32.0-cpu-default.log"), gpu=gpu(device(0))),
        why="Real vLLM 0.32.0 default startup: tensor_parallel_size 1.",
    )


def cases_gpu_memory_headroom() -> None:
    name = "gpu-memory-headroom"
    util = run_with(gpu_memory_utilization=0.95)
    write_case(
        name,
        "fires-no-headroom-two-processes",
        bundle(run=util, gpu=gpu(device(0, free_gib=0.4, procs=2))),
        why="NVML: 0.4 GiB of 79.6 GiB free (0.5 %), vLLM plus another process on the GPU, "
        "gpu_memory_utilization 0.95 -> 0.92.",
        expect={"severity": "critical", "setting": "gpu_memory_utilization"},
    )
    write_case(
        name,
        "quiet-vllm-default-headroom",
        bundle(run=util, gpu=gpu(device(0, free_gib=7.5))),
        why="NVML: 7.5 GiB of 79.6 GiB free (9 %), what vLLM's default 0.9 leaves.",
    )
    write_case(
        name,
        "fires-with-model-config-kv-cost",
        bundle(log=llama3_8b_h100_log(), gpu=gpu(device(0, free_gib=0.4)), model_config=sizing_fixtures.config("llama-3-8b")),
        why="vLLM 0.32-format startup lines (synthetic values) of Llama-3-8B at gpu_memory_utilization 0.95 with "
        "60.73 GiB of KV cache; NVML: 0.4 GiB of 79.6 GiB free; --model-dir llama-3-8b: 131,072 KV bytes per token, "
        "so 0.95 -> 0.92 gives back 2.39 GiB, about 19,600 tokens.",
        expect={"severity": "critical", "setting": "gpu_memory_utilization", "summary_contains": ["0.4 GiB"]},
    )
    write_case(
        name,
        "na-no-nvml",
        bundle(gpu=GpuEvidence(available=False, reason="NVML Shared Library Not Found")),
        why="A CPU-only host: NVML is not there.",
    )


def cases_fp8_lever() -> None:
    name = "fp8-lever"
    llama = sizing_fixtures.config("llama-3-8b")
    write_case(
        name,
        "fires-llama-3-8b-h100-smaller-card",
        bundle(log=llama3_8b_h100_log(), gpu=gpu(device(0)), model_config=llama),
        why="Llama-3-8B (bfloat16, 131,072 KV bytes per token) with 60.73 GiB of KV cache (497,488 tokens) at "
        "gpu_memory_utilization 0.95 on a 79.6 GiB H100: fp8 halves the bytes per token and frees ~7 GiB of weights "
        "for the cache; the same 497,488 tokens in fp8 plus fp8 weights fit a smaller card of the table.",
        expect={"severity": "info", "setting": "quantization", "summary_contains": ["497,488"]},
    )
    write_case(
        name,
        "fires-real-vllm-fixed-kv-budget",
        bundle(log=sizing_fixtures.realvllm_startup("kv-pressure"), model_config=sizing_fixtures.config("tiny-llama-realvllm")),
        why="Real vLLM 0.32.0 kv-pressure log (--kv-cache-memory-bytes 32M, 4,096 tokens) with the stage's tiny model "
        "config: the budget is fixed by the flag, so fp8 buys the KV cache's 2x only (8,192 tokens); no GPU reading, "
        "no card suggestion.",
        expect={"severity": "info", "setting": "quantization", "summary_contains": ["8,192"]},
    )
    write_case(
        name,
        "quiet-already-fp8",
        bundle(log=llama3_8b_h100_log(tokens=994_976, kv_cache_dtype="fp8"), model_config=sizing_fixtures.config(
                   "llama-3-8b", quantization_config={"quant_method": "fp8", "activation_scheme": "dynamic"})),
        why="An fp8 checkpoint (quantization_config quant_method fp8) served with --kv-cache-dtype fp8: nothing left "
        "to halve.",
    )
    write_case(
        name,
        "na-no-kv-budget",
        bundle(model_config=llama),
        why="--model-dir without a log: no KV cache budget to size against.",
    )


def main() -> None:
    write_all(sys.modules[__name__])


if __name__ == "__main__":
    main()
