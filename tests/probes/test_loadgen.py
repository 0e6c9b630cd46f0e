"""The real-vLLM stage's load generator against a real SSE server on a known schedule.

What the stage quotes as "what the users felt" comes from these records, so they must count
every request, every content event, and put the stall where the server paused.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.realvllm.load import felt
from tests.support.loadgen import read_records
from tests.support.sse_server import SseServer

ROOT = Path(__file__).resolve().parents[2]


def test_users_in_closed_loops_record_every_request_and_its_stall(tmp_path: Path) -> None:
    out = tmp_path / "users.jsonl"
    with SseServer() as server:
        url = server.base(ttft="0.01", itl="0.005", stall="4:1.5")
        proc = subprocess.run([sys.executable, "-m", "tests.support.loadgen", "--url", url, "--users", "2",
                               "--max-tokens", "8", "--requests", "2", "--also", "1:16:6:short", "--out", str(out)],
                              cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    records = read_records(out)
    assert sorted((r["label"], r["user"], r["seq"]) for r in records) == [
        ("short", 2, 0), ("short", 2, 1), ("user", 0, 0), ("user", 0, 1), ("user", 1, 0), ("user", 1, 1)]
    assert all(r["error"] is None and r["status"] == 200 for r in records)
    assert [r["events"] for r in records if r["label"] == "user"] == [8] * 4
    assert all(r["ttft_s"] < r["e2e_s"] for r in records)
    # the server paused 1.5 s before token 4: that pause is each answer's largest gap
    assert all(r["max_gap_s"] >= 1.0 and r["gaps_over_1s"] for r in records)
    summary = felt(out)
    assert summary["user"]["n"] == 4 and summary["short"]["n"] == 2
    assert summary["user"]["errors"] == summary["user"]["stopped"] == 0


def test_a_server_that_refuses_is_an_error_per_request_not_a_crash(tmp_path: Path) -> None:
    out = tmp_path / "users.jsonl"
    with SseServer() as server:
        url = server.base(fail="status")
        proc = subprocess.run([sys.executable, "-m", "tests.support.loadgen", "--url", url, "--users", "1",
                               "--requests", "2", "--out", str(out)], cwd=ROOT, capture_output=True, text=True,
                              timeout=60)
    assert proc.returncode == 0, proc.stderr
    records = read_records(out)
    assert len(records) == 2 and all(r["status"] == 500 and r["error"].startswith("HTTP 500") for r in records)
    assert felt(out)["user"]["errors"] == 2
