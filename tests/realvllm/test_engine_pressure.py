"""vLLM servers configured to hurt: too few sequence slots, and too little KV cache.

Each test starts its own server (the flags differ), probes it directly and reads its log.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.realvllm.diagnose import explain, run_diagnose, verdict_mismatches
from tests.realvllm.scenarios import SCENARIOS
from tests.realvllm.server import VllmServer

pytestmark = pytest.mark.realvllm


def test_one_sequence_slot_under_concurrency_is_queueing_before_the_first_token(
    start_vllm: Callable[[list[str]], VllmServer], tmp_path: Path
) -> None:
    scenario = SCENARIOS["queueing"]
    server = start_vllm(scenario.engine_args)
    report = run_diagnose(scenario, tmp_path, engine=server.url, log=server.log)
    assert not verdict_mismatches(report, scenario), explain(report)


def test_a_kv_cache_too_small_for_the_streams_preempts_them_between_tokens(
    start_vllm: Callable[[list[str]], VllmServer], tmp_path: Path
) -> None:
    scenario = SCENARIOS["kv-pressure"]
    server = start_vllm(scenario.engine_args)
    report = run_diagnose(scenario, tmp_path, engine=server.url, log=server.log)
    assert not verdict_mismatches(report, scenario), explain(report)
