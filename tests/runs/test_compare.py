"""``llm-doctor compare``: unlike runs refused by name, a regression made by slowing the test SSE
server caught by name, identical runs passed, a change under the practical threshold passed, an
8x shift at 4 requests caught by the exact test, runs too small to tell said with the requests
needed (exit 2), the table at 100 and 60 columns; and the pieces (the noise test, the shift,
engine settings)."""

from __future__ import annotations

import itertools
import json
import re
import statistics
from pathlib import Path

import pytest
from typer.testing import CliRunner

from doctor.cli import app
from doctor.evidence import RunRecord
from doctor.model import Practical
from doctor.runs.compare_runs import Decision, Row, engine_setting_changes, judge, run_differences
from doctor.runs.rank_tests import ALPHA, SMALLEST_TESTABLE, hodges_lehmann, mann_whitney, needed_requests
from tests.support.sse_server import SseServer

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "bundles"


def live_run(srv: SseServer, out: Path, *extra: str, requests: int = 12, **server: object) -> Path:
    """One diagnose against the SSE server, kept as a JSON report and an HTML report."""
    result = CliRunner().invoke(app, [
        "diagnose", "--engine", srv.base(itl=0.002, n=4, **server), "--route", "chat", "--requests", str(requests), "--warmup", "1",
        "--no-gpu", "--no-host", "--no-metrics", "--json", str(out.with_suffix(".json")), "--html", str(out.with_suffix(".html")),
        *extra])
    assert out.with_suffix(".json").exists(), result.output
    return out.with_suffix(".json")


def compare(*args: str, columns: int = 200):
    return CliRunner().invoke(app, ["compare", *args], env={"COLUMNS": str(columns)})


def row_of(doc: dict, metric: str, path: str = "direct") -> dict:
    return next(r for r in doc["rows"] if r["metric"] == metric and r["path"] == path)


def judged(metric: str, base: list[float], current: list[float], practical: Practical | None = None) -> Row:
    row = Row("direct", metric, None, None, None, None, len(base), len(current))
    judge(row, base, current, practical or Practical())
    return row


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


def test_small_runs_get_the_exact_p_value_ties_included() -> None:
    """Against a brute-force count over every way to split the pooled samples, ties averaged."""
    assert mann_whitney([1, 2, 3, 4], [5, 6, 7, 8]) == (2 / 70, 1.0)  # 4 against 4, all separated
    cases = [([1, 1, 2, 3], [2, 3, 3, 4, 5]), ([0.5, 0.7], [0.6, 0.9, 0.9]), ([1, 2, 2, 2, 3], [2, 4])]
    for base, current in cases:
        pooled = base + current
        ranks = {v: statistics.mean(i + 1 for i, w in enumerate(sorted(pooled)) if w == v) for v in pooled}
        mean = len(current) * (len(pooled) + 1) / 2
        observed = abs(sum(ranks[v] for v in current) - mean)
        splits = list(itertools.combinations(pooled, len(current)))
        brute = sum(abs(sum(ranks[v] for v in split) - mean) >= observed - 1e-9 for split in splits) / len(splits)
        assert mann_whitney(base, current)[0] == pytest.approx(brute, abs=1e-12)


def test_the_shift_is_the_median_of_every_difference() -> None:
    base, current = [0.10, 0.13, 0.11, 0.40, 0.12], [0.21, 0.19, 0.25, 0.20]
    assert hodges_lehmann(base, current) == pytest.approx(statistics.median(c - b for b in base for c in current), abs=1e-8)
    assert hodges_lehmann(base, base) == pytest.approx(0.0, abs=1e-8)


def test_a_difference_beyond_noise_but_under_the_threshold_is_no_regression() -> None:
    base = [0.0500 + i * 1e-5 for i in range(12)]
    row = judged("E2E", base, [v + 0.00025 for v in base])  # a deterministic server's 0.25 ms
    assert row.beyond_noise and row.decision is Decision.UNDER_THRESHOLD
    assert judged("E2E", base, [v + 0.012 for v in base]).decision is Decision.REGRESSION  # 12 ms and 24 %
    assert judged("E2E", base, [v - 0.012 for v in base]).decision is Decision.IMPROVEMENT
    # relative and absolute: 1.5 ms is 3 % of 50 ms, past the TPOT floor but not the 10 %
    assert judged("TPOT", base, [v + 0.0015 for v in base]).decision is Decision.UNDER_THRESHOLD
    assert judged("E2E", base, [v + 0.012 for v in base], Practical(ttft_s=0.02)).decision is Decision.UNDER_THRESHOLD
    assert Practical().floor("ITL", 0.002) == Practical.tpot_s and Practical().floor("TTFT", 1.0) == pytest.approx(0.1)


def test_too_few_samples_is_undecided_with_the_requests_needed() -> None:
    untestable = judged("TTFT", [0.05, 0.051, 0.052], [0.3, 0.31, 0.32])  # 3 against 3: p >= 0.1 whatever happens
    assert untestable.decision is Decision.UNDECIDED and untestable.p_value is None
    assert untestable.needed == needed_requests(1.0) == 6 and SMALLEST_TESTABLE == 4
    overlapping = judged("TTFT", [0.10, 0.14, 0.18, 0.22, 0.26], [0.15, 0.19, 0.23, 0.27, 0.31])  # +50 ms, overlapping
    assert overlapping.decision is Decision.UNDECIDED and overlapping.p_value is not None and overlapping.p_value >= ALPHA
    assert overlapping.needed is not None and overlapping.needed > 5
    quiet = judged("TTFT", [0.10, 0.14, 0.18, 0.22, 0.26], [0.101, 0.141, 0.181, 0.221, 0.261])  # +1 ms: no regression to confirm
    assert quiet.decision is Decision.NOISE
    assert judged("TPOT", [], []).decision is Decision.UNMEASURED
    assert judged("TPOT", [0.002] * 5, []).decision is Decision.UNDECIDED


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


def test_two_identical_runs_are_no_regression(tmp_path) -> None:
    """Two runs of one deterministic server differ by fractions of a millisecond, which the test
    may well call beyond noise: under the threshold, that is no regression. The 2 ms token gaps of
    a loaded machine may leave TPOT or ITL undecided (exit 2: too noisy to tell, which is true
    there), never a regression; the first token and the whole request are decided."""
    with SseServer() as srv:
        a = live_run(srv, tmp_path / "a")
        b = live_run(srv, tmp_path / "b")
    result = compare(str(a), str(b), "--json")
    assert result.exit_code in (0, 2), result.output
    doc = json.loads(result.stdout)
    assert doc["regressions"] == [] and set(doc["undecided"]) <= {"TPOT (direct)", "ITL (direct)"}
    assert all(row_of(doc, metric)["decision"] in ("within noise", "under threshold") for metric in ("TTFT", "E2E"))


@pytest.mark.slow
def test_a_small_change_beyond_noise_under_the_threshold_is_no_regression(tmp_path) -> None:
    with SseServer() as srv:
        base = live_run(srv, tmp_path / "base", ttft=0.3)
        # 25 ms, every request: 8 %, under the 10 %, and far past a loaded machine's jitter
        slower = live_run(srv, tmp_path / "slower", ttft=0.325)
    result = compare(str(base), str(slower), "--json")
    assert result.exit_code in (0, 2), result.output  # TPOT or ITL may be undecided on a loaded machine
    assert json.loads(result.stdout)["regressions"] == []
    ttft = row_of(json.loads(result.stdout), "TTFT")
    assert ttft["beyond_noise"] and ttft["decision"] == "under threshold" and 0 < ttft["shift_s"] < ttft["threshold_s"]
    strict = compare(str(base), str(slower), "--min-change", "0.01")  # a stricter gate, by flag
    assert strict.exit_code == 1 and "Regression: TTFT (direct)" in strict.stdout


def test_an_8x_first_token_at_4_requests_is_a_regression_by_the_exact_test(tmp_path) -> None:
    with SseServer() as srv:
        fast = live_run(srv, tmp_path / "fast", requests=4, ttft=0.05)
        slow = live_run(srv, tmp_path / "slow", requests=4, ttft=0.4)
    result = compare(str(fast), str(slow), "--json")
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    ttft = row_of(doc, "TTFT")
    assert "TTFT (direct)" in doc["regressions"] and ttft["exact"] and ttft["p_value"] == pytest.approx(2 / 70)
    assert ttft["base"]["n"] == ttft["current"]["n"] == 4

    for columns in (100, 60):  # piped: laid out to COLUMNS, no header cut short, no trailing space
        table = compare(str(fast), str(slow), columns=columns)
        assert table.exit_code == 1
        lines = table.stdout.splitlines()
        assert all(len(line) <= columns and line == line.rstrip() for line in lines), table.stdout
        assert "…" not in table.stdout and "Regression: TTFT (direct)" in table.stdout
        for metric in ("TTFT", "TPOT", "ITL", "E2E"):
            assert any(metric in line for line in lines)
    wide = compare(str(fast), str(slow), columns=100).stdout.splitlines()
    assert wide[1].split() == ["path", "metric", "p50", "p50", "p90", "p90", "shift", "n", "verdict"]
    assert wide[0].split() == ["base", "current", "base", "current"]
    assert any(line.startswith("direct  TTFT ") and "REGRESSION (p=0.029)" in line for line in wide)
    narrow = compare(str(fast), str(slow), columns=60).stdout.splitlines()
    assert any(line.startswith("TTFT (direct)  REGRESSION (p=0.029); p50") for line in narrow)

    config = tmp_path / "llm-doctor.toml"
    config.write_text("[compare]\nmin_ttft_change = 0.5\n")  # the config key: 350 ms is now under the threshold
    # judged by the TTFT row, not the exit code: the 2 ms token gaps of a loaded machine's runs may
    # leave TPOT or ITL undecided (exit 2), which says nothing about the TTFT threshold
    relaxed = json.loads(compare(str(fast), str(slow), "--config", str(config), "--json").stdout)
    assert row_of(relaxed, "TTFT")["decision"] == "under threshold" and row_of(relaxed, "TTFT")["threshold_s"] == 0.5
    assert "TTFT (direct)" not in relaxed["regressions"]
    strict = compare(str(fast), str(slow), "--config", str(config), "--min-ttft-change", "0.01", "--json")  # flags win
    assert strict.exit_code == 1 and "TTFT (direct)" in json.loads(strict.stdout)["regressions"]
    bad = compare(str(fast), str(slow), "--min-change", "-1")
    assert bad.exit_code == 2 and "--min-change must be a finite number >= 0" in bad.stderr
    config.write_text("[compare]\nmin_change = -0.1\n")
    bad = compare(str(fast), str(slow), "--config", str(config))
    assert bad.exit_code == 2 and "[compare] min_change must be a finite number >= 0" in bad.stderr


def test_too_few_requests_for_a_shift_exits_2_with_the_requests_needed(tmp_path) -> None:
    with SseServer() as srv:
        base = live_run(srv, tmp_path / "base", requests=3, ttft=0.05)
        slower = live_run(srv, tmp_path / "slower", requests=3, ttft=0.08)
    result = compare(str(base), str(slower))
    assert result.exit_code == 2, result.output
    assert "Could not decide:" in result.stdout and "No regression" not in result.stdout
    ttft = next(line for line in result.stdout.splitlines() if line.startswith("TTFT (direct)  shift +"))
    assert re.search(r"but 3 / 3 requests are too few to test; about \d+ requests per run are needed$", ttft)
    doc = json.loads(compare(str(base), str(slower), "--json").stdout)
    assert "TTFT (direct)" in doc["undecided"] and row_of(doc, "TTFT")["needed_requests"] >= SMALLEST_TESTABLE


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
    assert "fields differ" not in result.stdout  # two like runs: nothing refused

    improvement = compare(str(slow), str(fast), "--json")
    assert improvement.exit_code in (0, 2), improvement.output  # TPOT or ITL may be undecided on a loaded machine
    better = json.loads(improvement.stdout)
    assert row_of(better, "TTFT")["decision"] == "improvement" and better["regressions"] == []

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
