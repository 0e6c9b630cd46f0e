"""The Markdown summary and the terminal summary: short, complete, plain when piped."""

from __future__ import annotations

import copy
import io
import json

import pytest
from markdown_it import MarkdownIt
from rich.console import Console
from typer.testing import CliRunner

from doctor.bundle import save
from doctor.cli import app
from doctor.model import RERUN_INSTRUCTION, CheckResult, Outcome, Report, SymptomClass
from doctor.registry import load_registry
from doctor.runner import analyze
from reports import render_html, render_markdown
from reports.markdown import md
from reports.terminal import print_report
from tests.support import bundles
from tests.support.html_dom import inventory
from tests.support.report_cases import real_buffering_bundle, real_buffering_report


@pytest.fixture(scope="module")
def report() -> Report:
    return real_buffering_report()


def terminal(report: Report, *, tty: bool, verbose: bool = False) -> str:
    buf = io.StringIO()
    print_report(report, Console(file=buf, width=100, force_terminal=tty), verbose=verbose)
    return buf.getvalue()


def as_demo(report: Report) -> Report:
    demo = copy.deepcopy(report)
    demo.bundle.run.command = "demo"
    return demo


def test_markdown_is_a_short_ticket_summary(report: Report) -> None:
    text = render_markdown(report)
    assert text.startswith("### llm-doctor: **proxy-only**")
    assert "**Change one thing:** `proxy_buffering` → `off`" in text
    assert "**Verify:**" in text
    assert "| TTFT p90 | 110 ms | 717 ms |" in text  # direct vs gateway, as the client felt it
    assert "| critical | LD301 proxy-buffering |" in text
    assert len(text.splitlines()) < 60


def test_markdown_has_no_raw_html_and_one_format_for_the_change(report: Report) -> None:
    """Chat tools show raw HTML as text: the evidence is a plain list, not ``<details>``."""
    text = render_markdown(report)
    assert "<" not in text.replace("<script", "")  # no element of ours
    lines = text.splitlines()
    start = lines.index("**Evidence for LD301:**")
    evidence = next(f for f in report.findings if f.code == "LD301").evidence
    assert lines[start + 2 : start + 2 + len(evidence)] == [line for line in lines if line.startswith("- ")]
    assert len(evidence) >= 2
    assert text.count("`proxy_buffering` → `off`") == 2  # the headline and the findings table agree


def test_markdown_escapes_only_what_markdown_acts_on() -> None:
    assert md("a | b\nc") == "a \\| b c"
    assert md("[x](javascript:alert(1)) <b>") == "\\[x\\](javascript:alert(1)) \\<b>"
    assert md("set `proxy_buffering off;` <now>") == "set `proxy_buffering off;` \\<now>"
    assert md("&amp; &#60;") == "\\&amp; \\&#60;"
    plain = "lag p99 85.4 ms > 10 ms & rising, p < 0.5, 3<4, a->b"
    assert md(plain) == plain  # our own prose reads as typed where Markdown is shown raw


@pytest.mark.parametrize("text, shown", [
    ("lag p99 85.4 ms > 10 ms & rising", None),
    ("a <b>bold</b> [x](javascript:alert(1)) ![i](x.png) &amp; &#60; back\\slash | pipe", None),
    ("<!-- c --> <http://example.com> <a@b.example> <?php ?> </p>", None),
    ("set `proxy_buffering off;` and `<i>`", "set proxy_buffering off; and <i>"),  # code spans stay code
])
def test_escaped_markdown_renders_as_the_text_it_was(text: str, shown: str | None) -> None:
    """Rendered as GitHub does (CommonMark, raw HTML allowed): the reader sees the characters typed."""
    page = inventory(MarkdownIt("commonmark", {"html": True}).render(md(text)))
    assert {tag for tag, _ in page.tags} <= {"p", "code"}  # no link, image or HTML element
    assert "".join(page.text).strip() == (shown or text)


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


def test_a_failed_check_is_named_without_verbose(report: Report) -> None:
    broken = copy.deepcopy(report)
    broken.results.append(CheckResult(code="LD998", name="exploding-check", outcome=Outcome.ERROR,
                                      symptom=SymptomClass.GENERAL, message="ZeroDivisionError: division by zero"))
    lines = terminal(broken, tty=False).splitlines()
    assert "check error LD998 exploding-check: ZeroDivisionError: division by zero" in lines
    assert not any(line.startswith("check error") for line in terminal(report, tty=False).splitlines())


def test_demo_run_points_verify_at_the_healthy_scenario(report: Report) -> None:
    """A demo user typed no diagnose flags and cannot change the lab: say how to see the fixed state."""
    assert report.verdict.primary_remediation is not None
    assert report.verdict.primary_remediation.verify.startswith(RERUN_INSTRUCTION)
    demo = as_demo(report)
    for out in (terminal(demo, tty=False, verbose=True), render_markdown(demo), render_html(demo)):
        assert "llm-doctor demo --scenario healthy" in out
        assert "with the same flags" not in out
    assert "with the same flags" in terminal(report, tty=False)  # a diagnose run keeps the check's words
    assert demo.verdict.primary_remediation == report.verdict.primary_remediation  # the report data is untouched


def test_piped_cli_output_is_neither_hard_wrapped_nor_shortened(tmp_path) -> None:
    """Without a terminal rich assumes 80 columns (here: 60); a pipe must still get whole lines."""
    save(real_buffering_bundle(), tmp_path / "b.json")
    result = CliRunner().invoke(app, ["analyze", str(tmp_path / "b.json"), "-v", "--json", str(tmp_path / "r.json")],
                                env={"COLUMNS": "60"})
    data = json.loads((tmp_path / "r.json").read_text())
    lines = result.stdout.splitlines()
    assert "…" not in result.stdout
    assert data["verdict"]["summary"] in lines
    assert any(line.startswith(f"{sum(r['outcome'] == 'pass' for r in data['results'])} check(s) passed")
               and line.endswith("error(s)") for line in lines)
    assert any(len(line) > 60 for line in lines)
    for r in data["results"]:  # every check's row on one line: code, name, outcome, message
        assert [r["code"], r["name"], r["outcome"], *r["message"].split()] in [line.split() for line in lines], r


def test_a_narrow_terminal_wraps_messages_not_check_names(report: Report) -> None:
    buf = io.StringIO()
    print_report(report, Console(file=buf, width=64, force_terminal=False), verbose=True)
    rows = [line.split()[:3] for line in buf.getvalue().splitlines()]
    assert "…" not in buf.getvalue()
    for r in report.results:
        assert [r.code, r.name, r.outcome.value] in rows, r.code


def test_checks_table_keeps_codes_and_names_whole(tmp_path) -> None:
    """``llm-doctor checks | grep preemption`` finds the check's row at the 80 columns a pipe gets."""
    result = CliRunner().invoke(app, ["checks"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert "…" not in result.stdout
    for spec in load_registry().checks:
        assert any(spec.code in line and spec.name in line and spec.symptom.value in line for line in lines), spec.code
    assert any("LD201" in line for line in lines if "preemption" in line)


def test_cli_output_is_plain_when_not_a_tty(tmp_path) -> None:
    save(real_buffering_bundle(), tmp_path / "b.json")
    result = CliRunner().invoke(app, ["analyze", str(tmp_path / "b.json")], color=False)
    assert "\x1b" not in result.stdout
    assert result.stdout.startswith("PROXY-ONLY")
