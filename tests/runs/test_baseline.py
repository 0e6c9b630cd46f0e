"""``--baseline DIR``: one baseline per region (and provider, client location, request shape),
each run compared only with its own, a regression made by slowing the test SSE server caught
against it (by ``compare``'s rule, its table laid out to COLUMNS on stderr), a run too small to
tell said with exit 2, and neither a regressed nor an undecided run becoming the baseline."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from doctor.cli import app
from tests.support.sse_server import SseServer


def diagnose(srv: SseServer, baseline: Path, region: str, requests: int = 10, columns: int = 200, **server: object):
    return CliRunner().invoke(app, [
        "diagnose", "--engine", srv.base(itl=0.002, n=4, **server), "--route", "chat", "--requests", str(requests), "--warmup", "1",
        "--no-gpu", "--no-host", "--no-metrics", "--region", region, "--baseline", str(baseline), "--format", "json",
        "--json", str(baseline.parent / "r.json")], env={"COLUMNS": str(columns)})


def test_each_region_is_judged_against_its_own_baseline(tmp_path) -> None:
    baseline = tmp_path / "baselines"
    with SseServer() as srv:
        first = diagnose(srv, baseline, "eu-west", ttft=0.005)
        assert first.exit_code == 0, first.output
        assert "no baseline yet" in first.stderr
        (eu,) = baseline.glob("eu-west-*.json")
        kept = eu.read_bytes()

        slow = diagnose(srv, baseline, "eu-west", columns=100, ttft=0.1)  # still well within the 0.5 s budget
        assert slow.exit_code == 1, slow.output
        assert "against the baseline" in slow.stderr and "Regression: TTFT (direct)" in slow.stderr
        assert eu.read_bytes() == kept  # a regressed run does not become the baseline
        # the "against the baseline PATH:" line is as long as the temporary folder's path (a path is
        # never broken): the table is found by its header row and measured from there
        lines = slow.stderr[slow.stderr.index("against the baseline"):].splitlines()
        header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["path", "metric"])
        table = lines[header - 1:]
        assert all(len(line) <= 100 and line == line.rstrip() for line in table), slow.stderr
        assert not any("…" in line for line in table)
        rows = [line.split() for line in table[2:] if line.startswith("direct ")]  # a verdict may fold onto a 2nd line
        assert [row[1] for row in rows] == ["TTFT", "TPOT", "ITL", "E2E"], table

        # Mumbai's first run at that latency has no baseline of its own: never judged by Ireland's
        mumbai = diagnose(srv, baseline, "ap-south", ttft=0.1)
        assert mumbai.exit_code == 0, mumbai.output
        assert "no baseline yet" in mumbai.stderr and "against the baseline" not in mumbai.stderr
    assert sorted(p.name.split("-")[0] + "-" + p.name.split("-")[1] for p in baseline.iterdir()) == ["ap-south", "eu-west"]


def test_a_run_too_small_to_tell_exits_2_and_keeps_the_baseline(tmp_path) -> None:
    baseline = tmp_path / "baselines"
    with SseServer() as srv:
        first = diagnose(srv, baseline, "eu-west", requests=3, ttft=0.005)
        assert first.exit_code == 0, first.output  # no baseline yet: kept, nothing to compare
        (eu,) = baseline.glob("eu-west-*.json")
        kept = eu.read_bytes()
        slower = diagnose(srv, baseline, "eu-west", requests=3, ttft=0.05)
    assert slower.exit_code == 2, slower.output
    assert "Could not decide:" in slower.stderr and "requests per run are needed" in slower.stderr
    assert eu.read_bytes() == kept


def test_a_baseline_that_is_a_file_fails_before_the_probe(tmp_path) -> None:
    file = tmp_path / "base"
    file.write_text("x")
    with SseServer() as srv:
        result = diagnose(srv, file, "eu-west")
        assert not srv.log.requests
    assert result.exit_code == 2 and "--baseline" in result.stderr
