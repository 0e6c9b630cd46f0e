"""``watch`` rounds against the real test SSE server: a down target retried with backoff and then
reported as an outage, rounds that never overlap, a bounded history, and a canary compared with
its stable in the same round."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from doctor.cli import app
from doctor.runs.outage import retry_delay
from tests.probes.test_metrics_prometheus import free_port
from tests.reports.test_metrics_export import samples, value
from tests.support.sse_server import SseServer

ROOT = Path(__file__).resolve().parents[2]
PROBE = ["--route", "chat", "--warmup", "1", "--no-gpu", "--no-host", "--no-metrics"]


def test_retries_double_and_never_reach_into_the_next_round() -> None:
    assert [retry_delay(k, 3, 0.0, 60.0) for k in (1, 2, 3, 4)] == [1.0, 2.0, 4.0, None]  # 3 retries, then none
    assert retry_delay(1, 3, 59.5, 60.0) is None  # it would start after the next round is due
    assert retry_delay(2, 3, 10.0, 60.0) == 2.0
    assert retry_delay(1, 0, 0.0, 60.0) is None  # --retries 0


def test_a_target_back_before_the_retry_is_no_outage(tmp_path) -> None:
    """The engine comes up only after the first attempt failed: the retry finds it, the round is healthy."""
    port = free_port()
    watch = subprocess.Popen(
        [sys.executable, "-m", "doctor", "watch", "--engine", f"http://127.0.0.1:{port}", *PROBE, "--requests", "3",
         "--every", "60", "--count", "1", "--history", str(tmp_path), "--format", "json", "--deadline", "30"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert watch.stderr is not None
    lines = []
    try:
        for line in watch.stderr:  # until the watch says it will retry: the target is down until then
            lines.append(line)
            if "retry 1/3" in line:
                break
        with SseServer(port=port):
            lines += watch.stderr.readlines()
            assert watch.wait(timeout=60) == 0, "".join(lines)
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.wait()
    text = "".join(lines)
    assert "direct (connect) unreachable; retry 1/3 in 1 s" in text
    assert "outage" not in text
    (kept,) = tmp_path.glob("round-*.json")
    assert json.loads(kept.read_text())["verdict"]["symptom"] == "healthy"


def test_a_target_still_down_after_the_retries_is_a_reported_outage(tmp_path) -> None:
    out = tmp_path / "m.prom"
    result = CliRunner().invoke(app, ["watch", "--engine", f"http://127.0.0.1:{free_port()}", *PROBE, "--requests", "3",
                                      "--every", "60", "--count", "1", "--retries", "2", "--metrics-textfile", str(out),
                                      "--format", "json", "--deadline", "5"])
    assert result.exit_code == 1, result.output  # LD501: every request failed, a critical finding
    assert result.stderr.count("unreachable; retry") == 2
    assert "outage: direct (connect) unreachable after 3 attempt(s)" in result.stderr
    assert "Traceback" not in result.output
    parsed = samples(out.read_text())
    assert value(parsed, "llm_doctor_target_up", path="direct", region="") == 0.0
    assert value(parsed, "llm_doctor_up", region="") == 0.0


def test_rounds_never_overlap_even_when_one_outlasts_the_period(tmp_path) -> None:
    """--every far below a round's length: the server never sees two requests at once (concurrency 1)."""
    with SseServer() as srv:
        result = CliRunner().invoke(app, ["watch", "--engine", srv.base(itl=0.002, n=4), *PROBE, "--requests", "3",
                                          "--every", "0.001", "--count", "3", "--format", "json"])
        sent = sorted((r.t_request, r.chunks[-1]) for r in srv.log.requests.values() if r.chunks)
    assert result.exit_code == 0, result.output
    assert len(sent) == 3 * 4  # three rounds of a warm-up and three measured requests
    assert all(start >= end for (_, end), (start, _) in itertools.pairwise(sent))


def test_history_keeps_the_newest_rounds_and_nothing_else_is_touched(tmp_path) -> None:
    old = [tmp_path / f"round-20200101T00000{i}.000000Z.json" for i in range(3)]
    for path in old:
        path.write_text("{}")
    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    with SseServer() as srv:
        result = CliRunner().invoke(app, ["watch", "--engine", srv.base(itl=0.001, n=4), *PROBE, "--requests", "3",
                                          "--every", "0.1", "--count", "2", "--history", str(tmp_path), "--keep", "3",
                                          "--format", "json"])
    assert result.exit_code == 0, result.output
    rounds = sorted(tmp_path.glob("round-*.json"))
    assert rounds[0] == old[2] and len(rounds) == 3  # the two oldest of five gone, the two new ones kept
    assert notes.read_text() == "mine"


def test_a_canary_is_probed_in_the_same_round_and_its_regression_named(tmp_path) -> None:
    out = tmp_path / "m.prom"
    with SseServer() as srv:
        result = CliRunner().invoke(app, [
            "watch", "--engine", srv.base(itl=0.001, n=4), "--canary-engine", srv.base(ttft=0.08, itl=0.001, n=4), *PROBE,
            "--requests", "8", "--every", "0.1", "--count", "1", "--region", "eu-west", "--history", str(tmp_path / "h"),
            "--json", str(tmp_path / "r.json"), "--metrics-textfile", str(out)], env={"COLUMNS": "200"})
    assert result.exit_code == 1, result.output  # both within budget: the exit is the canary's regression
    assert "canary against stable:" in result.stderr
    assert "Regression: TTFT (direct)" in result.stderr
    reports = {p.name: json.loads(p.read_text()) for p in tmp_path.glob("r.*.json")}
    assert set(reports) == {"r.stable.json", "r.canary.json"}
    assert all(r["verdict"]["symptom"] == "healthy" for r in reports.values())
    assert len(list((tmp_path / "h").glob("round-*--stable.json"))) == len(list((tmp_path / "h").glob("round-*--canary.json"))) == 1
    parsed = samples(out.read_text())
    stable = value(parsed, "llm_doctor_ttft_p90_seconds", path="direct", region="eu-west", target="stable")
    canary = value(parsed, "llm_doctor_ttft_p90_seconds", path="direct", region="eu-west", target="canary")
    assert canary > stable
    assert value(parsed, "llm_doctor_verdict", symptom="healthy", region="eu-west", target="canary") == 1.0
