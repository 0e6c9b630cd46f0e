"""Smaller report wording of issue 30 item 12, each once wrong: a hint to pass a flag the run was
given, /metrics asked for after ``--no-metrics``."""

from __future__ import annotations

from doctor.checking.registry import load_registry
from doctor.checking.runner import AnalyzeOptions, analyze
from doctor.evidence import RunRecord
from doctor.model import Budgets
from doctor.verdict import missing as hint
from reports.shared_parts import engine_line
from tests.support.bundles import bundle, request, stream

REGISTRY = load_registry(plugins=False)


def report(run: RunRecord):
    b = bundle(stream=stream([request("direct", i, ttft=1.0, gaps=[0.02] * 5, start=i * 2.0) for i in range(3)]))
    b.run = run
    return analyze(b, AnalyzeOptions(budgets=Budgets()), registry=REGISTRY)


def test_an_unidentified_engine_names_only_the_flags_the_run_was_not_given() -> None:
    assert "(--engine URL or --log PATH would name it)" in (engine_line(report(RunRecord())) or "")
    given = engine_line(report(RunRecord(engine_url="http://127.0.0.1:8000"))) or ""
    assert "--engine URL" not in given and "(--log PATH would name it)" in given
    both = engine_line(report(RunRecord(engine_url="http://127.0.0.1:8000", log_source="vllm.log"))) or ""
    assert "would name it" not in both and both.startswith("Engine: unidentified")


def test_metrics_turned_off_is_said_so_in_what_is_missing() -> None:
    off = report(RunRecord(engine_url="http://127.0.0.1:8000")).verdict.missing
    assert hint.METRICS_OFF in off and hint.METRICS not in off
    on = report(RunRecord(engine_url="http://127.0.0.1:8000", metrics_url="http://127.0.0.1:8000/metrics")).verdict.missing
    assert hint.METRICS in on


def waited(index: int, start: float, waited_s: float, *, warmup: bool = False):
    r = request("direct", index, ttft=0.0, gaps=[], start=start, outcome="deadline", warmup=warmup)
    r.t_failed = r.t_end = start + waited_s
    r.error = "cut by the 2.4 s --deadline while still streaming"
    return r


def test_the_summary_tables_ttft_is_the_headlines_with_its_lower_bound() -> None:
    """The table showed "TTFT p90 —" under a headline "TTFT p90 >= 1.00 s"."""
    from reports.shared_parts import key_numbers, view

    b = bundle(stream=stream([waited(0, 0.0, 1.0), waited(1, 1.0, 1.0)]))
    r = analyze(b, AnalyzeOptions(budgets=Budgets(ttft_s=0.5)), registry=REGISTRY)
    assert "TTFT p90 >= 1.00 s" in r.verdict.summary
    assert dict(key_numbers(view(r, "stream_stats")[0]))["TTFT p90"] == {"direct": ">= 1.00 s"}


def test_the_probes_error_counts_its_warm_ups_as_the_verdicts_n_leaves_them_out() -> None:
    from doctor.evidence import ProbePath
    from doctor.probes.plan import CollectConfig
    from doctor.probes.stream.failures import summarise

    traces = [waited(0, 0.0, 1.5, warmup=True), waited(1, 1.6, 0.3)]
    (error,) = summarise(traces, {ProbePath.DIRECT: "http://127.0.0.1:1"}, CollectConfig(engine="http://127.0.0.1:1"), 0, 1)
    assert error.message.startswith("2 of 2 request(s) (1 of them warm-up) cut by the 2.4 s --deadline"), error.message


def test_a_stock_nginx_risk_leads_with_its_buffering_and_shows_code_not_backticks() -> None:
    """The risk line said "`gzip off;` (and `proxy_buffering off;`)", backticks and all, of an nginx
    whose answer was not compressed."""
    import json
    import re
    from pathlib import Path

    from doctor.bundle import from_dict
    from reports import render_html

    case = Path(__file__).resolve().parents[2] / "fixtures" / "checks" / "headers-held" / "fires-stock-nginx-uncompressed.json"
    r = analyze(from_dict(json.loads(case.read_text())["bundle"], str(case)), AnalyzeOptions(budgets=Budgets()), registry=REGISTRY)
    (risk,) = [f for f in r.findings if f.code == "LD307"]
    assert risk.remediation.suggested.startswith("`proxy_buffering off;`") and "gzip" not in risk.remediation.suggested
    page = render_html(r)
    risks = re.search(r'<div class="risks" id="risks">(.*?)</div>', page, re.S)
    assert risks is not None and "`" not in risks.group(1) and "<code>proxy_buffering off;</code>" in risks.group(1)
