"""The router's table in the terminal summary and the HTML page, from the ``routing`` view read back:
the router check fixtures (vllm-router 0.1.17's /metrics names and shape, its flags) analysed."""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path

from rich.console import Console

from doctor.bundle import from_dict
from doctor.checking.runner import analyze
from doctor.model import Report
from reports.html_page import render_html
from reports.terminal import print_report

CHECKS = Path(__file__).resolve().parents[2] / "fixtures" / "checks"


def case_report(case: str) -> Report:
    return analyze(from_dict(json.loads((CHECKS / case).read_text())["bundle"], case))


def printed(report: Report) -> str:
    console = Console(file=io.StringIO(), width=160)
    print_report(report, console)
    return console.file.getvalue()


def test_the_router_and_its_replicas_are_shown_in_the_terminal_and_the_page() -> None:
    report = case_report("router-hot-spot/fires-cache-aware-prefix.json")  # 30 of 32 requests to one replica
    text = printed(report)
    assert "Behind vLLM router (--policy cache_aware (--router-args)), 11 s window" in text
    rows = [line.split() for line in text.splitlines() if line.startswith("http://10.0.0.")]
    assert rows == [["http://10.0.0.1:8000", "94%", "30", "8", "6", "4.0", "3/3", "healthy"],
                    ["http://10.0.0.2:8000", "6%", "2", "0", "0", "0.0", "3/3", "healthy"]]
    page = render_html(report)
    section = page[page.index('<section id="routing">'):]
    section = section[:section.index("</section>")]
    assert "vLLM router (--policy cache_aware (--router-args)), 11 s window:" in section
    assert '<tr><td>http://10.0.0.1:8000</td><td class="num">94%</td><td class="num">30</td>' in section


def test_an_ejected_replica_and_a_router_that_named_no_router_are_said() -> None:
    text = printed(case_report("router-retries/fires-ejected.json"))
    ejected = next(line.split() for line in text.splitlines() if line.startswith("http://10.0.0.2"))
    assert ejected[-2:] == ["healthy,", "ejected"], ejected  # its breaker opened at a read; its health gauge says healthy
    text = printed(case_report("router-dead-replica/na-metrics-elsewhere.json"))
    assert "router: the router's /metrics at http://127.0.0.1:29000/metrics named no router" in text


def test_a_routing_view_that_does_not_read_back_shows_no_table_not_a_traceback() -> None:
    report = case_report("router-hot-spot/fires-cache-aware-prefix.json")
    damaged = dataclasses.replace(report, views={**report.views, "routing": {**report.views["routing"], "replicas": "two"}})
    assert "Behind" not in printed(damaged) and '<section id="routing">' not in render_html(damaged)
