"""``llm-doctor compare``: unlike runs refused by name, a regression made by slowing the test SSE
server caught by name, identical runs passed; and the pieces (the noise test, engine settings)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from doctor.cli import app
from doctor.compare import ALPHA, engine_setting_changes, mann_whitney, run_differences
from doctor.evidence import RunRecord
from tests.support.sse_server import SseServer

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "bundles"


def live_run(srv: SseServer, out: Path, *extra: str, **server: object) -> Path:
    """One diagnose against the SSE server, kept as a JSON report and an HTML report."""
    result = CliRunner().invoke(app, [
        "diagnose", "--engine", srv.base(itl=0.002, n=4, **server), "--route", "chat", "--requests", "12", "--warmup", "1",
        "--no-gpu", "--no-host", "--no-metrics", "--json", str(out.with_suffix(".json")), "--html", str(out.with_suffix(".html")),
        *extra])
    assert out.with_suffix(".json").exists(), result.output
    return out.with_suffix(".json")


def compare(*args: str):
    return CliRunner().invoke(app, ["compare", *args], env={"COLUMNS": "200"})


def test_the_noise_test_sees_a_shift_and_not_its_absence() -> None:
    base = [0.10, 0.11, 0.12, 0.13, 0.14, 0.15, 0.16, 0.17]
    p_same, slower_same = mann_whitney(base, list(reversed(base)))
    p_up, slower_up = mann_whitney(base, [v + 0.5 for v in base])
    p_down, slower_down = mann_whitney(base, [v - 0.5 for v in base])
    assert p_same == 1.0 and slower_same == 0.5
    assert p_up < ALPHA and slower_up == 1.0
    assert p_down == p_up and slower_down == 0.0  # two-sided: the same evidence either way
    p_overlap, _ = mann_whitney(base, [v + 0.01 for v in base])  # a shift inside the spread
    assert p_overlap > ALPHA
    assert mann_whitney([1.0] * 6, [1.0] * 6) == (1.0, 0.5)  # all tied: no evidence


def test_one_changed_flag_is_one_engine_setting_and_launch_facts_are_none() -> None:
    base = RunRecord(engine_config={"max_num_seqs": 8, "port": 8000, "init_engine_s": 50.1,
                                    "non_default_args": {"max_num_seqs": 8, "port": 8000, "swap_space": 4}})
    one = RunRecord(engine_config={"max_num_seqs": 16, "port": 9000, "init_engine_s": 48.7,
                                   "non_default_args": {"max_num_seqs": 16, "port": 9000, "swap_space": 4}})
    two = RunRecord(engine_config={**one.engine_config, "non_default_args": {"max_num_seqs": 16, "swap_space": 8}})
    assert [c.field for c in engine_setting_changes(base, one)] == ["max_num_seqs"]
    assert [c.field for c in engine_setting_changes(base, two)] == ["max_num_seqs", "swap_space"]
    assert [d.field for d in run_differences(base, one)] == ["engine config"]
    assert run_differences(base, RunRecord(**{**base.__dict__, "started_at": "later"})) == []


def test_unlike_concurrency_is_refused_naming_it(tmp_path) -> None:
    with SseServer() as srv:
        a = live_run(srv, tmp_path / "a", "--concurrency", "1")
        b = live_run(srv, tmp_path / "b", "--concurrency", "2")
    result = compare(str(a), str(b))
    assert result.exit_code == 2, result.output
    assert "these run-record fields differ: concurrency\n" in result.stdout
    assert "TTFT" not in result.stdout  # refused: no table
    anyway = compare(str(a), str(b), "--allow-unlike")
    assert anyway.exit_code in (0, 1), anyway.output
    assert "concurrency" in anyway.stdout and "TTFT" in anyway.stdout


def test_a_slower_first_token_is_a_ttft_regression_and_the_same_run_is_not(tmp_path) -> None:
    with SseServer() as srv:
        fast = live_run(srv, tmp_path / "fast", ttft=0.01)
        slow = live_run(srv, tmp_path / "slow", ttft=0.25)
    result = compare(str(fast), str(slow))
    assert result.exit_code == 1, result.output
    verdict = result.stdout.splitlines()[-1]
    assert verdict.startswith("Regression: TTFT (direct) +")
    assert "differ" not in result.stdout  # two like runs: nothing refused

    improvement = compare(str(slow), str(fast))
    assert improvement.exit_code == 0, improvement.output
    assert "improvement" in improvement.stdout

    same = compare(str(fast.with_suffix(".html")), str(fast))  # an HTML report and a JSON report of one run
    assert same.exit_code == 0, same.output
    assert same.stdout.splitlines()[-1] == "No regression: every difference is within noise or under the practical threshold."


def test_compare_json_says_the_same_as_the_table_and_exits_alike(tmp_path) -> None:
    healthy, queueing = str(FIXTURES / "realvllm-healthy.json.gz"), str(FIXTURES / "realvllm-queueing.json.gz")
    refused = compare(healthy, queueing, "--json")
    assert refused.exit_code == 2
    doc = json.loads(refused.stdout)
    assert doc["refused"] is True and doc["rows"] == [] and "concurrency" in [d["field"] for d in doc["unlike"]]
    anyway = compare(healthy, queueing, "--json", "--allow-unlike")
    assert anyway.exit_code == 1
    doc = json.loads(anyway.stdout)
    assert doc["refused"] is False and doc["attributable"] is False
    assert "TTFT (direct)" in doc["regressions"]
    ttft = next(r for r in doc["rows"] if r["metric"] == "TTFT" and r["path"] == "direct")
    assert ttft["regression"] and ttft["p_value"] < doc["test"]["alpha"] and ttft["current"]["p90"] > ttft["base"]["p90"]


def test_more_than_one_engine_setting_changed_is_not_attributable() -> None:
    # the recorded healthy and queueing runs differ in concurrency and two engine flags
    result = compare(str(FIXTURES / "realvllm-healthy.json.gz"), str(FIXTURES / "realvllm-queueing.json.gz"), "--allow-unlike")
    assert "Not attributable: 2 engine settings changed (max_num_batched_tokens, max_num_seqs)" in result.stdout
    assert result.exit_code == 1  # its TTFT regression is still one


@pytest.mark.parametrize("content", [b"", b"{not json"])
def test_an_unreadable_side_is_one_error_line(tmp_path, content) -> None:
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    result = compare(str(FIXTURES / "realvllm-healthy.json.gz"), str(bad))
    assert result.exit_code == 2
    assert result.stderr.startswith("error:") and "Traceback" not in result.output
