"""The sizing in reports: the HTML capacity section of a diagnose run with --model-dir, escaped."""

from __future__ import annotations

import json
from pathlib import Path

from doctor.bundle import load_path
from doctor.checking.runner import analyze
from doctor.evidence import ModelConfigEvidence
from reports.html_page import render_html

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "fixtures" / "model-configs" / "tiny-llama-realvllm" / "config.json"


def report_with(config_text: str):
    bundle = load_path(ROOT / "fixtures" / "bundles" / "realvllm-healthy.json.gz")
    bundle.model_config = ModelConfigEvidence(source=str(TINY), text=config_text)
    return analyze(bundle)


def test_the_capacity_section_shows_the_computed_and_the_logged_kv_cache() -> None:
    report = report_with(TINY.read_text())
    assert report.views["sizing"]["kv_cache_tokens"] == 131_072 and report.views["sizing"]["log"]["agrees"]
    page = render_html(report)
    section = page[page.index('id="capacity"'):page.index('id="metrics"')]
    assert "131,072 tokens (1,024 blocks of 128)" in section and "128.00x for 1,024 tokens per request" in section
    assert next(r for r in report.results if r.code == "LD406").outcome.value == "pass"


def test_a_hostile_model_type_is_escaped() -> None:
    hostile = json.dumps({**json.loads(TINY.read_text()), "model_type": "<script>alert(1)</script>"})
    page = render_html(report_with(hostile))
    section = page[page.index('id="capacity"'):page.index('id="metrics"')]
    assert "<script>alert" not in section and "&lt;script&gt;" in section


def test_without_a_model_config_there_is_no_capacity_section() -> None:
    bundle = load_path(ROOT / "fixtures" / "bundles" / "realvllm-healthy.json.gz")
    report = analyze(bundle)
    assert "missing" in report.views["sizing"] and 'id="capacity"' not in render_html(report)
