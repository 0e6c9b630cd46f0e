"""The Markdown summary and the terminal summary: short, complete, plain when piped.

``--verbose`` prints the tables of the HTML page row for row; the probe's progress goes to
stderr, one line per request, and never into stdout.
"""

from __future__ import annotations

import copy
import io
import json
from html.parser import HTMLParser

import pytest
from markdown_it import MarkdownIt
from rich.console import Console
from typer.testing import CliRunner

from doctor.bundle import save
from doctor.checking.registry import load_registry
from doctor.checking.runner import analyze
from doctor.cli import app
from doctor.foundation.units import fmt_seconds
from doctor.model import RERUN_INSTRUCTION, CheckResult, Outcome, Report, SymptomClass, gated_rerun_instruction
from reports import render_html, render_markdown
from reports.markdown import md
from reports.shared_parts import DEMO_RERUN_INSTRUCTION, fmt_evidence, verify_text
from reports.terminal import PIPE_WIDTH, print_report, stdout_console
from tests.support import bundles
from tests.support.html_dom import inventory
from tests.support.report_cases import LOG_LINES, real_buffering_bundle, real_buffering_report
from tests.support.sse_server import SseServer


@pytest.fixture(scope="module")
def report() -> Report:
    return real_buffering_report()


def terminal(report: Report, *, tty: bool, verbose: bool = False, pipe: bool = False, width: int = 100) -> str:
    """What ``print_report`` prints; ``pipe``: on the console ``stdout_console`` gives a pipe."""
    buf = io.StringIO()
    console = stdout_console(buf) if pipe else Console(file=buf, width=width, force_terminal=tty)
    print_report(report, console, verbose=verbose)
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
    assert any(line.split()[:3] == [str(sum(r.outcome.value == "pass" for r in report.results)), "checks", "passed,"]
               for line in lines)
    assert "gateway events per read p50" not in out  # evidence only with --verbose


def test_terminal_verbose_adds_evidence_and_every_check(report: Report) -> None:
    out = terminal(report, tty=False, verbose=True)
    assert "gateway events per read p50 = 16.5 events" in out
    for result in report.results:
        assert result.code in out


class _Tables(HTMLParser):
    """The text of every table row of a page, as word lists, by (section id, table class or index)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.section = ""
        self.tables: dict[tuple[str, str], list[list[str]]] = {}
        self.rows: list[list[str]] | None = None
        self.cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "section":
            self.section = a.get("id") or ""
        elif tag == "table":
            name = a.get("class") or str(sum(s == self.section for s, _ in self.tables))
            self.rows = self.tables.setdefault((self.section, name), [])
        elif tag == "tr" and self.rows is not None:
            self.rows.append([])
        elif tag in ("td", "th"):
            self.cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self.cell is not None and self.rows:
            self.rows[-1] += "".join(self.cell).split()
            self.cell = None
        elif tag == "table":
            self.rows = None

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell.append(data)


def html_tables(html: str) -> dict[tuple[str, str], list[list[str]]]:
    parser = _Tables()
    parser.feed(html)
    return parser.tables


#: The HTML page's tables that ``--verbose`` prints too: per-path numbers, log facts, metrics delta.
VERBOSE_TABLES = [("charts", "paths"), ("log", "facts"), ("metrics", "0")]


def test_verbose_prints_the_html_pages_tables_row_for_row(report: Report) -> None:
    """Per path (n, TTFT, TPOT, ITL, E2E, reads, stalls), startup-log facts with line numbers, metrics delta
    (on a console wide enough that no value folds: a pipe's are folded to PIPE_WIDTH)."""
    lines = [line.split() for line in terminal(report, tty=False, verbose=True, width=1000).splitlines()]
    tables = html_tables(render_html(report))
    for key in VERBOSE_TABLES:
        assert len(tables[key]) > 5, key
        for row in tables[key]:
            assert row in lines, (key, row)
    # what the rows say, read as an on-call engineer would
    for row in ("measured ok / failed / warm-up 2 / 0 / 0 2 / 0 / 0", "TTFT p90 110 ms 717 ms",
                "ITL p50 (every gap) 30 ms 0 ms", "events per read p50 / max 1 / 1 16.5 / 18",
                "stalls (gap > 5 × typical gap) 2 0",
                "max_model_len 1024 2", "vllm_version 0.32.0 1",
                "served_model_name /srv/models/tiny-llama (defaults to the model) 2",
                "preemptions 0 vllm:num_preemptions", "kv usage (gauge) min 5 %, max 29 %, last 5 % vllm:kv_cache_usage_perc",
                "running (gauge) min 0, max 1, last 0 vllm:num_requests_running"):
        assert row.split() in lines, row


def test_tables_are_verbose_only(report: Report) -> None:
    out = terminal(report, tty=False, pipe=True)
    lines = [line.split() for line in out.splitlines()]
    tables = html_tables(render_html(report))
    for key in VERBOSE_TABLES[1:]:
        assert not any(row in lines for row in tables[key][1:]), key
    assert "Startup-log facts" not in out and "ITL p50" not in out and "vllm:" not in out
    assert ["TTFT", "p90", "110", "ms", "717", "ms"] in lines  # the key numbers stay


def test_what_users_felt_lists_every_witness_the_html_page_shows(report: Report) -> None:
    """The verdict names one witness of this table, the probe's paths included: the text and the
    page list the same rows (the probe's were once left out of the text)."""
    lines = [line.split() for line in terminal(report, tty=False, width=1000).splitlines()]
    rows = html_tables(render_html(report))[("witnesses", "0")]
    assert any(row[:2] == ["the", "probe's"] for row in rows)
    for row in rows:
        assert row in lines, row


def test_a_narrow_pipe_keeps_the_witness_column(report: Report, monkeypatch: pytest.MonkeyPatch) -> None:
    """At ``COLUMNS=60`` the witnesses fold and the headers break between words; no column is
    dropped and no value is cut short."""
    monkeypatch.setenv("COLUMNS", "60")
    out = terminal(report, tty=False, pipe=True)
    table = out.split("What users felt, by witness\n")[1].split("\n\n")[0].splitlines()
    assert "…" not in out
    assert any(line.startswith("witness ") for line in table), table
    words = " ".join(line.split("  ")[0] for line in table)
    assert "the probe's gateway requests" in words and "histograms" in words
    assert all(len(line) <= 60 for line in table), table


def test_a_findings_continuation_lines_align_under_its_text(report: Report) -> None:
    lines = terminal(report, tty=False, width=60).splitlines()
    first = lines.index(f"Findings ({len(report.findings)})") + 1
    block = lines[first:lines.index("", first)]
    heads = [line for line in block if line[:11].split() and line[:11].split()[0] in ("critical", "warning", "info")]
    assert len(heads) == len(report.findings) and len(block) > len(heads)
    assert all(line in heads or (line.startswith(" " * 11) and line[11] != " ") for line in block), block


def test_counts_of_one_are_singular(report: Report) -> None:
    """"1 events", "1 finding(s)": a count of one says its noun in the singular, everywhere."""
    one = copy.deepcopy(report)
    one.findings = one.findings[:1]
    for result in one.results:
        if result.outcome is Outcome.FINDING and result.code != one.findings[0].code:
            result.outcome = Outcome.NOT_APPLICABLE
    one.findings[0].evidence[0].value, one.findings[0].evidence[0].unit = 1, "events"
    text = terminal(one, tty=False, verbose=True)
    assert ", 1 finding, " in " ".join(text.split()) and "0 errors" in text
    assert f"{one.findings[0].evidence[0].name} = 1 event " in text
    assert "1 finding;" in " ".join(inventory(render_html(one)).text)
    assert fmt_evidence(1, "tries") == "1 try" and fmt_evidence(2, "events") == "2 events"
    assert fmt_evidence(1, "s") == fmt_seconds(1) and fmt_evidence(1, "MHz") == "1 MHz"


def test_verbose_says_why_a_table_is_missing() -> None:
    out = terminal(analyze(bundles.bundle()), tty=False, verbose=True)
    assert "Startup-log facts\nnone: no startup log (pass --log PATH)" in out
    assert "Metrics over the probe window\nnone: " in out


@pytest.mark.parametrize(("engine_kind", "said"), [
    ("vllm", "not exposed by vLLM: its /metrics has no "),
    ("sglang", "not exposed by SGLang: its /metrics has no "),
    (None, "the unidentified engine's /metrics has no "),  # metric names of no engine llm-doctor knows
])
def test_the_metrics_a_window_lacked_are_said_for_its_engine(report: Report, engine_kind: str | None, said: str) -> None:
    """Never "this vLLM" for another engine's /metrics, nor "not exposed" by an engine nobody identified."""
    seen = copy.deepcopy(report)
    seen.views["metrics_window"]["engine_kind"] = engine_kind
    lacked = ", ".join(seen.views["metrics_window"]["missing"])
    assert lacked
    text = " ".join(terminal(seen, tty=False, verbose=True).split())
    page = " ".join(" ".join(inventory(render_html(seen)).text).split())
    for shown in (text, page.replace(said[0].upper() + said[1:], said)):
        assert said + lacked in shown
        assert "this vLLM" not in shown and "not exposed by an unidentified engine" not in shown


def test_the_summary_says_which_engine_the_findings_name_and_what_told(report: Report) -> None:
    """The terminal and the page name the engine whose flags the remediation spells: vLLM, by its
    log, in the relay case; on a run where nothing tells, "unidentified" and how to name it."""
    for shown in (terminal(report, tty=False), " ".join(inventory(render_html(report)).text), render_markdown(report)):
        assert "Engine: vLLM, by its startup log" in " ".join(shown.split())
    nothing = analyze(bundles.bundle(stream=copy.deepcopy(report.bundle.stream)))
    text = " ".join(terminal(nothing, tty=False).split())
    assert "Engine: unidentified, nothing tells (no engine evidence)" in text
    assert "--engine URL or --log PATH would name it" in text


def test_verbose_names_a_startup_error_with_its_log_line() -> None:
    lines = [*LOG_LINES, "(EngineCore_DP0 pid=7) ERROR 10-03 16:22:17 [core.py:700] EngineCore failed to start",
             "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`."]
    out = terminal(analyze(bundles.bundle(log=bundles.log(lines))), tty=False, verbose=True).splitlines()
    assert any(line.startswith("startup error (no-cache-memory, line 6): ") for line in out)


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


@pytest.mark.parametrize("long_context", [False, True])
def test_demo_run_says_a_numerics_change_differently_too(report: Report, long_context: bool) -> None:
    """A numerics change's verify text names the answers gate instead of the shared rerun: a demo
    still points it at the healthy scenario, keeping what to expect."""
    gated = f"{gated_rerun_instruction(long_context=long_context)}; expect the KV cache doubled"
    assert verify_text(as_demo(report), gated) == f"{DEMO_RERUN_INSTRUCTION}; expect the KV cache doubled"
    assert verify_text(report, gated) == gated


def test_piped_cli_output_is_short_plain_and_never_shortened(tmp_path) -> None:
    """A pipe or cron mail gets lines of at most PIPE_WIDTH columns, without trailing spaces or
    colour, where rich would assume 80 (``COLUMNS`` unset); nothing is cut short with "…", and
    each check's row starts with its code, name and outcome on one line, for ``| grep``."""
    save(real_buffering_bundle(), tmp_path / "b.json")
    result = CliRunner().invoke(app, ["analyze", str(tmp_path / "b.json"), "-v", "--json", str(tmp_path / "r.json")],
                                env={"COLUMNS": ""})
    data = json.loads((tmp_path / "r.json").read_text())
    lines = result.stdout.splitlines()
    assert "…" not in result.stdout and "\x1b" not in result.stdout
    assert all(len(line) <= PIPE_WIDTH and line == line.rstrip() for line in lines), max(lines, key=len)
    assert any(len(line) > 80 for line in lines)
    flat = " ".join(result.stdout.split())
    assert " ".join(data["verdict"]["summary"].split()) in flat
    assert f"{sum(r['outcome'] == 'pass' for r in data['results'])} checks passed" in result.stdout
    rows = [line.split() for line in lines]
    for r in data["results"]:  # every check's row: code, name, outcome and its message's first word on a line
        assert [r["code"], r["name"], r["outcome"], r["message"].split()[0]] in [row[:4] for row in rows], r


def test_columns_sets_the_width_of_piped_output(tmp_path) -> None:
    save(real_buffering_bundle(), tmp_path / "b.json")
    for columns in (60, 200):
        out = CliRunner().invoke(app, ["analyze", str(tmp_path / "b.json"), "-v"], env={"COLUMNS": str(columns)}).stdout
        prose = [line for line in out.splitlines() if not line.startswith(" ") and "  " not in line]  # no table rows
        assert max(map(len, prose)) <= columns and (columns == 60 or max(map(len, prose)) > PIPE_WIDTH)


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


def test_probe_progress_is_a_stderr_line_per_request_and_stdout_stays_json(tmp_path) -> None:
    """A probe can run for minutes: each finished request says so on stderr, stdout keeps the document."""
    with SseServer() as srv:
        result = CliRunner().invoke(app, [
            "diagnose", "--engine", srv.base(itl=0.001, n=3), "--gateway", srv.base(fail="status"),
            "--requests", "2", "--warmup", "1", "--route", "chat", "--no-gpu", "--no-host", "--no-metrics",
            "--format", "json", "--html", str(tmp_path / "r.html")])
    doc = json.loads(result.stdout)  # nothing but the report on stdout
    assert doc["verdict"]["symptom"], result.stderr
    progress = [line.removeprefix("… ") for line in result.stderr.splitlines()]
    start = next(i for i, line in enumerate(progress) if line.startswith("streaming probe:"))
    gateway = [line for line in progress if line.startswith("gateway ")]
    assert gateway == ["gateway warm-up 1/1 http-status 500", "gateway 1/2 http-status 500", "gateway 2/2 http-status 500"]
    requests = [r for r in doc["bundle"]["stream"]["requests"] if r["path"] == "direct"]
    assert [r["warmup"] for r in requests] == [True, False, False]
    expected = [f"direct{' warm-up' if r['warmup'] else ''} {k}/{n} ok, TTFT {fmt_seconds(r['t_first_token'] - r['t_scheduled'])}, "
                "3 token(s)" for r, (k, n) in zip(requests, [(1, 1), (1, 2), (2, 2)], strict=True)]
    assert [line for line in progress if line.startswith("direct ")] == expected
    assert progress.index(expected[0]) > start and progress.index(gateway[-1]) > start
