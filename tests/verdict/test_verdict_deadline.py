"""A tight ``--deadline`` never reads a slow server as healthy (issue 30 item 1).

A request the probe gave up on is a TTFT of *at least* its wait. Cut by the user's own deadline
before the budget, that lower bound says nothing about the budget: the verdict is inconclusive
and says what was measured, the warm-up's first token included (a real measurement, set aside as
a possible cold start). The live tests run the CLI against a real SSE server whose first token
takes ``FIRST_TOKEN_S``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from doctor.checking.registry import load_registry
from doctor.checking.runner import AnalyzeOptions, analyze
from doctor.cli import app
from doctor.derive.stream_stats import p90_censored_above
from doctor.exit_codes import ExitCode
from doctor.model import Budgets, Symptom
from tests.support.bundles import bundle, request, stream
from tests.support.sse_server import SseServer

REGISTRY = load_registry(plugins=False)


def waited(index: int, start: float, waited_s: float, *, warmup: bool = False, outcome: str = "deadline"):
    """Sent, no token yet when the probe gave up after ``waited_s``."""
    r = request("direct", index, ttft=0.0, gaps=[], start=start, outcome=outcome, warmup=warmup)
    r.t_failed = r.t_end = start + waited_s
    return r


def test_the_p90_of_censored_waits_is_unbounded_when_one_could_carry_it() -> None:
    assert p90_censored_above([0.1], 1) is None
    assert p90_censored_above([0.1] * 9, 1) is None  # the 10th value weighs in the p90
    assert p90_censored_above([0.1] * 19, 1) == pytest.approx(0.1)  # the 20th does not
    assert p90_censored_above([], 0) is None


def test_a_wait_cut_below_the_budget_is_not_healthy() -> None:
    """The issue's run: warm-up 1.50 s, then one request cut by the deadline at 266 ms (budget 500 ms)."""
    reqs = [request("direct", 0, ttft=1.5, gaps=[0.01] * 3, start=0.0, warmup=True), waited(1, 1.6, 0.266)]
    report = analyze(bundle(stream=stream(reqs)), AnalyzeOptions(budgets=Budgets(ttft_s=0.5)), registry=REGISTRY)
    v = report.verdict
    assert v.symptom is Symptom.INCONCLUSIVE, v.summary
    assert "TTFT p90 >= 266 ms" in v.summary and "says nothing about it" in v.summary
    assert "warm-up's first token took 1.50 s (3.0x the 500 ms budget)" in v.summary
    assert v.missing[0] == "a --deadline longer than one answer"
    assert report.views["user_felt"]["witnesses"][0]["ttft"]["p90_high"] is None


def test_a_wait_cut_over_the_budget_still_decides() -> None:
    reqs = [*[request("direct", i, ttft=0.1, gaps=[0.01] * 3, start=i * 1.0) for i in range(3)], waited(3, 4.0, 2.0)]
    v = analyze(bundle(stream=stream(reqs)), AnalyzeOptions(budgets=Budgets(ttft_s=0.5)), registry=REGISTRY).verdict
    assert v.symptom is Symptom.PRE_FIRST_TOKEN, v.summary


def test_a_wait_cut_below_the_budget_beside_many_answers_does_not_move_the_p90() -> None:
    reqs = [*[request("direct", i, ttft=0.1, gaps=[0.01] * 3, start=i * 1.0) for i in range(29)], waited(29, 30.0, 0.2)]
    v = analyze(bundle(stream=stream(reqs)), AnalyzeOptions(budgets=Budgets(ttft_s=0.5)), registry=REGISTRY).verdict
    assert v.symptom is Symptom.HEALTHY, v.summary


#: The live server's first token (s). Each deadline below is a ratio of it, so the margins grow with it:
#: the run's own steps (the endpoints GETs, a scrape) must fit in what the deadline leaves before it.
FIRST_TOKEN_S = 4.0
#: "direct warm-up's first token took 4.02 s": the measured number, matched whatever its digits.
WARMUP_TOOK = re.compile(r"warm-up's first token took (\d+(?:\.\d+)?) (ms|s)\b")


def diagnose(srv: SseServer, tmp_path: Path, *args: str, itl: float = 0.02) -> tuple[int, dict, str]:
    out = tmp_path / "r.json"
    result = CliRunner().invoke(app, ["diagnose", "--engine", srv.base(ttft=FIRST_TOKEN_S, itl=itl), "--no-gpu", "--no-host",
                                      "--requests", "5", "--fail-on", "warning", "--json", str(out), *args])
    assert "Traceback" not in result.output, result.output
    return result.exit_code, json.loads(out.read_text()), result.output


def warm_up_took(summary: str) -> float:
    """The warm-up's first token the summary quotes, in seconds."""
    match = WARMUP_TOOK.search(summary)
    assert match is not None, summary
    return float(match.group(1)) / (1000.0 if match.group(2) == "ms" else 1.0)


def test_a_deadline_that_cuts_a_slow_server_short_reads_inconclusive_with_the_warm_ups_first_token(tmp_path) -> None:
    """Live: whatever the machine's speed, a deadline of 1.5x the first token leaves the first steady
    request at most 0.5x of it after the warm-up, below a budget of 0.75x: its wait says nothing about
    the budget. The run's own steps have 0.5x the first token (2 s) to fit before the warm-up's."""
    deadline, budget = 1.5 * FIRST_TOKEN_S, 0.75 * FIRST_TOKEN_S
    with SseServer() as srv:
        code, report, _ = diagnose(srv, tmp_path, "--max-tokens", "4", "--deadline", f"{deadline:g}",
                                   "--ttft-budget", f"{budget:g}")
    v = report["verdict"]
    assert v["symptom"] == "inconclusive" and code == ExitCode.NO_DIAGNOSIS, v["summary"]
    assert "direct warm-up's first token took" in v["summary"]
    assert FIRST_TOKEN_S <= warm_up_took(v["summary"]) < deadline, v["summary"]


@pytest.mark.parametrize("metrics", [[], ["--no-metrics"]])
def test_a_deadline_that_cuts_the_warm_up_after_its_first_token_says_so(tmp_path, metrics) -> None:
    """Live: a deadline of 1.5x the first token cuts an answer of twice it mid-way (a first token, then
    100 tokens over another first token's time): a first token was measured, and no request failed."""
    deadline = 1.5 * FIRST_TOKEN_S
    with SseServer() as srv:
        code, report, _ = diagnose(srv, tmp_path, "--max-tokens", "100", "--deadline", f"{deadline:g}",
                                   "--ttft-budget", "0.5", *metrics, itl=FIRST_TOKEN_S / 100)
    v = report["verdict"]
    assert v["symptom"] == "inconclusive" and code == ExitCode.NO_DIAGNOSIS, v["summary"]
    assert "request failed" not in v["summary"], v["summary"]
    assert FIRST_TOKEN_S <= warm_up_took(v["summary"]) < deadline, v["summary"]
    assert "a --deadline longer than one answer" in v["missing"]
