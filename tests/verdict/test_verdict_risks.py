"""A headline is felt latency, and only that: a risk is listed under a healthy headline.

Issue 20: a healthy engine behind a stock nginx (LD307: headers sent with the first token, TTFT
as direct) used to read PROXY-ONLY and exit 1. The recorded real-nginx bundle of that stack is
replayed through ``analyze``: HEALTHY with "1 risk", exit 0 by default, exit 1 only under a
strict ``--fail-on``; the terminal, the HTML page and the JSON report all carry the risk. A run
whose duration ran out before its stopping rule could show the p90 within budget is not a
conclusive HEALTHY.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from doctor.bundle import from_dict, save
from doctor.checking.registry import load_registry
from doctor.checking.runner import AnalyzeOptions, analyze
from doctor.cli import app
from doctor.evidence import Bundle
from doctor.evidence.run import AnalysisRecord
from doctor.exit_codes import ExitCode
from doctor.model import Symptom
from tests.support.bundles import bundle, request, stream

ROOT = Path(__file__).resolve().parents[2]
REGISTRY = load_registry(plugins=False)
runner = CliRunner()


def stock_nginx() -> Bundle:
    """Real vLLM 0.32 behind a stock nginx (`proxy_pass` only): the gateway holds its headers."""
    path = ROOT / "fixtures/checks/stream-compression/quiet-real-nginx-default.json"
    return from_dict(json.loads(path.read_text())["bundle"], str(path))


def test_a_risk_alone_is_a_healthy_headline_that_names_it() -> None:
    report = analyze(stock_nginx(), AnalyzeOptions(), registry=REGISTRY)
    held = next(f for f in report.findings if f.code == "LD307")
    assert not held.felt
    v = report.verdict
    assert v.symptom is Symptom.HEALTHY and v.primary_remediation is None, v.summary
    assert "1 risk, not felt yet: LD307 headers-held" in v.summary, v.summary


@pytest.mark.parametrize("fail_on, expected", [(None, ExitCode.HEALTHY), ("felt", ExitCode.HEALTHY),
                                               ("warning", ExitCode.SYMPTOM), ("critical", ExitCode.HEALTHY)])
def test_a_risk_pages_nobody_by_default(tmp_path: Path, fail_on: str | None, expected: ExitCode) -> None:
    saved = tmp_path / "bundle.json"
    save(stock_nginx(), saved)
    html, out = tmp_path / "report.html", tmp_path / "report.json"
    args = ["analyze", str(saved), "--html", str(html), "--json", str(out)] + (["--fail-on", fail_on] if fail_on else [])
    result = runner.invoke(app, args)
    assert result.exit_code == expected, result.output
    assert "HEALTHY" in result.output and "1 risk users do not feel yet" in result.output, result.output
    assert "risk LD307 headers-held" in result.output, result.output
    page = html.read_text()
    assert 'id="risks"' in page and 'href="#finding-LD307"' in page and "risk, not felt yet" in page
    doc = json.loads(out.read_text())
    assert [f["felt"] for f in doc["findings"] if f["code"] == "LD307"] == [False]
    assert doc["verdict"]["symptom"] == "healthy" and doc["verdict"]["conclusive"] is True


def short_run(fast: int) -> Bundle:
    """An adaptive run (no --requests) whose 30 s ran out after ``fast`` answers, every one fast."""
    reqs = [request("direct", i, ttft=0.05, gaps=[0.02] * 8, start=i * 1.2, warmup=i == 0) for i in range(fast + 1)]
    ev = stream(reqs)
    ev.shape.duration_s, ev.shape.stopped = 30.0, "the 30 s duration ran out"
    return bundle(stream=ev)


def test_a_run_that_ran_out_before_29_fast_answers_is_healthy_so_far(tmp_path: Path) -> None:
    report = analyze(short_run(23), AnalyzeOptions(), registry=REGISTRY)
    v = report.verdict
    assert v.symptom is Symptom.HEALTHY and not v.conclusive, v.summary
    assert v.summary.startswith("Within budget so far: 23 of the 29 fast answers needed on direct"), v.summary
    assert any("--duration" in m for m in v.missing)
    saved = tmp_path / "bundle.json"
    save(short_run(23), saved)
    assert runner.invoke(app, ["analyze", str(saved)]).exit_code == ExitCode.HEALTHY  # nothing felt
    strict = runner.invoke(app, ["analyze", str(saved), "--fail-on", "warning"])
    assert strict.exit_code == ExitCode.NO_DIAGNOSIS, strict.output  # a strict gate: not established
    assert "Within budget so far" in strict.output


def test_29_fast_answers_are_a_conclusive_healthy() -> None:
    v = analyze(short_run(29), AnalyzeOptions(), registry=REGISTRY).verdict
    assert v.symptom is Symptom.HEALTHY and v.conclusive and v.summary.startswith("Healthy:"), v.summary


@pytest.mark.parametrize(("flags", "expected"), [([], ExitCode.HEALTHY), (["--fail-on", "warning"], ExitCode.SYMPTOM)])
def test_an_old_bundles_recorded_fail_on_does_not_gate_its_reanalysis(tmp_path: Path, flags: list[str],
                                                                     expected: ExitCode) -> None:
    """Bundles made before ``felt`` became the default recorded ``fail_on: warning`` without anyone
    choosing it. The exit gate is the caller's: ``analyze`` applies the current default (a risk
    alone exits 0) unless ``--fail-on`` (or an explicit config) says otherwise."""
    old = stock_nginx()
    old.run.analysis = AnalysisRecord(fail_on="warning")
    saved = tmp_path / "old.json"
    save(old, saved)
    result = runner.invoke(app, ["analyze", str(saved), *flags])
    assert result.exit_code == expected, result.output
    assert "risk LD307 headers-held" in result.output, result.output
