"""``llm-doctor watch``: rounds and their history, and a real Prometheus (Debian package) scraping a
running watch against the test SSE server, which is then stopped by SIGTERM in the middle of a round."""

from __future__ import annotations

import json
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from doctor.cli import app
from tests.probes.test_metrics_prometheus import free_port, wait_for
from tests.support import system
from tests.support.sse_server import SseServer

ROOT = Path(__file__).resolve().parents[2]
PROMETHEUS = shutil.which("prometheus")
PROBE = ["--route", "chat", "--requests", "3", "--warmup", "1", "--no-gpu", "--no-host", "--no-metrics"]


def test_rounds_keep_a_bounded_history(tmp_path) -> None:
    history = tmp_path / "history"
    with SseServer() as srv:
        result = CliRunner().invoke(app, ["watch", "--engine", srv.base(itl=0.001, n=4), *PROBE, "--every", "0.1", "--count", "3",
                                          "--history", str(history), "--keep", "2", "--format", "json"])
    assert result.exit_code == 0, result.output
    assert result.stderr.count("kept ") == 3
    kept = sorted(history.glob("round-*.json"))
    assert len(kept) == 2  # the oldest of three deleted
    assert all(json.loads(p.read_text())["verdict"]["symptom"] == "healthy" for p in kept)


def test_each_round_reads_its_streams_with_the_client_workers_asked_for(tmp_path) -> None:
    history = tmp_path / "history"
    with SseServer() as srv:
        result = CliRunner().invoke(app, ["watch", "--engine", srv.base(itl=0.001, n=4), *PROBE, "--concurrency", "2",
                                          "--client-workers", "2", "--every", "0.1", "--count", "2", "--history", str(history),
                                          "--format", "json"])
    assert result.exit_code == 0, result.output
    rounds = sorted(history.glob("round-*.json"))
    assert len(rounds) == 2
    for kept in rounds:
        bundle = json.loads(kept.read_text())["bundle"]
        assert {r["shard"] for r in bundle["stream"]["requests"]} == {0, 1}  # slot s read by worker s % 2, every round
        assert len(bundle["stream"]["client"]["shards"]) == 2
        assert [e for e in bundle["errors"] if e["action"] == "start the client workers"] == []


def test_a_down_target_is_an_inconclusive_round_not_the_end(tmp_path) -> None:
    out = tmp_path / "m.prom"
    result = CliRunner().invoke(app, ["watch", "--engine", f"http://127.0.0.1:{free_port()}", *PROBE, "--every", "0.1", "--count", "2",
                                      "--metrics-textfile", str(out), "--format", "json", "--deadline", "5"])
    assert result.stderr.count("round ") == 2, result.output  # both rounds ran
    assert "llm_doctor_up{region=\"\"} 0.0" in out.read_text()
    assert "Traceback" not in result.output


@pytest.mark.parametrize("args, message", [(["--every", "0"], "--every"), (["--every", "2d"], "at most 1d"),
                                           (["--every", "1e300"], "--every"), (["--count", "0"], "--count"),
                                           (["--listen", "nowhere"], "--listen"), (["--keep", "0"], "--keep"),
                                           (["--client-workers", "0"], "--client-workers must be a finite number >= 1")])
def test_bad_watch_flags_fail_before_any_round(args, message) -> None:
    result = CliRunner().invoke(app, ["watch", "--engine", "http://127.0.0.1:9", *args])
    assert result.exit_code == 2
    assert message in result.stderr and "round" not in result.stderr


@pytest.mark.prometheus
@pytest.mark.slow
@system.needs(PROMETHEUS, "prometheus binary not found; install the Debian package `prometheus`")
def test_prometheus_scrapes_a_running_watch_and_sigterm_ends_after_the_round(tmp_path) -> None:
    port, prom_port = free_port(), free_port()
    history = tmp_path / "history"
    config = tmp_path / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: llm-doctor\n"
                      f"    static_configs:\n      - targets: ['127.0.0.1:{port}']\n")
    lines: queue.Queue[str] = queue.Queue()
    with SseServer() as srv:
        watch = subprocess.Popen(
            [sys.executable, "-m", "doctor", "watch", "--engine", srv.base(itl=0.001, n=4), *PROBE, "--every", "1",
             "--listen", f"127.0.0.1:{port}", "--history", str(history), "--region", "eu-west", "--format", "json"],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        reader = threading.Thread(target=lambda: list(map(lines.put, watch.stderr)), daemon=True)
        reader.start()
        prom = subprocess.Popen([PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'data'}",
                                 f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=warn"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            api = f"http://127.0.0.1:{prom_port}/api/v1/query"

            def query(q: str) -> list[dict]:
                answer = httpx.get(api, params={"query": q}, timeout=2)
                return answer.json()["data"]["result"] if answer.status_code == 200 else []

            wait_for(lambda: httpx.get(f"http://127.0.0.1:{prom_port}/-/ready", timeout=2).status_code == 200, "Prometheus ready")

            wait_for(lambda: query('llm_doctor_verdict{symptom="healthy"} == 1'), "Prometheus sees the healthy verdict")
            (ttft,) = query('llm_doctor_ttft_p90_seconds{path="direct"}')
            assert ttft["metric"]["region"] == "eu-west" and float(ttft["value"][1]) > 0

            # SIGTERM as soon as the next round starts (lines up to it are read and dropped): that round still completes
            while not lines.empty():  # what was logged before now
                lines.get_nowait()
            deadline = time.monotonic() + 60
            while not lines.get(timeout=max(deadline - time.monotonic(), 0.1)).startswith("… round "):
                pass
            watch.send_signal(signal.SIGTERM)
            assert watch.wait(timeout=60) == 0
        finally:
            for proc in (watch, prom):
                if proc.poll() is None:
                    proc.terminate()
                    proc.wait(timeout=10)
        reader.join(timeout=10)
    rest = []
    while not lines.empty():
        rest.append(lines.get())
    kept = [line for line in rest if line.startswith("kept ")]
    assert len(kept) == 1, rest  # the interrupted round was kept, then the watch ended
    last = json.loads(Path(kept[0].removeprefix("kept ").strip()).read_text())
    assert last["verdict"]["symptom"] == "healthy" and last["bundle"]["stream"]["requests"]
    assert not any(line.startswith("… round ") for line in rest)  # no round after it
