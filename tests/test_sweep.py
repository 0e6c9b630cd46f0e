"""``llm-doctor sweep`` end to end: against the test SSE server made to degrade with load (a slot
limit that queues, gaps that grow with the streams in flight) it finds the knee and the budget
that binds; against the lab engine (a model of vLLM's scheduler with /metrics and a startup log)
it says why from the engine's evidence and names ``max_num_seqs`` with its current value."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from doctor.exit_codes import ExitCode
from doctor.lab.engine import LabEngine
from doctor.lab.scheduler import EngineConfig
from tests.support.sse_server import SseServer
from tests.test_collect import _stop_mid_stream

ROOT = Path(__file__).resolve().parents[1]
COMMON = ("--no-gpu", "--no-host", "--warmup", "0")


def sweep(target: str, tmp_path: Path, *args: str) -> tuple[dict, str, int]:
    """The sweep in its own process: the server's threads here must not take the client's GIL."""
    out, html = tmp_path / "sweep.json", tmp_path / "sweep.html"
    result = subprocess.run([sys.executable, "-m", "doctor", "sweep", "--engine", target, *COMMON, "--json", str(out),
                             "--html", str(html), *args], cwd=ROOT, capture_output=True, text=True, timeout=600,
                            env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"})
    assert out.exists(), result.stdout + result.stderr
    return json.loads(out.read_text()), result.stdout, result.returncode


def test_a_slot_limit_that_queues_makes_ttft_bind_at_the_limit(tmp_path: Path) -> None:
    """4 slots, answers of 0.8 s: a fifth stream waits at least a quarter of an answer for a slot
    (every answer ends in turn), so TTFT jumps past its budget at 5."""
    with SseServer() as srv:
        doc, output, code = sweep(srv.base(ttft=0.02, itl=0.1, slots=4), tmp_path, "--no-metrics", "--max-tokens", "8",
                                  "--requests", "16", "--max-concurrency", "16", "--ttft-budget", "0.15", "--tpot-budget", "0.5")
    assert code == ExitCode.HEALTHY, output
    assert [lv["concurrency"] for lv in doc["levels"]] == [1, 2, 4, 5, 6, 8]  # never 16: stopped past the knee
    assert doc["knee"] == {"concurrency": 4, "binding": "ttft", "first_over": 5}
    rec = doc["recommendation"]
    assert (rec["setting"], rec["suggested"], rec["inferred"]) == ("max_num_seqs", 4, True)  # no engine evidence
    assert all(lv["summary"]["p90_note"] for lv in doc["levels"])  # 16 requests: "p90 not established" said
    page = (tmp_path / "sweep.html").read_text()
    assert page.count('class="budget"') == 2 and "knee 4" in page and "<script" not in page
    assert "knee at 4 streams; TTFT binds first at 5" in output


def test_gaps_that_grow_with_depth_make_tpot_bind(tmp_path: Path) -> None:
    """Every gap is 10 ms per stream in flight: TPOT crosses 38 ms between 3 and 4 streams."""
    with SseServer() as srv:
        doc, output, _ = sweep(srv.base(ttft=0.01, itl=0.01, depth=1), tmp_path, "--no-metrics", "--max-tokens", "6",
                               "--requests", "32", "--max-concurrency", "8", "--ttft-budget", "1", "--tpot-budget", "0.038")
    assert [lv["concurrency"] for lv in doc["levels"]] == [1, 2, 3, 4]  # lightest first; 3 was bisected
    assert doc["knee"] == {"concurrency": 3, "binding": "tpot", "first_over": 4}
    assert doc["recommendation"]["suggested"] == 3
    assert "TPOT binds first at 4" in output


def test_the_engine_evidence_says_why_and_names_max_num_seqs_with_its_value(tmp_path: Path) -> None:
    """The lab engine runs at most 4 sequences: at 5 streams requests wait with running = 4 (from
    /metrics) and max_num_seqs = 4 (from the startup log), while TPOT has room: raise the limit."""
    log = tmp_path / "vllm.log"
    engine = LabEngine(EngineConfig(max_num_seqs=4, max_model_len=4096, kv_cache_tokens=65536, step_base_s=0.05), log_path=log)
    engine.start()
    try:
        doc, output, code = sweep(engine.url, tmp_path, "--log", str(log), "--scrape-interval", "0.1", "--max-tokens", "8",
                                  "--prompt-tokens", "64", "--requests", "16", "--max-concurrency", "6",
                                  "--ttft-budget", "0.25", "--tpot-budget", "0.2")
    finally:
        engine.stop()
    assert code == ExitCode.HEALTHY, output
    assert doc["knee"]["concurrency"] == 4 and doc["knee"]["binding"] == "ttft"
    over = next(lv for lv in doc["levels"] if lv["concurrency"] == doc["knee"]["first_over"])
    assert over["engine"]["max_num_seqs"] == 4 and over["engine"]["running_max"] == 4 and over["engine"]["waiting_max"] > 0
    rec = doc["recommendation"]
    assert (rec["setting"], rec["current"], rec["suggested"], rec["inferred"]) == ("max_num_seqs", 4, 8, False)
    assert any("requests queued in the engine" in why for why in rec["why"])


def test_sigterm_ends_the_level_in_flight_and_reports_the_levels_so_far(tmp_path: Path) -> None:
    out = tmp_path / "sweep.json"
    with SseServer() as srv:
        command = [sys.executable, "-m", "doctor", "sweep", "--engine", srv.base(itl="0.05", n="100000"), *COMMON,
                   "--no-metrics", "--requests", "2", "--json", str(out)]
        code, output = _stop_mid_stream(command, srv, signal.SIGTERM)
    assert code == ExitCode.INTERRUPTED and "Traceback" not in output, output
    doc = json.loads(out.read_text())
    assert doc["interrupted"] and [lv["interrupted"] for lv in doc["levels"]] == [True]
    assert doc["knee"] == {"concurrency": None, "binding": "interrupted", "first_over": 1}  # a cut level is no knee
