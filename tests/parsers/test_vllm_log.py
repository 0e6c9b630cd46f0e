"""The startup-log parser on real vLLM logs (0.2.7 to 0.32): every key value of fixtures/logs/INDEX.md.

Each log is read the way a run reads it (``read_log`` keeps the gated lines, ``derive_log_facts``
parses what was kept), so a value missed by the gate fails here as surely as one the parser
misreads.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from doctor.commands.log import log_command_output
from doctor.derive import Missing
from doctor.derive.log_facts import LogFacts, derive_log_facts
from doctor.evidence import Bundle
from doctor.foundation.serial import load, to_jsonable
from doctor.logscan.prefixes import strip_ansi
from doctor.probes.logfile import read_log
from tests.support.log_coverage import same_value

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "logs"

# file -> expected: "facts" (exact; floats to 4 decimals), "errors" (kinds of the last startup),
# "stats" (attribute -> series), "preemption" (warnings, cumulative), "startups" (how many).
EXPECTED: dict[str, dict[str, Any]] = {
    "v0.7.4dev-issue12529-v0-config-cudagraph-capture-256-cut.log": {
        "facts": {"vllm_version": "0.7.4.dev390+gdebd6bbf", "engine_generation": "V0", "max_model_len": 65536,
                  "enforce_eager": False, "max_cudagraph_capture_size": 256, "structured_outputs_backend": "xgrammar",
                  "cudagraph_capture_sizes": [1, 2, 4, *range(8, 257, 8)]},
    },
    "vNEW-pr30515-capping-cudagraph-capture-sizes-mamba.log": {
        "facts": {"max_cudagraph_capture_size": 352, "kv_cache_tokens": 188640, "kv_cache_memory_gib": 17.36,
                  "max_concurrency": 5.23},
    },
    "v0.10.2-lmcache1739-qwen3-14b-enginecore-dp0-kv.log": {
        "facts": {"kv_cache_memory_gib": 6.51, "kv_cache_tokens": 42656, "max_concurrency": 1.30,
                  "max_concurrency_tokens": 32768, "engine_generation": "V1"},
    },
    "v0.10.1dev-speculators166-eagle3-random-draft-engine-config.log": {
        "facts": {"vllm_version": "0.10.1.dev2081+gc44ef9fc0.d20250930", "engine_generation": "V1", "max_model_len": 1024,
                  "num_speculative_tokens": 3, "dtype": "bfloat16", "kv_cache_dtype": "auto",
                  "speculative_config": "SpeculativeConfig(method='eagle3', model='/tmp/pytest-of-rahul-tuli/pytest-15/"
                                        "test_convert_run_vllm_engine_e2/random-weights-llama3.1.8b-2layer-eagle3-unconverted', "
                                        "num_spec_tokens=3)"},
    },
    "v0.10.2dev-pr24162-serve-tp2-non-default-args-v1-init.log": {
        "facts": {"vllm_version": "0.10.2.dev378+g4d7fe40fc.d20250829", "max_model_len": 32768,
                  "max_num_batched_tokens": 2048, "chunked_prefill": True, "tensor_parallel_size": 2,
                  "engine_generation": "V1",
                  "non_default_args": {"model_tag": "/data/datasets/models-hf/Qwen2.5-0.5B/",
                                       "model": "/data/datasets/models-hf/Qwen2.5-0.5B/", "tensor_parallel_size": 2}},
    },
    "v0.14.0-vllmomni1160-stage-tag-enginecore-kv-2.9M.log": {
        "facts": {"kv_cache_memory_gib": 100.43, "kv_cache_tokens": 2925232, "max_concurrency": 89.27,
                  "max_concurrency_tokens": 32768, "init_engine_s": 2.60, "enforce_eager": True},
    },
    "v0.17.0-pr37307-apiserver-stats-waiting-queue-draining.log": {
        "stats": {"running": [10, 16, 22, 28, 34], "waiting": [90, 84, 78, 72, 66],
                  "kv_usage_pct": [19.3, 30.9, 42.5, 54.2, 65.4], "engine": ["000"] * 5},
    },
    "v0.2.7-qanything302-qwen7b-gpu-blocks-0-no-available-memory.log": {
        "facts": {"num_gpu_blocks": 0, "num_cpu_blocks": 256, "max_model_len": 4096, "tensor_parallel_size": 1,
                  "enforce_eager": False, "dtype": "bfloat16", "trust_remote_code": True, "engine_generation": "V0"},
        "errors": ["no-cache-memory"],
    },
    "v0.20-0.24-tenstorrent3359-docker-timestamped-apiserver-stats-loggers271.log": {
        "stats": {"running": [9, 9, 10, 10], "waiting": [0, 1, 0, 0], "kv_usage_pct": [62.8, 68.8, 74.5, 79.9],
                  "prefix_cache_hit_pct": [0.0] * 4,
                  "timestamp": ["2026-05-12T08:01:39.331095044Z", "2026-05-12T08:01:49.332184394Z",
                                "2026-05-12T08:01:59.333055436Z", "2026-05-12T08:02:09.334253915Z"]},
    },
    "v0.21-0.24-club3090-127-tp4-worker_tp-cudagraph-profiling-kv.log": {
        "facts": {"kv_cache_memory_gib": 15.72, "gpu_memory_utilization": 0.92,
                  "gpu_memory_utilization_equivalent": 0.9129, "gpu_memory_utilization_suggested": 0.9271,
                  "cuda_graph_memory_gib": 0.17, "engine_generation": "V1"},
    },
    "v0.25-issue49011-nvfp4-kv-1M-context-enginecore.log": {
        "facts": {"kv_cache_tokens": 1823372, "max_concurrency": 1.74, "max_concurrency_tokens": 1048576},
    },
    "v0.3.3-pr3161-api-server-version-args-namespace.log": {
        "facts": {"vllm_version": "0.3.3", "served_model_name": "mistralai/Mistral-7B-Instruct-v0.1", "port": 8000,
                  "dtype": "auto", "load_format": "auto", "engine_generation": "V0"},
    },
    "v0.3.x-issue3094-stats-line-metrics161.log": {
        "stats": {"prompt_throughput": [0.0], "generation_throughput": [44.9], "running": [2], "swapped": [0],
                  "pending": [3], "waiting": [3], "kv_usage_pct": [82.1], "cpu_kv_usage_pct": [0.0]},
    },
    "v0.5.4-issue6689-stats-metrics406-idle.log": {
        "stats": {"running": [0] * 3, "swapped": [0] * 3, "pending": [0] * 3, "kv_usage_pct": [0.0] * 3},
    },
    "v0.5.5dev-pr6102-preemption-warning-recompute-cumulative1.log": {
        # "preempted seq group=147" names a request, not an engine fact: only the mode is kept.
        "facts": {"preemption_mode": "RECOMPUTE", "engine_generation": "V0"},
        "preemption": (1, 1),
    },
    "v0.6.3-mlcommons2267-tp8-llama3.1-8b-gpu-blocks-max-concurrency.log": {
        "facts": {"num_gpu_blocks": 464716, "num_cpu_blocks": 16384, "max_concurrency": 56.73,
                  "max_concurrency_tokens": 131072, "block_size": 16, "weights_memory_gib": 1.9028,
                  "kv_cache_tokens": 464716 * 16},
    },
    "v0.6.4.post1-issue10537-chunked-prefill-warnings-engine-config.log": {
        "facts": {"max_model_len": 120000, "max_num_batched_tokens": 512, "chunked_prefill": True,
                  "tensor_parallel_size": 1, "vllm_version": "0.6.4.post1", "engine_generation": "V0"},
    },
    "v0.6.5dev-pr10511-memory-profiling-multiline-tp1-tp2.log": {
        # Two runs pasted with no startup marker between them read as one startup: the first
        # statement (TP1) wins.
        "facts": {"total_gpu_memory_gib": 79.22, "gpu_memory_utilization": 0.90, "usable_memory_gib": 71.29,
                  "weights_memory_gib": 14.96, "kv_cache_memory_gib": 53.29},
    },
    "v0.7.2-ray52377-raywrapper-enginebg-CUDA-blocks-max-concurrency.log": {
        "facts": {"num_gpu_blocks": 20657, "num_cpu_blocks": 4096, "max_concurrency": 161.38,
                  "max_concurrency_tokens": 2048, "block_size": 16, "total_gpu_memory_gib": 31.73,
                  "gpu_memory_utilization": 0.90, "weights_memory_gib": 7.51, "kv_cache_memory_gib": 20.21},
    },
    "v0.7.3dev-pr13596-v1-kv-cache-line-before-after.log": {
        "facts": {"num_gpu_blocks": 127626, "max_concurrency": 997.08, "max_concurrency_tokens": 2048,
                  "kv_cache_tokens": 2042016, "block_size": 16, "engine_generation": "V1"},
    },
    "v0.8.0-gie550-k9s-box-border-cuda-blocks-lowercase.log": {
        "facts": {"num_gpu_blocks": 7191, "num_cpu_blocks": 512, "total_gpu_memory_gib": 79.19,
                  "gpu_memory_utilization": 0.90, "usable_memory_gib": 71.27, "weights_memory_gib": 12.55,
                  "activation_peak_gib": 2.38, "kv_cache_memory_gib": 56.18, "torch_compile_s": 28.77,
                  "memory_profiling_s": 34.26},
    },
    "v0.8.1-0.8.4-issue19680-v1-engine000-stats-loggers87.log": {
        "stats": {"prompt_throughput": [1254.4], "generation_throughput": [29.2], "running": [10], "waiting": [4],
                  "kv_usage_pct": [57.9], "prefix_cache_hit_pct": [40.5]},
    },
    "v0.9.2-issue18115-v1-stats-lines-glued-no-newline.log": {
        "stats": {"running": [8] * 3, "waiting": [0] * 3, "kv_usage_pct": [91.2, 91.6, 91.9],
                  "generation_throughput": [239.2, 239.2, 240.0], "line": [1, 2, 2]},
    },
    "vNEW-1catvllm237-journald-ru-locale-enginecore.log": {
        "facts": {"enforce_eager": True, "engine_generation": "V1"},
    },
    "vNEW-intelarc4-v1-insufficient-kv-for-max-seq-len-wrapped.log": {
        "facts": {"max_model_len": 100000, "kv_cache_needed_gib": 4.26, "kv_cache_memory_gib": 4.25,
                  "engine_generation": "V1"},  # from the "(EngineCore pid=316)" prefix
        "errors": ["max-len-exceeds-kv"],
    },
    "paste-issue10517-two-starts-lost-prefix-and-hash.log": {
        # Two starts without a marker between them (each loads its weights again); the lines
        # lost their headers and one its leading "# "; the capacity is also in the error.
        "facts": {"num_gpu_blocks": 1478, "num_cpu_blocks": 2048, "max_concurrency": 0.82,
                  "max_concurrency_tokens": 29000, "max_model_len": 29000, "kv_cache_tokens": 23648,
                  "kv_cache_memory_gib": 2.89, "weights_memory_gib": 14.9888, "block_size": 16},
        "errors": ["max-len-exceeds-kv"],
        "startups": 2,
    },
    "xinference2958-engine-config-dict-before-vllm.log": {
        "facts": {"tensor_parallel_size": 4, "block_size": 16, "gpu_memory_utilization": 0.9, "max_num_seqs": 256,
                  "trust_remote_code": True, "swap_space": 4},
    },
    "v0.4.x-issue4665-args-namespace-split-over-lines-wrapped.log": {
        # the Namespace(...) is split inside a name ("b" / "lock_size=16"): the items after it count
        "facts": {"served_model_name": "mistral", "port": 8080, "tensor_parallel_size": 4, "block_size": 16,
                  "gpu_memory_utilization": 0.9, "max_num_seqs": 256, "quantization": "gptq", "enforce_eager": False,
                  "dtype": "float16"},
    },
    "startup-0.32.0-cpu-default.log": {
        "facts": {"vllm_version": "0.32.0", "engine_generation": "V1", "model": "/srv/models/tiny-llama",
                  "kv_cache_tokens": 4361088, "kv_cache_device": "CPU", "max_concurrency": 532.36,
                  "max_concurrency_tokens": 8192, "max_model_len": 8192, "gpu_memory_utilization": 0.5,
                  "enable_prefix_caching": True, "chunked_prefill": True, "enforce_eager": False,
                  "kv_cache_memory_gib": 8.32, "init_engine_s": 61.54},
        "errors": [],  # the EngineDeadError at shutdown came after serving: not a startup error
    },
    "startup-0.32.0-cpu-num-gpu-blocks-override-32.log": {
        "facts": {"num_gpu_blocks": 32, "num_gpu_blocks_computed": 25930, "kv_cache_tokens": 4096,
                  "max_concurrency": 2.0, "max_concurrency_tokens": 2048, "max_model_len": 2048,
                  "gpu_memory_utilization": 0.3, "block_size": 128},
    },
    "startup-0.32.0-cpu-FAILED-kv-too-small-for-max-model-len.log": {
        "facts": {"max_model_len": 8192, "kv_cache_memory_gib": 0.01, "kv_cache_needed_gib": 0.02,
                  "estimated_max_model_len": 3968, "kv_cache_memory_bytes": 8388608},
        "errors": ["max-len-exceeds-kv"],
    },
}


def _facts(name: str) -> LogFacts:
    evidence, errors = read_log(str(LOGS / name))
    assert errors == [] and evidence is not None
    return derive_log_facts(Bundle(log=evidence))


def test_every_fixture_log_has_an_expectation() -> None:
    assert sorted(p.name for p in LOGS.glob("*.log")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_log_yields_its_index_values(name: str) -> None:
    expected = EXPECTED[name]
    facts = _facts(name)
    for key, value in expected.get("facts", {}).items():
        assert key in facts.facts, f"{key} not found"
        assert same_value(facts.value(key), value), f"{key}: {facts.value(key)!r} != {value!r}"
    if "errors" in expected:
        assert [e.kind for e in facts.errors] == expected["errors"]
    for attr, series in expected.get("stats", {}).items():
        got = [getattr(p, attr) for p in facts.stats]
        assert len(got) == len(series) and all(same_value(g, float(s) if isinstance(s, int) and attr != "line" else s)
                                               for g, s in zip(got, series, strict=False)), f"{attr}: {got} != {series}"
    if "preemption" in expected:
        assert (facts.preemption_warnings, facts.preemptions_cumulative) == expected["preemption"]
    if "startups" in expected:
        assert len(facts.startups) == expected["startups"]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_fact_points_at_the_line_that_states_it(name: str) -> None:
    lines = (LOGS / name).read_text(encoding="utf-8").splitlines()
    for key, fact in _facts(name).facts.items():
        assert fact.line is not None and fact.raw, key
        source = strip_ansi(lines[fact.line - 1]).rstrip(" │")
        assert fact.raw.startswith(source[:60]), f"{key}: line {fact.line} is {source[:60]!r}, raw is {fact.raw[:60]!r}"


def test_facts_survive_a_bundle_round_trip() -> None:
    """A stored bundle holds only the kept lines; re-parsing them gives the same facts."""
    evidence, _ = read_log(str(LOGS / "startup-0.32.0-cpu-default.log"))
    bundle = load(Bundle, to_jsonable(Bundle(log=evidence)))
    assert to_jsonable(derive_log_facts(bundle)) == to_jsonable(derive_log_facts(Bundle(log=evidence)))


def test_a_log_without_vllm_lines_is_missing_evidence(tmp_path: Path) -> None:
    path = tmp_path / "nginx.log"
    path.write_text('10.0.0.1 - - [30/Nov/2026:07:00:00 +0000] "GET /version HTTP/1.1" 200 17 "-" "curl"\n')
    evidence, errors = read_log(str(path))
    assert errors == [] and evidence is not None
    with pytest.raises(Missing, match="no vLLM"):
        derive_log_facts(Bundle(log=evidence))
    with pytest.raises(Missing, match="--log"):
        derive_log_facts(Bundle())


def restarted(tmp_path: Path, names: list[str]) -> tuple[Path, LogFacts]:
    """Real startup logs appended to one file, as a restarted container's log reads, and its facts."""
    path = tmp_path / "restarts.log"
    path.write_text("".join((LOGS / name).read_text(encoding="utf-8") for name in names), encoding="utf-8")
    evidence, _ = read_log(str(path))
    return path, derive_log_facts(Bundle(log=evidence))


def test_restarts_in_one_file_facts_come_from_the_last(tmp_path: Path) -> None:
    """Three real startups in one file: the facts are the last one's."""
    names = ["startup-0.32.0-cpu-default.log", "startup-0.32.0-cpu-FAILED-kv-too-small-for-max-model-len.log",
             "startup-0.32.0-cpu-num-gpu-blocks-override-32.log"]
    _, facts = restarted(tmp_path, names)
    lengths = [len((LOGS / name).read_text(encoding="utf-8").splitlines()) for name in names]
    assert [(s.version, s.errors) for s in facts.startups] == [
        ("0.32.0", []), ("0.32.0", ["max-len-exceeds-kv"]), ("0.32.0", [])]
    assert facts.startups[1].first_line > lengths[0] and facts.startups[2].first_line > sum(lengths[:2])
    assert facts.value("max_model_len") == 2048 and facts.value("num_gpu_blocks") == 32
    assert facts.errors == []  # the failure belongs to the startup before the last
    assert facts.facts["max_model_len"].line > sum(lengths[:2])


def test_after_a_restart_the_stats_are_the_last_startups(tmp_path: Path) -> None:
    """The stats series of a restarted engine starts again: what is summarised is the last
    startup's, as its facts are; every point keeps the startup it belongs to."""
    names = ["startup-0.32.0-cpu-default.log", "startup-0.32.0-cpu-FAILED-kv-too-small-for-max-model-len.log",
             "startup-0.32.0-cpu-default.log"]
    path, facts = restarted(tmp_path, names)
    assert len(facts.startups) == 3
    assert [p.startup for p in facts.stats] == [0] * 7 + [2] * 7
    assert facts.last_stats == facts.stats[7:]
    assert all(p.line >= facts.startups[2].first_line for p in facts.last_stats)
    text = log_command_output(str(path), as_json=False).text
    assert "stats: 7 lines" in text and "7 stats lines of earlier startups left out" in text
    document = json.loads(log_command_output(str(path), as_json=True).text)
    assert [p["startup"] for p in document["stats"]] == [0] * 7 + [2] * 7
