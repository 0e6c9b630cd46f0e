"""Other engines' logs and scrapes: the adapters on real artifacts they were not written against.

Every ``fixtures/engines/`` file is a real excerpt from a public issue or PR (PROVENANCE.md);
each is read the way ``llm-doctor log`` / ``metrics`` read them (the log probe's scanner and gate
first), and the neutral facts of issue 17 are compared with what the artifact states. The
synthetic lines below are in the engines' own formats and say why they are synthetic.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from doctor.bundle import from_dict
from doctor.checklib import engine_flag, engine_of, metric_read
from doctor.commands.log import log_command_output
from doctor.commands.metrics import metrics_command_output
from doctor.derive.engine import identify_engine
from doctor.engine_metrics.views import GaugeWindow, MetricsWindow
from doctor.engine_readers import normal
from doctor.engine_readers.logs import parse_engine_log
from doctor.engines.names import UNKNOWN, engine_of_headers, engine_of_metrics
from doctor.evidence import Bundle, Endpoint, EndpointsEvidence
from doctor.evidence.log import LogLine
from doctor.foundation.errors import UsageError
from doctor.foundation.serial import to_jsonable
from doctor.logscan.parsed import LogFacts

ROOT = Path(__file__).resolve().parents[2]
ENGINES = ROOT / "fixtures" / "engines"


def _log_json(path: Path) -> dict:
    text = log_command_output(str(path), as_json=True).text
    return json.loads(text)


#: file -> the neutral facts it states (each read off the artifact by eye).
LOG_FACTS = {
    "sglang/v0.5.4.post3-issue12726-startup-kv-graph-limits.log": {
        "engine": "sglang", "kv_cache_tokens": 421472, "max_running_requests": 48, "max_model_len": 40960,
        "max_batch_tokens": 8192, "cuda_graph_memory_gib": 0.61, "kv_cache_memory_gib": 57.88,
        "max_cudagraph_capture_size": 48,  # the largest of "Capture cuda graph bs [1, ..., 48]"
    },
    # server_args asked cuda_graph_max_bs=4; the capture's progress began at bs=128, which is what ran
    "sglang/2026-03-docs-offline-engine-server-args-capturing-cut.log": {
        "engine": "sglang", "max_cudagraph_capture_size": 128, "max_loras": 8, "max_running_requests": 128,
    },
    "sglang/2025-12-pr14071-mla-kv-allocated-per-tp-rank.log": {
        "engine": "sglang", "kv_cache_tokens": 60000, "block_size": 1, "kv_cache_memory_gib": 0.13,
    },
    "sglang/2025-03-pr4826-gemma3-tp0-load-kv.log": {
        "engine": "sglang", "kv_cache_tokens": 834615, "kv_cache_memory_gib": 108.24, "weights_memory_gib": 8.13,
    },
    "sglang/2025-04-pr4848-server-args-cut.log": {
        "engine": "sglang", "model": "meta-llama/Llama-3.1-8B-Instruct", "max_batch_tokens": 8192,
        "mem_fraction_static": 0.88, "tensor_parallel_size": 1, "block_size": 1,
    },
    "sglang/2025-12-issue14972-decode-token-usage-0.94-queued.log": {
        "engine": "sglang", "running": 6.0, "waiting": 5.0, "kv_usage": 0.94, "kv_usage_max": 0.94, "preemptions": 0,
    },
    "sglang/2026-05-issue26248-hybrid-full-swa-token-usage.log": {
        "engine": "sglang", "running": 4.0, "waiting": 3.0, "kv_usage": 1.0,  # the fullest pool, as token_usage
    },
    "sglang/2025-09-issue10053-tp0-prefill-decode-batches.log": {
        "engine": "sglang", "running": 0.0, "waiting": 0.0, "kv_usage": 0.0,
    },
    "sglang/2025-03-issue4184-decode-oom-retract-tp8-15-cut.log": {  # three events, each printed by several ranks
        "engine": "sglang", "preemptions": 3,
    },
    "sglang/2026-04-markdown-wrapped-records-qwen2.log": {
        "engine": "sglang", "kv_cache_tokens": 107319, "kv_cache_memory_gib": 1.22, "max_running_requests": 4096,
        "max_batch_tokens": 2048, "weights_memory_gib": 0.98,
    },
    "sglang/2025-01-docs-notebook-kv-k-v-size-no-tokens.log": {  # sizes only; the tokens come in the limits line
        "engine": "sglang", "kv_cache_memory_gib": 54.26, "kv_cache_tokens": 444500, "max_running_requests": 2049,
        "max_model_len": 131072, "running": 1.0, "waiting": 0.0,
    },
    "sglang/time-only-header-limits-48.log": {"engine": "sglang", "kv_cache_tokens": 185897, "max_running_requests": 48},
    "sglang/2025-05-qwen3-limits-context-40960.log": {
        "engine": "sglang", "kv_cache_tokens": 15387, "max_running_requests": 2049, "max_model_len": 40960,
        "max_batch_tokens": 2048,
    },
    "sglang/2025-08-docs-hyperparameter-tuning-limits-line.log": {
        "engine": "sglang", "kv_cache_tokens": 665690, "max_running_requests": 4096, "max_model_len": 65536,
        "max_batch_tokens": 8192,
    },
    "llamacpp/b4351-falcon3-1b-vulkan-startup.log": {
        "engine": "llama.cpp", "version": "b4351", "max_running_requests": 1, "max_model_len": 8192,
        "kv_cache_tokens": 8192, "max_batch_tokens": 2048,
    },
    "llamacpp/2026-pr19408-rocm-kv-unified-4-seqs-part.log": {
        "engine": "llama.cpp", "max_running_requests": 4, "max_model_len": 32768, "kv_cache_tokens": 32768,
        "max_batch_tokens": 2048, "kv_cache_dtype": "f16", "kv_cache_memory_gib": 0.75,
    },
    "llamacpp/b3579-issue9016-build-info-np4-part.log": {"engine": "llama.cpp", "version": "b3579"},
    "llamacpp/b9265-issue23652-new-slot-n_ctx-part.log": {"engine": "llama.cpp", "max_model_len": 1024},
    "llamacpp/2024-03-json-lines-server-c1024.log": {"engine": "llama.cpp", "max_running_requests": 1, "max_model_len": 1024},
    # issue 30 item 11: the server of late 2023 / early 2024 ("Available slots:" then one
    # "-> Slot N - max context: C" per slot, its build in a JSON "build info" record)
    "llamacpp/b1794-2024-01-rankgpt-available-slots-max-context-part.log": {
        "engine": "llama.cpp", "version": "b1794", "kv_cache_tokens": 2048, "max_running_requests": 1,
        "max_model_len": 2048, "kv_cache_memory_gib": 1.0, "kv_cache_dtype": "f16",
    },
    "llamacpp/b3029-json-lines-windows-n_ctx_slot-1536.log": {
        "engine": "llama.cpp", "version": "b3029", "max_running_requests": 1, "max_model_len": 1536,
    },
    "llamacpp/llamafile-2024-10-json-initialize-kv-self-size.log": {
        "engine": "llama.cpp", "max_running_requests": 1, "max_model_len": 2048, "kv_cache_memory_gib": 1.0,
        "kv_cache_dtype": "f16",
    },
    "llamacpp/ik_llama-2025-04-bracketed-info-slots-8192.log": {
        "engine": "llama.cpp", "max_running_requests": 1, "max_model_len": 8192,
    },
    "llamacpp/2026-05-pipe-timestamped-kv-unified-4-seqs-q8.log": {
        "engine": "llama.cpp", "max_running_requests": 4, "max_model_len": 131072, "kv_cache_tokens": 131072,
        "kv_cache_dtype": "q8_0", "kv_cache_memory_gib": 4.25, "max_batch_tokens": 2048,
    },
    "llamacpp/2025-07-lmstudio-debug-split-kv-cache-unified.log": {
        "engine": "llama.cpp", "max_running_requests": 1, "max_model_len": 131072, "kv_cache_tokens": 131072,
        "kv_cache_memory_gib": 18.0, "max_batch_tokens": 512,
    },
    "llamacpp/rocm-n_seq_max-4-kv-unified-no-n_ctx_seq.log": {  # unified: every slot may hold all 2048
        "engine": "llama.cpp", "max_running_requests": 4, "max_model_len": 2048, "kv_cache_tokens": 2048,
    },
    "llamacpp/apple-m5-iswa-two-kv-caches-4-seqs.log": {  # the non-SWA cache is the capacity
        "engine": "llama.cpp", "max_running_requests": 4, "max_model_len": 131072, "kv_cache_tokens": 131072,
    },
    "llamacpp/2026-vulkan-elapsed-prefix-load_model-initializing-kv-unified.log": {
        "engine": "llama.cpp", "max_running_requests": 4, "max_model_len": 8192, "kv_cache_tokens": 8192,
    },
    "tgi/2023-08-issue832-launcher-args.log": {
        "engine": "tgi", "max_running_requests": 128, "max_model_len": 8192, "max_batch_tokens": 4096,
        "kv_cache_tokens": 16000, "tensor_parallel_size": 4, "model": "meta-llama/Llama-2-13b-chat-hf",
    },
    "tgi/2024-09-server-rs-warmup-connected.log": {"engine": "tgi", "kv_cache_tokens": 19056},
    "tgi/2024-03-json-router-warmup.log": {"engine": "tgi", "kv_cache_tokens": 133696},
    "tgi/2024-03-no-automatic-max-batch-total-tokens.log": {
        "engine": "tgi", "kv_cache_tokens": 16000, "automatic_max_batch_total_tokens": False,
    },
    "tgi/2025-07-v3-gemma3-pretty-args-kv-blocks-part.log": {
        "engine": "tgi", "model": "/models/gemma-3-27b-it", "tensor_parallel_size": 2, "max_running_requests": 128,
        "kv_cache_tokens": 52125, "max_model_len": 8000, "max_input_tokens": 7999, "max_batch_tokens": 8000,
        "block_size": 1,
    },
    "tgi/2024-06-k8s-llama3-70b-pretty-args-defaults-part.log": {
        "engine": "tgi", "model": "meta-llama/Meta-Llama-3-70B-Instruct", "max_running_requests": 128,
        "max_model_len": 4096, "max_input_tokens": 4095, "max_batch_tokens": 4145,
    },
    "tgi/2024-02-openshift-json-output-args-wrapped.log": {
        "engine": "tgi", "model": "google/flan-t5-small", "max_running_requests": 128, "max_model_len": 2048,
        "max_input_tokens": 1024, "max_batch_tokens": 4096, "kv_cache_tokens": 16000, "quantization": "Bitsandbytes",
    },
    "tgi/2024-05-router-main-rs-801568.log": {"engine": "tgi", "kv_cache_tokens": 801568},
    "server-info/tgi-2.2.0-info-source-shape.json": {  # GET /info pasted into a report: the router's limits
        "engine": "tgi", "version": "2.2.0", "model": "meta-llama/Llama-2-13b-chat-hf", "max_running_requests": 128,
        "max_model_len": 8192, "max_input_tokens": 4096, "kv_cache_tokens": 16000,
    },
    "server-info/tgi-3.3.7-info-source-shape.json": {"engine": "tgi", "version": "3.3.7", "max_model_len": 8192},
    "tgi/2024-08-notebook-indented-pretty-args-gptq-defaults.log": {  # Some(\n Gptq,\n) a line each
        "engine": "tgi", "model": "astronomer/Llama-3-8B-Instruct-GPTQ-8-Bit", "quantization": "Gptq",
        "max_running_requests": 128, "max_model_len": 4096, "max_input_tokens": 4095, "max_batch_tokens": 4145,
    },
    "tgi/2023-07-0.9-starcoder-args-no-cuda.log": {
        "engine": "tgi", "model": "bigcode/starcoder", "kv_cache_tokens": 16000, "max_running_requests": 128,
        "max_model_len": 2048, "max_input_tokens": 1024, "max_batch_tokens": 4096,
    },
    # ``--env``: the build block (env_runtime.rs) names TGI and its commit, over an nvidia-smi table
    "tgi/2024-01-issue1402-env-runtime-block-cut.log": {
        "engine": "tgi", "build_commit": "630800eed37b15c4b0c9eb8e6ab47212026720f7",
    },
    "tgi/2023-10-issue1156-openshift-env-runtime-block-cut.log": {
        "engine": "tgi", "build_commit": "3af1a1140141245c20df20a787831ec71b124eae",
    },
    "tgi/2024-01-python-logger-prefixed-no-auto-16000.log": {
        "engine": "tgi", "kv_cache_tokens": 16000, "automatic_max_batch_total_tokens": False,
    },
    "trtllm/0.12.0.dev-trtgptmodel-limits.log": {
        "engine": "tensorrt-llm", "version": "0.12.0.dev2024073000", "max_running_requests": 4096,
        "max_batch_size": 4096, "max_model_len": 4098,
    },
    "trtllm/2025-04-tutorials-pr150-triton-kv-allocated.log": {
        "engine": "tensorrt-llm", "kv_cache_tokens": 3731744, "kv_cache_memory_gib": 78.3, "block_size": 32,
    },
    "trtllm/2024-04-issue1400-allocate-bytes-using-tokens.log": {"engine": "tensorrt-llm", "kv_cache_tokens": 132608},
    "trtllm/2025-12-trtllm-serve-gpt-oss-two-kv-estimates-limits-part.log": {  # the second estimate is the pool
        "engine": "tensorrt-llm", "kv_cache_tokens": 86720, "kv_cache_memory_gib": 5.95, "block_size": 32,
        "max_model_len": 86720, "max_running_requests": 64, "max_batch_tokens": 8192, "max_batch_size": 64,
    },
    "trtllm/2025-07-issue6364-trt-backend-iteration-stats-json.log": {
        "engine": "tensorrt-llm", "running": 1.0, "waiting": 0.0, "kv_cache_tokens": 734560, "block_size": 32,
        "max_running_requests": 2048, "max_batch_size": 256, "max_batch_tokens": 8192,
    },
    "trtllm/2023-12-backend-issue217-batch-manager-stats-wrapped.log": {
        "engine": "tensorrt-llm", "running": 1.0, "max_running_requests": 64, "kv_cache_tokens": 32832,
        "block_size": 64, "kv_usage": 1 / 513,
    },
    "trtllm/2025-04-pr3914-pytorch-iteration-log.log": {"engine": "tensorrt-llm", "running": 10.0},
    "trtllm/backend-issue577-tp-limits-blank-lines.log": {
        "engine": "tensorrt-llm", "max_running_requests": 8, "max_batch_size": 8, "max_model_len": 1048576,
        "max_batch_tokens": 8192,
    },
}


@pytest.mark.parametrize("name", sorted(LOG_FACTS))
def test_log_gives_the_neutral_facts_of_a_real_artifact(name: str) -> None:
    document = _log_json(ENGINES / name)
    assert document["engine"] == LOG_FACTS[name]["engine"]
    assert {k: document["facts"].get(k) for k in LOG_FACTS[name]} == LOG_FACTS[name]
    if document["engine"] != "vllm":  # the neutral names stand in for vLLM's own
        assert not normal.VLLM_ONLY_KEYS & set(document["facts"])


def _tgi_json_records(path: Path, tmp_path: Path) -> Path:
    """A real TGI log as ``--json-output`` prints it (``launcher/src/main.rs``: tracing-subscriber's
    ``.json()``, each event's message under ``fields``): a record per event, a multi-line message
    (the ``{:#?}`` Args, the ``--env`` block) one JSON string with its line breaks escaped."""
    records: list[str] = []
    for line in path.read_text().splitlines():
        head, _, message = line.partition("text_generation_launcher: ")
        if message:
            records.append(json.dumps({"timestamp": head.split()[0], "level": "INFO", "fields": {"message": message},
                                       "target": "text_generation_launcher"}, separators=(",", ":")))
        elif records:  # the rest of a message printed over lines
            record = json.loads(records[-1])
            record["fields"]["message"] += "\n" + line
            records[-1] = json.dumps(record, separators=(",", ":"))
    out = tmp_path / f"{path.stem}.json.log"
    out.write_text("\n".join(records) + "\n")
    return out


@pytest.mark.parametrize(("name", "expected"), [
    ("tgi/2025-07-v3-gemma3-pretty-args-kv-blocks-part.log",
     {"model": "/models/gemma-3-27b-it", "tensor_parallel_size": 2, "max_running_requests": 128}),
    ("tgi/2024-08-notebook-indented-pretty-args-gptq-defaults.log",
     {"model": "astronomer/Llama-3-8B-Instruct-GPTQ-8-Bit", "quantization": "Gptq"}),
])
def test_tgi_pretty_args_inside_a_json_record_are_read_as_printed(name: str, expected: dict, tmp_path: Path) -> None:
    """The pretty-printed Args in one ``--json-output`` record: ``Some(\\n        2,\\n    )`` is 2, not
    the escape ``\\n``."""
    lines = (ENGINES / name).read_text().splitlines()
    args = tmp_path / "args.log"
    args.write_text("\n".join(lines[: next(i for i, line in enumerate(lines) if line.strip() == "}") + 1]) + "\n")
    document = _log_json(_tgi_json_records(args, tmp_path))
    assert (document["engine"], {k: document["facts"].get(k) for k in expected}) == ("tgi", expected)


def test_tgi_env_block_inside_a_json_record_names_tgi_and_its_commit(tmp_path: Path) -> None:
    document = _log_json(_tgi_json_records(ENGINES / "tgi/2024-01-issue1402-env-runtime-block-cut.log", tmp_path))
    assert (document["engine"], document["facts"].get("build_commit")) == (
        "tgi", "630800eed37b15c4b0c9eb8e6ab47212026720f7")


def test_tgi_env_block_without_its_log_prefix_is_tgi(tmp_path: Path) -> None:
    """The block pasted alone (an issue's "System Info"): its own first line names it."""
    lines = (ENGINES / "tgi/2024-01-issue1402-env-runtime-block-cut.log").read_text().splitlines()
    bare = tmp_path / "system-info.log"
    bare.write_text("\n".join(line.partition("text_generation_launcher: ")[2] or line for line in lines[2:]) + "\n")
    document = _log_json(bare)
    assert (document["engine"], document["facts"].get("build_commit")) == (
        "tgi", "630800eed37b15c4b0c9eb8e6ab47212026720f7")


def test_llama_server_log_says_what_it_does_not_expose() -> None:
    document = _log_json(ENGINES / "llamacpp/b4351-falcon3-1b-vulkan-startup.log")
    assert document["not_exposed"]["kv_usage"] == "not exposed by llama.cpp's log"
    assert "kv_usage" not in document["facts"]


def test_the_limits_line_beats_the_arguments_and_notes_sglangs_own_name() -> None:
    lines = [
        "[2025-04-03 04:46:21] server_args=ServerArgs(model_path='m', max_running_requests=512, chunked_prefill_size=8192, tp_size=1)",
        ("[2025-04-03 04:47:00] max_total_num_tokens=421472, chunked_prefill_size=-1, max_prefill_tokens=16384, "
         "max_running_requests=48, context_len=40960, available_gpu_mem=12.18 GB"),
    ]
    facts = parse_engine_log([LogLine(i + 1, t) for i, t in enumerate(lines)])
    assert facts.value("max_num_seqs") == 48  # resolved (capped by memory) over the argument
    assert facts.facts["max_num_seqs"].note == "SGLang max_running_requests"
    assert facts.value("chunked_prefill") is False  # -1: chunked prefill off, no batch-token limit
    assert facts.value("max_num_batched_tokens") == 8192  # only the argument stated one


def test_a_retraction_every_rank_prints_counts_once() -> None:
    """Synthetic lines in SGLang's format (scheduler.py): TP0 and TP1 of one scheduler print the
    same retraction; a second data-parallel scheduler's retraction is an event of its own."""
    lines = [
        "[2025-12-12 08:44:00 TP0] KV cache pool is full. Retract requests. #retracted_reqs: 2, #new_token_ratio: 0.0980 -> 0.3487",
        "[2025-12-12 08:44:00 TP1] KV cache pool is full. Retract requests. #retracted_reqs: 2, #new_token_ratio: 0.0980 -> 0.3487",
        "[2025-12-12 08:44:00 DP1 TP1] KV cache pool is full. Retract requests. #retracted_reqs: 1, #new_token_ratio: 0.0980 -> 0.3487",
        "[2025-12-12 08:44:01 TP0] Decode batch, #running-req: 4, #token: 1920, token usage: 0.99, #queue-req: 3,",
    ]
    facts = parse_engine_log([LogLine(i + 1, t) for i, t in enumerate(lines)])
    assert (facts.preemption_warnings, facts.preemptions_cumulative) == (2, 3)
    assert normal.from_log(facts)["preemptions"] == 3


def test_a_restart_begins_a_new_startup_whose_facts_win() -> None:
    """Real lines of sgl-project/sglang#12726, then the same server restarted with a smaller pool
    (the second KV line synthetic): facts describe the last startup."""
    text = (ENGINES / "sglang/v0.5.4.post3-issue12726-startup-kv-graph-limits.log").read_text().splitlines()
    restart = [
        "[2025-11-06 01:30:00] Decode batch, #running-req: 1, #token: 137, token usage: 0.01, #queue-req: 0,",
        "[2025-11-06 01:40:00] KV Cache is allocated. #tokens: 100000, K size: 6.87 GB, V size: 6.87 GB",
    ]
    facts = parse_engine_log([LogLine(i + 1, t) for i, t in enumerate(text + restart)])
    assert len(facts.startups) == 2
    assert facts.value("kv_cache_tokens") == 100000
    assert facts.value("max_num_seqs") is None  # the restart has not printed its limits yet


def test_the_last_kv_allocation_of_tensorrt_llm_wins() -> None:
    """The PyTorch flow allocates the pool twice (a dry run, then the real one); the lines are
    the real one of triton-inference-server/tutorials PR #150 after a synthetic first one."""
    real = (ENGINES / "trtllm/2025-04-tutorials-pr150-triton-kv-allocated.log").read_text().splitlines()
    first = "[TensorRT-LLM][INFO] [MemUsageChange] Allocated 2.00 GiB for max tokens in paged KV cache (95360)."
    facts = parse_engine_log([LogLine(i + 1, t) for i, t in enumerate([first, *real])])
    assert facts.value("kv_cache_tokens") == 3731744


def test_a_vllm_log_is_still_vllms() -> None:
    document = _log_json(ROOT / "fixtures/logs/startup-0.32.0-cpu-default.log")
    assert document["engine"] == "vllm"
    assert document["facts"]["kv_cache_tokens"] == 4361088
    assert document["facts"]["version"] == document["facts"]["vllm_version"] == "0.32.0"


# --- metrics ---------------------------------------------------------------------------------

def _metrics_json(*paths: Path) -> tuple[dict, int]:
    text, code = metrics_command_output([str(p) for p in paths], as_json=True)
    return json.loads(text), code


@pytest.mark.parametrize(("name", "expected"), [
    ("sglang/v0.5.1-issue13485-qwen32b-part.prom", {"engine": "sglang", "running": 1.0, "kv_usage": 0.0}),
    ("sglang/2025-03-pr4444-llama3-8b-idle-part.prom", {"engine": "sglang", "running": 0.0, "kv_usage_max": 0.0}),
    ("sglang/2024-09-pr1461-first-collector-metrics-part.prom",
     {"engine": "sglang", "running": 0.0, "waiting": 0.0, "kv_usage": 0.0}),
    ("sglang/2024-11-pr1853-first-metrics-part.prom",
     {"engine": "sglang", "kv_cache_tokens": 570979, "max_running_requests": 2231, "max_model_len": 131072}),
    ("llamacpp/2025-01-pr11512-requests-processing-deferred.prom", {"engine": "llama.cpp", "running": 0, "waiting": 0}),
    ("llamacpp/2025-01-pr11512-markdown-escaped-as-pasted.prom", {"engine": "llama.cpp", "running": 0, "waiting": 0}),
    ("trtllm/triton-backend-readme-nv-trt-llm-metrics.prom",
     {"engine": "tensorrt-llm", "max_running_requests": 512, "kv_cache_tokens": 6239 * 64, "block_size": 64}),
])
def test_metrics_gives_the_neutral_facts_of_a_real_scrape(name: str, expected: dict) -> None:
    document, code = _metrics_json(ENGINES / name)
    assert code == 0
    assert {k: document["facts"].get(k) for k in expected} == expected


def test_sglang_states_its_pool_as_labels_of_cache_config_info(tmp_path: Path) -> None:
    """Synthetic lines in SGLang's format before v0.5.11 (``srt/metrics/collector.py``: the pool as
    ``page_size`` and ``num_pages`` labels of an info gauge, the form the llm-d router reads)."""
    scrape = tmp_path / "sglang.prom"
    scrape.write_text(
        "# TYPE sglang:cache_config_info gauge\n"
        'sglang:cache_config_info{model_name="m",num_pages="26000",page_size="16"} 1.0\n'
        "# TYPE sglang:num_running_reqs gauge\n"
        'sglang:num_running_reqs{model_name="m"} 3.0\n'
    )
    document, _ = _metrics_json(scrape)
    assert (document["engine"], document["facts"]["kv_cache_tokens"], document["facts"]["block_size"]) == (
        "sglang", 26000 * 16, 16)


def test_sglang_attention_groups_add_their_requests_and_the_fullest_pool_is_the_usage(tmp_path: Path) -> None:
    """Two schedulers of one server under DP attention, labelled as SGLang labels them (``model_name``,
    ``engine_type``, ``tp_rank``, ``pp_rank``, no ``dp_rank``: ``scheduler_metrics_mixin.py``), each
    with its own requests and its own share of the KV pool: the running requests add up, and the KV
    usage is the fuller group's (0.5), not the sum of two fractions of different pools (0.75)."""
    labels = 'engine_type="unified",model_name="Qwen-32B",pp_rank="0",tp_rank="{}"'
    scrape = tmp_path / "sglang-dp-attention.prom"
    scrape.write_text(
        "# TYPE sglang:num_running_reqs gauge\n"
        + "".join(f"sglang:num_running_reqs{{{labels.format(rank)}}} {n}\n" for rank, n in (("0", 3.0), ("4", 5.0)))
        + "# TYPE sglang:token_usage gauge\n"
        + "".join(f"sglang:token_usage{{{labels.format(rank)}}} {u}\n" for rank, u in (("0", 0.5), ("4", 0.25)))
    )
    facts = _metrics_json(scrape)[0]["facts"]
    assert (facts["running"], facts["kv_usage"]) == (8.0, 0.5)


def test_one_llama_server_scrape_counts_tokens_since_start_and_names_what_it_lacks() -> None:
    document, _ = _metrics_json(ENGINES / "llamacpp/ik_llama-2025-08-pr695-counters-part.prom")
    window = document["window"]
    assert (window["prompt_tokens"], window["generation_tokens"]) == (6886, 3469)
    assert window["metric_names"]["generation_tokens"] == "llamacpp:tokens_predicted"
    assert document["not_exposed"] == dict.fromkeys(("kv_cache_tokens", "kv_usage", "kv_usage_max", "preemptions"), "not exposed by llama.cpp's metrics")


def test_trtllm_serves_unprefixed_names_and_is_still_recognised() -> None:
    document, code = _metrics_json(ENGINES / "trtllm/2026-03-aibrix2004-trtllm-serve-prometheus-part.prom")
    assert (code, document["engine"]) == (0, "tensorrt-llm")
    assert document["window"]["metric_names"]["e2e"] == "e2e_request_latency_seconds"
    assert document["window"]["e2e"]["sum"] == pytest.approx(3.4878, abs=1e-3)


def _copies(tmp_path: Path, *mtimes: int) -> list[Path]:
    """The real vLLM 0.32 scrapes before and after load, copied with the given file times."""
    paths = []
    for name, mtime in zip(("0.32.0-cpu-idle.prom", "0.32.0-cpu-after-load.prom"), mtimes, strict=True):
        path = tmp_path / name
        path.write_text((ROOT / "fixtures/metrics" / name).read_text())
        os.utime(path, (mtime, mtime))
        paths.append(path)
    return paths


def test_two_vllm_scrapes_make_a_window_with_the_kv_capacity(tmp_path: Path) -> None:
    document, code = _metrics_json(*_copies(tmp_path, 1_700_000_000, 1_700_000_000))
    assert code == 0
    assert document["engine"] == "vllm"
    assert document["window"]["scrapes_used"] == 2
    assert document["window"]["window_s"] is None  # copies with one file time: its length is unknown
    assert document["window"]["ttft"]["count"] > 0  # the requests between the two scrapes
    assert document["facts"]["kv_cache_tokens"] > 0  # vllm:cache_config_info blocks x block size


def test_two_saved_scrapes_are_timed_by_their_files(tmp_path: Path) -> None:
    document, _ = _metrics_json(*_copies(tmp_path, 1_700_000_000, 1_700_000_090))
    assert document["window"]["window_s"] == 90


def test_a_file_that_is_not_a_scrape_is_a_message_not_a_traceback(tmp_path: Path) -> None:
    page = tmp_path / "metrics.html"
    page.write_text("<html>login</html>")
    with pytest.raises(UsageError, match="HTML page"):
        _metrics_json(page)
    with pytest.raises(UsageError, match=r"cannot read .*missing\.prom"):
        _metrics_json(page, tmp_path / "missing.prom")


# --- recognition and flags -------------------------------------------------------------------

def test_engines_are_recognised_by_prefix_and_header() -> None:
    assert engine_of_metrics(["process_cpu_seconds_total", "tgi_queue_size", "tgi_batch_current_size"]) == "tgi"
    assert engine_of_metrics(["trtllm_kv_cache_utilization"]) == "tensorrt-llm"
    assert engine_of_metrics(["python_gc_objects_collected_total"]) is None
    assert engine_of_headers({"Server": "llama.cpp"}) == "llama.cpp"
    assert engine_of_headers({"server": "uvicorn"}) is None


@pytest.mark.parametrize(("engine", "where"), [
    ("vllm", "vllm serve flag --max-num-seqs"),
    (None, "vllm serve flag --max-num-seqs"),
    ("sglang", "SGLang flag --max-running-requests"),
    ("llama.cpp", "llama.cpp flag -np / --parallel"),
    ("tgi", "TGI flag --max-concurrent-requests"),
    ("tensorrt-llm", "TensorRT-LLM flag --max_batch_size"),
])
def test_remediations_name_the_engines_own_flag(engine: str | None, where: str) -> None:
    assert engine_flag(engine, "max_num_seqs") == where


def test_a_setting_an_engine_lacks_says_so() -> None:
    assert engine_flag("llama.cpp", "gpu_memory_utilization") == (
        "not exposed by llama.cpp (gpu_memory_utilization: vllm serve flag --gpu-memory-utilization on vLLM)")


def test_evidence_names_the_metric_the_engine_exposes() -> None:
    window = MetricsWindow(engine_kind="sglang", metric_names={"preemptions": "sglang:num_retracted_requests"})
    assert metric_read(window, "preemptions") == "sglang:num_retracted_requests"
    assert metric_read(None, "waiting") == "vllm:num_requests_waiting"


def test_the_engine_comes_from_the_log_else_the_metrics() -> None:
    facts = parse_engine_log([LogLine(1, "srv          init: initializing slots, n_slots = 4")])
    assert engine_of(facts, MetricsWindow(engine_kind="sglang")) == "llama.cpp"
    assert engine_of(None, MetricsWindow(engine_kind="sglang")) == "sglang"
    assert engine_of(None, None) == UNKNOWN  # nothing tells: never vLLM by default
    served = EndpointsEvidence([Endpoint(role="gateway", url="http://gw", headers={"server": "nginx"}),
                                Endpoint(role="engine", url="http://e", headers={"server": "llama.cpp"})])
    assert engine_of(None, MetricsWindow(), served) == "llama.cpp"  # a scrape of no known engine


# --- texts of checks on another engine (issue 23 item 4) ---------------------------------------

def _sglang_log_facts() -> LogFacts:
    lines = (ENGINES / "sglang/v0.5.4.post3-issue12726-startup-kv-graph-limits.log").read_text().splitlines()
    return parse_engine_log([LogLine(i + 1, t) for i, t in enumerate(lines)])


def _fixture_bundle(name: str) -> Bundle:
    return from_dict(json.loads((ROOT / "fixtures/checks" / name).read_text())["bundle"])


def test_gpu_and_bundling_texts_name_the_engine_that_served_not_vllm() -> None:
    """The GPU checks (LD206/LD207/LD508) and LD205's API-server branch on an SGLang log: the
    checks' own fixtures with the real SGLang startup of sgl-project/sglang#12726 beside them."""
    from checks.gpu_contended import gpu_contended
    from checks.gpu_xid_errors import gpu_xid_errors
    from checks.token_bundling import token_bundling
    facts = _sglang_log_facts()
    contended = _fixture_bundle("gpu-contended/fires-other-process.json")
    xid = _fixture_bundle("gpu-xid-errors/fires-app-illegal-address.json")
    bundling = _fixture_bundle("token-bundling/fires-api-server-merges.json")
    engine = identify_engine(facts)
    results = [gpu_contended(contended.gpu, contended.host, engine=engine),
               gpu_xid_errors(xid.gpu, engine=engine), token_bundling(bundling.stream, log_facts=facts, engine=engine)]
    for result in results[:2]:
        text = json.dumps(to_jsonable(result))
        assert "SGLang" in text and "vLLM" not in text and "vllm" not in text, text
    # SGLang has no API-server count: engine_flag says so, naming vLLM's flag only as vLLM's
    assert results[2].remediation.why.startswith("with stream_interval 1 SGLang's API server")
    assert results[2].remediation.where.startswith("not exposed by SGLang")


def test_evidence_sources_name_the_metrics_the_engine_exposes() -> None:
    """An underused SGLang (LD504's numbers) and a queued one (LD501): every source names the
    ``sglang:`` family the window read, never vLLM's."""
    from checks.low_throughput import low_throughput
    from checks.queue_pressure import queue_pressure
    names = {"running": "sglang:num_running_reqs", "waiting": "sglang:num_queue_reqs", "kv_usage": "sglang:token_usage",
             "prompt_tokens": "sglang:prompt_tokens", "generation_tokens": "sglang:generation_tokens"}
    idle = MetricsWindow(engine_kind="sglang", window_s=60.0, prompt_tokens=60.0, generation_tokens=60.0,
                         running=GaugeWindow(0.0, 1.0), waiting=GaugeWindow(0.0, 0.0), metric_names=names)
    queued = MetricsWindow(engine_kind="sglang", window_s=60.0, running=GaugeWindow(8.0, 8.0),
                           waiting=GaugeWindow(0.0, 40.0), kv_usage=GaugeWindow(0.2, 0.5), metric_names=names)
    for result in (low_throughput(idle), queue_pressure(queued)):
        sources = [e.source for e in result.evidence]
        assert sources and all("sglang:" in s for s in sources if s.startswith("metrics: ")), sources
    # a family the window did not read is named as the serving engine spells it
    assert metric_read(MetricsWindow(engine_kind="sglang"), "ttft") == "sglang:time_to_first_token_seconds"
    assert metric_read(MetricsWindow(engine_kind="tgi"), "queue") == "tgi_request_queue_duration"


# --- numbers beyond any real one (issue 22 item 11) ------------------------------------------

#: More digits than Python's int() converts (4,300): each line once crashed `llm-doctor log`.
HUGE = "9" * 4400

#: engine -> (log lines in its format, a fact the log states in range, which must survive).
HUGE_NUMBER_LOGS = {
    "vllm": ([
        "INFO 01-01 00:00:00 [api_server.py:1] vLLM API server version 0.9.0",
        f"INFO 01-01 00:00:01 [core.py:1] Initializing a V1 LLM engine (v0.9.0) with config: model='m', max_seq_len={HUGE}, max_num_seqs=8, ",
        f"INFO 01-01 00:00:02 [kv_cache_utils.py:1] GPU KV cache size: {HUGE} tokens",
        f"INFO 01-01 00:00:02 [kv_cache_utils.py:1] Maximum concurrency for {HUGE} tokens per request: 3.20x",
        (f"INFO 01-01 00:00:03 [loggers.py:1] Engine 000: Avg prompt throughput: {HUGE} tokens/s, Avg generation throughput: "
         f"2.0 tokens/s, Running: {HUGE} reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%"),
    ], "max_running_requests"),
    "llama.cpp": ([
        f"llama_context: n_ctx = {HUGE}", "llama_context: n_batch = 2048",
        f"llama_kv_cache: size = 1{HUGE}.00 MiB ( {HUGE} cells, 32 layers", f"srv          init: initializing slots, n_slots = {HUGE}",
    ], "max_batch_tokens"),
    "sglang": ([
        f"[2025-11-06 01:22:10 TP0] KV Cache is allocated. #tokens: {HUGE}, K size: 1{HUGE} GB, V size: 1.0 GB",
        f"[2025-11-06 01:22:10 TP0] max_total_num_tokens={HUGE}, chunked_prefill_size=8192, max_running_requests=48, context_len={HUGE}, ",
        f"[2025-11-06 01:22:11 TP0] KV cache pool is full. Retract requests. #retracted_reqs: {HUGE}, #new_token_ratio: 0.1",
        f"[2025-11-06 01:22:12 TP0] Decode batch, #running-req: {HUGE}, #token: 1920, token usage: 0.94, #queue-req: 0, ",
    ], "max_running_requests"),
    "tgi": ([
        (f'2024-01-01T00:00:00Z  INFO text_generation_launcher: Args {{ model_id: "m", max_concurrent_requests: {HUGE}, '
         f"max_total_tokens: 4096, cuda_memory_fraction: 1{HUGE}.5 }}"),
        f"2024-01-01T00:00:01Z  INFO text_generation_router: router/src/main.rs:1: Setting max batch total tokens to {HUGE}",
    ], "max_model_len"),
    "tensorrt-llm": ([
        f"[TensorRT-LLM][INFO] TRTGptModel maxNumSequences: {HUGE}", "[TensorRT-LLM][INFO] TRTGptModel maxSequenceLen: 4096",
        f"[TensorRT-LLM][INFO] [MemUsageChange] Allocated 1{HUGE}.0 GiB for max tokens in paged KV cache ({HUGE}).",
        f"[TensorRT-LLM][INFO] Number of tokens per block: {HUGE}.",
    ], "max_model_len"),
}


@pytest.mark.parametrize("engine", sorted(HUGE_NUMBER_LOGS))
def test_a_number_past_the_digit_limit_is_no_fact_and_no_traceback(tmp_path: Path, engine: str) -> None:
    """`llama_context: n_ctx = ` then 4,400 nines made `llm-doctor log` exit 1 with a traceback
    (int()'s limit); every number from a log is bounded first (``doctor.foundation.wire.number``)."""
    lines, kept = HUGE_NUMBER_LOGS[engine]
    path = tmp_path / "engine.log"
    path.write_text("\n".join(lines) + "\n")
    doc = _log_json(path)
    assert doc["engine"] == engine
    facts = doc["facts"]
    assert kept in facts
    shown = json.dumps(facts)
    assert "9" * 50 not in shown and "Infinity" not in shown


def test_a_scrape_gauge_past_a_floats_range_is_no_capacity(tmp_path: Path) -> None:
    """`sglang:max_total_num_tokens 1` then 400 zeros: OverflowError in engines/capacity.py."""
    path = tmp_path / "s.prom"
    path.write_text(f"sglang:max_total_num_tokens 1{'0' * 400}\nsglang:max_running_requests 48\nsglang:num_running_reqs 1\n")
    text, code = metrics_command_output([str(path)], as_json=True)
    facts = json.loads(text)["facts"]
    assert code == 0 and facts["max_running_requests"] == 48 and "kv_cache_tokens" not in facts
