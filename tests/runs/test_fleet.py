"""A fleet of replicas (``--engine`` repeated) against real SSE servers on 127.0.0.1: a row and a
verdict per replica, the imbalance between the slowest and the fastest, the fleet's verdict, and
each replica's report and metrics kept apart."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from doctor.cli import app
from tests.reports.test_metrics_export import samples, value
from tests.support.sse_server import SseServer

PROBE = ["--route", "chat", "--requests", "8", "--warmup", "1", "--no-gpu", "--no-host", "--no-metrics"]


def test_replicas_get_a_row_each_and_a_slow_one_is_named_as_the_imbalance(tmp_path) -> None:
    out = tmp_path / "m.prom"
    with SseServer() as fast, SseServer() as slow:
        result = CliRunner().invoke(app, [
            "diagnose", "--engine", fast.base(ttft=0.005, itl=0.001, n=4), "--engine", slow.base(ttft=0.08, itl=0.001, n=4), *PROBE,
            "--region", "eu-west", "--json", str(tmp_path / "r.json"), "--metrics-textfile", str(out)], env={"COLUMNS": "200"})
        names = {"fast": f"127.0.0.1:{fast.port}", "slow": f"127.0.0.1:{slow.port}"}
    assert result.exit_code == 0, result.output  # both within the 0.5 s budget
    assert f"Replica imbalance: slowest {names['slow']} against fastest {names['fast']}" in result.stderr
    assert "beyond noise" in result.stderr
    assert "fleet healthy: 2 of 2 replicas healthy" in result.stderr
    rows = [line for line in result.stderr.splitlines() if line.startswith("127.0.0.1:")]
    assert [row.split()[:2] for row in rows] == [[names["fast"], "healthy"], [names["slow"], "healthy"]]
    reports = {p.name: json.loads(p.read_text()) for p in tmp_path.glob("r.*.json")}
    assert set(reports) == {f"r.{n.replace(':', '_')}.json" for n in names.values()}
    parsed = samples(out.read_text())
    ttft = {k: value(parsed, "llm_doctor_ttft_p90_seconds", path="direct", region="eu-west", target=n) for k, n in names.items()}
    assert ttft["slow"] > ttft["fast"]


def test_one_sick_replica_is_its_own_verdict_and_the_fleet_says_how_many(tmp_path) -> None:
    history = tmp_path / "h"
    with SseServer() as fast, SseServer() as slow:
        result = CliRunner().invoke(app, [
            "watch", "--engine", fast.base(ttft=0.005, itl=0.001, n=4), "--engine", slow.base(ttft=0.08, itl=0.001, n=4), *PROBE,
            "--ttft-budget", "0.04", "--every", "0.1", "--count", "1", "--history", str(history)], env={"COLUMNS": "200"})
        slow_name = f"127.0.0.1:{slow.port}"
    assert result.exit_code == 1, result.output  # one replica over budget fails the fleet
    assert "fleet pre-first-token: 1 of 2 replicas pre-first-token" in result.stderr
    kept = {p.name.split("--")[1]: json.loads(p.read_text())["verdict"]["symptom"] for p in history.glob("round-*--*.json")}
    assert kept == {f"127.0.0.1_{fast.port}.json": "healthy", f"{slow_name.replace(':', '_')}.json": "pre-first-token"}


@pytest.mark.parametrize("args, message", [
    (["collect"], "several --engine are for diagnose and watch"),
    # refused before any other flag is read: several engines is the first thing wrong with this run
    (["load", "--route", "bogus"], "several --engine are for diagnose and watch"),
    (["diagnose", "--log", "vllm.log"], "--log describes one engine"),
    (["watch", "--canary-engine", "http://127.0.0.1:9"], "a canary is compared with one stable target"),
])
def test_a_fleet_refuses_what_belongs_to_one_engine(tmp_path, args, message) -> None:
    (tmp_path / "vllm.log").write_text("INFO vLLM\n")
    command, *rest = args
    with SseServer() as srv:
        result = CliRunner().invoke(app, [command, "--engine", srv.base(), "--engine", srv.base(ttft=0.01), *PROBE,
                                          *[str(tmp_path / a) if a == "vllm.log" else a for a in rest]])
        assert not srv.log.requests  # refused before anything was sent
    assert result.exit_code == 2, result.output
    assert message in result.stderr
