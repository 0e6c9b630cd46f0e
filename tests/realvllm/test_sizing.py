"""The tiny model's KV capacity, computed from its config, equals what a real vLLM logs for the budget.

One server with a budget no recorded bundle used (``--kv-cache-memory-bytes 256M``) and the
model's whole context (``--max-model-len 4096``, its max_position_embeddings): ``llm-doctor
size`` on the built model directory must print the engine's "KV cache size" to the token and
its "Maximum concurrency" to the hundredth, from the flags alone and from the log.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from doctor.commands.size import SizeRequest, size_document
from doctor.engine_readers.vllm import parse_lines
from doctor.probes.logfile import read_log
from doctor.sizing.model_fit import Setup
from tests.realvllm.server import serve_vllm

pytestmark = pytest.mark.realvllm


def test_size_equals_the_engines_kv_cache_to_the_token(tiny_model: Path, tmp_path: Path) -> None:
    log = tmp_path / "vllm.log"
    with serve_vllm(tiny_model, log, ["--kv-cache-memory-bytes", "256M", "--max-model-len", "4096"]):
        pass
    evidence, _ = read_log(str(log))
    assert evidence is not None
    facts = parse_lines(evidence.matched, str(log))
    logged = (facts.value("kv_cache_tokens"), f"{facts.value('max_concurrency'):.2f}", facts.value("max_concurrency_tokens"))
    assert logged[0] and logged[2] == 4096, logged

    flags, _ = size_document(SizeRequest(str(tiny_model), Setup(device="cpu", max_model_len=4096), kv_cache_memory="256M", as_json=True))
    assert (flags["kv_cache_tokens"], f"{flags['max_concurrency']:.2f}", flags["max_model_len"]) == logged

    from_log, code = size_document(SizeRequest(str(tiny_model), Setup(), log=str(log)))
    assert from_log["log"]["agrees"] and code == 0, from_log["log"]
