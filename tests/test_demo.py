"""Every lab scenario, diagnosed through the real CLI, yields its expected verdict.

The lab's engine is a scheduler model (slots, KV blocks, chunked prefill, preemption) and its
gateway a real relay, so each verdict comes from evidence the probe measured, not from flags.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from doctor.bundle import load_path
from doctor.cli import app
from doctor.lab.scenarios import SCENARIOS
from doctor.runner import analyze
from doctor.serial import to_jsonable

runner = CliRunner()


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenario_verdict(name, tmp_path):
    result = runner.invoke(app, ["demo", "--scenario", name, "--out-dir", str(tmp_path)])
    assert result.exit_code in (0, 1), result.output
    report = json.loads((tmp_path / "report.json").read_text())
    expect = SCENARIOS[name].expect
    verdict = report["verdict"]
    assert verdict["symptom"] == expect.symptom, verdict["summary"]
    setting = (verdict.get("primary_remediation") or {}).get("setting")
    assert setting == expect.setting, verdict["summary"]
    if expect.symptom == "healthy":
        assert result.exit_code == 0
        assert not [f for f in report["findings"] if f["severity"] != "info"]
    else:
        assert result.exit_code == 1
    assert (tmp_path / "report.html").stat().st_size > 0


@pytest.mark.slow
def test_analyze_of_the_saved_bundle_gives_the_diagnose_result(tmp_path):
    """diagnose = collect + analyze: re-analysing what it saved reproduces its report."""
    runner.invoke(app, ["demo", "--scenario", "proxy-buffering", "--out-dir", str(tmp_path)])
    live = json.loads((tmp_path / "report.json").read_text())
    for source in (tmp_path / "report.json", tmp_path / "report.html"):
        again = to_jsonable(analyze(load_path(source)))
        assert again["verdict"] == live["verdict"]
        assert again["findings"] == live["findings"]
        assert [(r["code"], r["outcome"]) for r in again["results"]] == [(r["code"], r["outcome"]) for r in live["results"]]
