"""The real routers (vllm-router 0.1.17, sglang-router 0.3.2) in front of two SSE test servers,
read end to end by ``llm-doctor diagnose --router``: identified, each replica's share, their
retries, a replica gone silent, a /metrics on another port, a hot replica under cache_aware.

The replicas are ``tests/support/sse_server.py`` (vLLM-shaped /metrics; ``slots=1`` makes one
queue), so these run in the ordinary suite in seconds; the same routers in front of real vLLM
replicas are ``tests/realvllm/test_router.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.routers_real import RealRouter, serve_router
from tests.support.sse_server import SseServer

ROOT = Path(__file__).resolve().parents[2]
ROUTER_CODES = ("LD311", "LD312", "LD313", "LD314")


def diagnose(router: RealRouter, out: Path, *more: str, metrics: bool = True) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "doctor", "diagnose", "--router", router.url, "--router-args", " ".join(router.args),
           "--router-log", str(router.log), *(["--router-metrics", router.metrics_url] if metrics else []),
           "--no-gpu", "--no-host", "--requests", "8", "--concurrency", "2", "--max-tokens", "8",
           "--json", str(out), *more]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    # 0 healthy, 1 a symptom, 2 no diagnosis (no direct path to compare): each an answer, not a crash
    assert proc.returncode in (0, 1, 2), proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr
    return json.loads(out.read_text())


def findings(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["code"]: f for f in report["findings"] if f["code"] in ROUTER_CODES}


def routing(report: dict[str, Any]) -> dict[str, Any]:
    return report["views"]["routing"]


@pytest.fixture
def replicas() -> Iterator[tuple[SseServer, SseServer]]:
    with SseServer() as a, SseServer() as b:
        yield a, b


def test_vllm_router_round_robin_is_read_and_quiet(replicas: tuple[SseServer, SseServer], tmp_path: Path) -> None:
    a, b = replicas
    with serve_router("vllm-router", [a.base(ttft=0.05, itl=0.01), b.base(ttft=0.05, itl=0.01)],
                      ["--policy", "round_robin"], tmp_path / "router.log") as router:
        report = diagnose(router, tmp_path / "r.json", "--html", str(tmp_path / "r.html"))
    view = routing(report)
    assert view["product"] == "vllm-router"
    assert view["settings"]["policy"]["value"] == "round_robin"
    page = (tmp_path / "r.html").read_text()
    section = page[page.index('<section id="routing">'):]
    assert all(f"<td>{r['url']}</td>" in section for r in view["replicas"])  # per replica: its share and its queue
    shares = sorted(r["share"] for r in view["replicas"])
    assert len(shares) == 2 and shares[0] > 0.3, view["replicas"]  # round robin: near half each
    assert all(r["answered"] == r["scraped"] > 0 for r in view["replicas"])
    assert findings(report) == {}


def test_the_routers_metrics_elsewhere_is_said_and_the_run_goes_on(replicas: tuple[SseServer, SseServer], tmp_path: Path) -> None:
    a, b = replicas
    with serve_router("vllm-router", [a.url, b.url], ["--policy", "round_robin"], tmp_path / "router.log") as router:
        report = diagnose(router, tmp_path / "r.json", metrics=False)
    view = routing(report)
    assert view["product"] is None
    assert any("--router-metrics" in n for n in view["notes"]), view["notes"]
    assert report["verdict"]["symptom"]  # a verdict, from the probe and the replicas
    assert findings(report) == {}


def test_a_failing_replica_is_retried_and_named_with_the_retry_setting(replicas: tuple[SseServer, SseServer], tmp_path: Path) -> None:
    a, b = replicas
    with serve_router("vllm-router", [a.base(ttft=0.05), b.base(fail="status")], ["--policy", "round_robin", "--retry-max-retries", "3"],
                      tmp_path / "router.log") as router:
        report = diagnose(router, tmp_path / "r.json")
    found = findings(report)
    assert "LD314" in found, report["findings"]
    assert found["LD314"]["remediation"]["setting"] == "--retry-max-retries"
    assert found["LD314"]["remediation"]["current"] == "3 (--router-args)"


def test_a_listed_replica_that_went_away_is_a_finding_not_a_crash(tmp_path: Path) -> None:
    with SseServer() as a:
        b = SseServer()
        b.__enter__()
        b_url = b.url
        with serve_router("vllm-router", [a.url, b_url], ["--policy", "round_robin"], tmp_path / "router.log") as router:
            b.__exit__(None, None, None)  # the worker list still names it
            report = diagnose(router, tmp_path / "r.json")
    found = findings(report)
    assert "LD313" in found, report["findings"]
    assert b_url in found["LD313"]["summary"]
    assert found["LD313"]["remediation"]["setting"] == "--health-check-interval-secs"
    assert "60 (router's log)" in found["LD313"]["summary"]


@pytest.mark.slow
def test_sglang_router_cache_aware_pins_a_shared_prompt_to_one_replica(tmp_path: Path) -> None:
    with SseServer() as a, SseServer() as b:
        workers = [a.base(ttft=0.1, itl=0.01, slots=4), b.base(ttft=0.1, itl=0.01, slots=4)]
        with serve_router("sglang-router", workers, ["--policy", "cache_aware"], tmp_path / "router.log") as router:
            stop = threading.Event()
            prompt = "You are a support assistant for one product. " * 40  # one long shared system prompt

            def user() -> None:
                with httpx.Client(timeout=30) as client:
                    while not stop.is_set():
                        client.post(f"{router.url}/v1/chat/completions", json={
                            "model": "tiny", "stream": True, "max_tokens": 8,
                            "messages": [{"role": "system", "content": prompt}, {"role": "user", "content": "hi"}]})

            users = [threading.Thread(target=user, daemon=True) for _ in range(12)]  # three times the hot replica's seats
            for u in users:
                u.start()
            try:
                report = diagnose(router, tmp_path / "r.json", "--concurrency", "1", "--requests", "16")
            finally:
                stop.set()
                for u in users:
                    u.join(timeout=30)
    view = routing(report)
    assert view["product"] == "sglang-router"
    found = findings(report)
    assert "LD312" in found, (view["replicas"], report["findings"])
    assert "--policy cache_aware" in found["LD312"]["summary"]
    assert found["LD312"]["remediation"]["setting"] == "--balance-abs-threshold"
