"""``llm-doctor sweep`` against a real vLLM with four sequence slots: the knee is at or below the
slot limit, and the engine's own evidence says why.

The budgets come from the same server's single-stream run (``load --scenario single``), so they
hold on any machine: TTFT may grow by half a single request's duration (a stream queued behind a
full batch waits for one to finish), TPOT may double. Which limit comes first depends on the
machine. On 2 CPU cores TTFT grew with every stream while none waited (179, 335, 545, 762 ms at
1-4 streams: each prefill shares the engine's steps with the running decodes), so the knee was 3,
below the limit, and the reason compute; with more cores the queue at the limit binds first.
Either is asserted with its own evidence.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.realvllm.diagnose import DIAGNOSE_TIMEOUT_S
from tests.realvllm.scenarios import FP32, ROOMY_KV_FP32
from tests.realvllm.server import VllmServer

pytestmark = pytest.mark.realvllm

SLOTS = 4
SHAPE = ["--route", "chat", "--no-gpu", "--prompt-tokens", "64", "--max-tokens", "16"]


def _run(command: str, out: Path, *args: str) -> tuple[dict[str, Any], str]:
    proc = subprocess.run([sys.executable, "-m", "doctor", command, *SHAPE, *args, "--json", str(out)],
                          capture_output=True, text=True, timeout=DIAGNOSE_TIMEOUT_S)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert out.exists(), proc.stdout + proc.stderr
    return json.loads(out.read_text()), proc.stdout + proc.stderr


def test_a_sweep_finds_the_knee_at_or_below_the_slot_limit_and_says_why(
    start_vllm: Callable[[list[str]], VllmServer], tmp_path: Path
) -> None:
    server = start_vllm([*FP32, *ROOMY_KV_FP32, "--max-num-seqs", str(SLOTS)])
    single, _ = _run("load", tmp_path / "single.json", "--engine", server.url, "--scenario", "single",
                     "--requests", "8", "--warmup", "1")
    s = single["summary"]
    assert s["n_ok"] == 8, s
    ttft_budget = s["ttft_p90_s"] + 0.5 * s["e2e_p50_s"]
    tpot_budget = 2 * s["tpot_p90_s"]
    doc, output = _run("sweep", tmp_path / "sweep.json", "--engine", server.url, "--log", str(server.log),
                       "--requests", "8", "--warmup", "1", "--max-concurrency", str(2 * SLOTS),
                       "--ttft-budget", f"{ttft_budget:.3f}", "--tpot-budget", f"{tpot_budget:.3f}")
    knee, rec = doc["knee"], doc["recommendation"]
    assert knee["concurrency"] is not None and 1 <= knee["concurrency"] <= SLOTS, output
    assert knee["binding"] in ("ttft", "tpot"), output
    assert all(level["engine"].get("running_max") is not None for level in doc["levels"]), output  # /metrics read
    over = next(level for level in doc["levels"] if level["concurrency"] == knee["first_over"])
    assert over["engine"]["max_num_seqs"] == SLOTS  # from the startup log
    why = " ".join(rec["why"])
    assert rec["current"] == SLOTS, output
    if over["engine"]["waiting_max"]:  # queued at the slot limit: the limit is the knee
        assert knee["concurrency"] == SLOTS and "queued" in why, output
        assert rec["setting"] == "max_num_seqs", output
    else:  # compute ran out before the slots filled: below the limit, capacity
        assert knee["concurrency"] < SLOTS and ("no request waiting" in why or "deeper batch" in why), output
        assert rec["setting"] == "replicas", output
