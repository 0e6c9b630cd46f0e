"""Whose log it is: every engine scored by its markers, and "unknown" over a guess (issue 23).

Logs that once came back as ``engine: vllm`` although no line of theirs is vLLM's: timing
printouts of llama.cpp, TensorRT-LLM's executor statistics, TGI's ``/info`` pasted into a report,
and text no engine wrote. Each is read as ``llm-doctor log --json`` reads it (the scanner first).
The real excerpts are in ``fixtures/engines/identity/`` (PROVENANCE.md); the synthetic lines below
are in the engines' own formats and name the source of the format.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from doctor.checklib import engine_flag, engine_of
from doctor.commands.log import log_command_output
from doctor.engine_readers.logs import parse_engine_log
from doctor.engines.names import UNKNOWN, identify_log
from doctor.evidence.log import LogLine

ENGINES = Path(__file__).resolve().parents[2] / "fixtures" / "engines"


def _engine(path: Path) -> tuple[str | None, str]:
    document = json.loads(log_command_output(str(path), as_json=True).text)
    return document["engine"], document.get("identified_by", "")


@pytest.mark.parametrize(("name", "engine"), [
    ("identity/trtllm-2025-04-issue3376-executor-iteration-stats-part.log", "tensorrt-llm"),
    ("identity/llamacpp-2023-07-issue2237-print-timings.log", "llama.cpp"),
    ("identity/llamacpp-2024-08-issue9013-server-print-timings.log", "llama.cpp"),
    ("identity/llamacpp-2026-pr23269-slot-print-timing.log", "llama.cpp"),
    ("server-info/tgi-2.2.0-info-source-shape.json", "tgi"),
    ("identity/not-an-engine-nginx-access.log", UNKNOWN),
])
def test_a_log_is_its_engines_or_unknown_never_vllm_by_default(name: str, engine: str) -> None:
    found, why = _engine(ENGINES / name)
    assert (found, bool(why)) == (engine, True), why


def test_synthetic_lines_in_the_engines_own_formats_name_their_engine() -> None:
    # TensorRT-LLM's PyTorch backend, py_executor.py's per-iteration log (print_iter_log).
    trt = ("[TRT-LLM] [I] iter = 12, global_rank = 0, rank = 0, currank_total_requests = 4/4, "
           "host_step_time = 23.51ms, prev_device_step_time = 22.90ms, timestamp = 2025-07-25 16:54:34, "
           "num_scheduled_requests: 4, states = {'num_ctx_requests': 0, 'num_ctx_tokens': 0, 'num_generation_tokens': 4}")
    # SGLang scheduler.py's retraction on decode out-of-memory.
    sglang = "[2025-06-01 10:00:00 TP0] Decode out of memory happened. #retracted_reqs: 3, #new_token_ratio: 0.4133 -> 0.6000"
    assert identify_log([trt]).engine == "tensorrt-llm"
    assert identify_log([sglang]).engine == "sglang"


def test_vllm_is_named_by_its_own_lines_and_a_count_not_the_first_word_decides() -> None:
    vllm = [f"INFO 10-14 09:31:0{i} [loggers.py:123] Engine 000: Avg prompt throughput: 1.0 tokens/s" for i in range(3)]
    quoting = "INFO 10-14 09:31:00 [api_server.py:1] a wrapper says: Prefill batch is not ours"
    identity = identify_log([quoting, *vllm])
    assert identity.engine == "vllm", identity.why


def test_an_unidentified_log_yields_to_the_metrics_and_remediations_name_the_limit() -> None:
    facts = parse_engine_log([LogLine(1, "some line no engine wrote")])
    assert facts.engine == UNKNOWN
    assert engine_of(facts) == UNKNOWN
    where = engine_flag(UNKNOWN, "max_num_seqs")
    assert "the engine's own setting for max_num_seqs" in where
    assert "--max-num-seqs" in where and "--max-running-requests" in where  # every known spelling, as possibilities
    assert not where.startswith("vllm serve")
