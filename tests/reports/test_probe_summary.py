"""What ``llm-doctor probe`` prints: the numbers, and what qualifies them.

A number without its caveat misleads: a p99 of two requests is their maximum, and a TTFT
measured by a saturated client is the client's. Both the table and ``--json`` must carry the
early-stopping notes, the client's self-check and the failures. Real server on 127.0.0.1,
through the real command.
"""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from doctor.cli import app
from doctor.exit_codes import ExitCode
from tests.support.sse_server import SseServer


@pytest.fixture(scope="module")
def server():
    with SseServer() as srv:
        yield srv


def probe(*args: str):
    # wide enough that no table cell wraps
    return CliRunner().invoke(app, ["probe", "--requests", "2", "--warmup", "0", "--route", "chat", *args],
                              env={"COLUMNS": "300"})


def test_json_carries_the_client_self_check_and_the_failures(server):
    result = probe("--json", "--engine", server.base(itl=0.001, n=3), "--gateway", server.base(fail="status"))
    assert result.exit_code == ExitCode.HEALTHY, result.output
    doc = json.loads(result.stdout)
    assert doc["paths"]["direct"]["n_ok"] == 2 and doc["paths"]["gateway"]["failures"] == {"http-status": 2}
    client = doc["client"]
    assert isinstance(client["suspect"], bool) and client["transport"].startswith("httpx")
    assert {"loop_lag_p99_ms", "loop_lag_max_ms", "cpu_percent_max", "reasons"} <= set(client)
    (error,) = doc["errors"]
    assert error["source"] == "stream" and error["kind"] == "http-status"
    assert "(gateway)" in error["action"] and "2 of 2 request(s) http-status" in error["message"]


def test_json_has_no_errors_when_nothing_failed(server):
    result = probe("--json", "--engine", server.base(itl=0.001, n=3))
    assert result.exit_code == ExitCode.HEALTHY, result.output
    assert json.loads(result.stdout)["errors"] == []


def row(output: str, label: str) -> str:
    (line,) = [ln for ln in output.splitlines() if ln.strip().startswith(label)]
    return re.sub(r"\s+", " ", line)


def test_summary_prints_the_early_stopping_note_of_every_latency(server):
    # 2 requests of 40 tokens: 2 TTFT / TPOT / E2E samples, too few for any estimate, but 78
    # pooled gaps: enough for ITL's p90 estimate, not for its p99
    result = probe("--engine", server.base(ttft=0.01, itl=0.002, n=40), "--max-tokens", "40")
    assert result.exit_code == ExitCode.HEALTHY, result.output
    for name in ("TTFT", "TPOT", "E2E"):
        assert "insufficient n for the p90 early-stopping estimate (2 < 64)" in row(result.stdout, f"{name} early-stopping")
    itl = row(result.stdout, "ITL early-stopping")
    assert re.search(r"p90 \d+\.\d ms; insufficient n for the p99 early-stopping estimate \(78 < 662\)", itl), itl
    assert re.search(r"E2E p50/p90/p99 [\d.]+ / [\d.]+ / [\d.]+ ms \(n=2\)", row(result.stdout, "E2E p50/p90/p99"))
