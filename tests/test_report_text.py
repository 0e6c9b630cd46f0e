"""The Markdown summary and the terminal summary: short, complete, plain when piped."""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from typer.testing import CliRunner

from doctor.bundle import save
from doctor.cli import app
from doctor.model import Report
from doctor.runner import analyze
from reports import render_markdown
from reports.markdown import md
from reports.terminal import print_report
from tests.support import bundles
from tests.support.report_cases import real_buffering_bundle, real_buffering_report


@pytest.fixture(scope="module")
def report() -> Report:
    return real_buffering_report()


def terminal(report: Report, *, tty: bool, verbose: bool = False) -> str:
    buf = io.StringIO()
    print_report(report, Console(file=buf, width=100, force_terminal=tty), verbose=verbose)
    return buf.getvalue()


def test_markdown_is_a_short_ticket_summary(report: Report) -> None:
    text = render_markdown(report)
    assert text.startswith("### llm-doctor: **proxy-only**")
    assert "**Change one thing:** `proxy_buffering` → `off`" in text
    assert "**Verify:**" in text
    assert "| TTFT p90 | 110 ms | 717 ms |" in text  # direct vs gateway, as the client felt it
    assert "| critical | LD301 proxy-buffering |" in text
    assert len(text.splitlines()) < 60


def test_markdown_escapes_but_keeps_code_spans() -> None:
    assert md("a | b\nc") == "a \\| b c"
    assert md("[x](javascript:alert(1)) <b>") == "\\[x\\](javascript:alert(1)) &lt;b&gt;"
    assert md("set `proxy_buffering off;` <now>") == "set `proxy_buffering off;` &lt;now&gt;"


def test_markdown_of_an_inconclusive_run_says_what_is_missing() -> None:
    text = render_markdown(analyze(bundles.bundle()))
    assert "**inconclusive**" in text and "**Missing evidence:**" in text
    assert "Change one thing" not in text


def test_terminal_summary_when_piped_is_plain_text(report: Report) -> None:
    out = terminal(report, tty=False)
    assert "\x1b" not in out
    lines = out.splitlines()
    assert lines[0] == "PROXY-ONLY  The gateway, not the engine, adds the latency"
    assert any(line.startswith("Change one thing: proxy_buffering -> off") for line in lines)
    assert any("critical LD301 proxy-buffering" in line for line in lines)
    assert any(line.split()[:3] == [str(sum(r.outcome.value == "pass" for r in report.results)), "check(s)", "passed,"]
               for line in lines)
    assert "gateway events per read p50" not in out  # evidence only with --verbose


def test_terminal_verbose_adds_evidence_and_every_check(report: Report) -> None:
    out = terminal(report, tty=False, verbose=True)
    assert "gateway events per read p50 = 16.5 events" in out
    for result in report.results:
        assert result.code in out


def test_terminal_on_a_tty_is_coloured(report: Report) -> None:
    assert "\x1b[" in terminal(report, tty=True)


def test_cli_output_is_plain_when_not_a_tty(tmp_path) -> None:
    save(real_buffering_bundle(), tmp_path / "b.json")
    result = CliRunner().invoke(app, ["analyze", str(tmp_path / "b.json")], color=False)
    assert "\x1b" not in result.stdout
    assert result.stdout.startswith("PROXY-ONLY")
