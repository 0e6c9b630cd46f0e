"""The HTML report: verdict first, charts that show the bursts, self-contained, re-analysable."""

from __future__ import annotations

import dataclasses
import json
import math
import re
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from doctor.bundle import from_dict, load_path, save, write_file
from doctor.checking.runner import analyze
from doctor.cli import app
from doctor.evidence import RunRecord
from doctor.foundation.units import fmt_pct, fmt_seconds
from reports import charts, line_charts, render_html, svg_parts
from reports.shared_parts import fmt_bytes
from tests.support import bundles
from tests.support.html_dom import inventory
from tests.support.report_cases import real_buffering_bundle, real_buffering_report

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "checks"
SECTIONS = ["verdict", "witnesses", "evidence", "charts", "findings", "run", "log", "metrics", "machine", "errors", "glossary"]


@pytest.fixture(scope="module")
def html() -> str:
    return render_html(real_buffering_report())


def chart_labels(html: str) -> list[str]:
    return [attrs["aria-label"] or "" for tag, attrs in inventory(html).tags if tag == "svg"]


def test_sections_in_order_verdict_first(html: str) -> None:
    ids = [attrs["id"] for tag, attrs in inventory(html).tags if tag == "section"]
    assert ids == SECTIONS
    verdict = html[html.index('id="verdict"'):html.index('id="evidence"')]
    assert "proxy-only" in verdict and "proxy_buffering" in verdict and "verify" in verdict


def test_every_chart_is_drawn_from_a_real_buffering_run(html: str) -> None:
    labels = chart_labels(html)
    for expected in ("Per-request timeline", "Token arrivals", "Inter-token gap distribution",
                     "KV cache usage", "Running and waiting"):
        assert any(label.startswith(expected) for label in labels), (expected, labels)


def test_ttft_decomposition_bar_when_the_verdict_decomposes() -> None:
    report = real_buffering_report()
    assert any(c.seconds for c in report.verdict.decomposition.ttft_components)
    assert "TTFT decomposition" in chart_labels(render_html(report))


def test_inter_token_bar_totals_what_its_parts_split_not_another_path() -> None:
    """Through a buffering gateway the user's TPOT differs from the engine's; the parts split the
    direct path's TPOT mean, so the bar is labelled and totalled with that."""
    d = real_buffering_report().verdict.decomposition
    assert d.itl_basis == "direct TPOT mean" and d.itl_components
    html = render_html(real_buffering_report())
    total = sum(c.seconds for c in d.itl_components)
    assert f"measured {fmt_seconds(total)}" in html and "direct TPOT mean" in row_labels(html)


def row_labels(html: str) -> list[str]:
    """The charts' row labels as read, their lines (``tspan``) joined by a space."""
    return [" ".join(re.findall(r">([^<>]+)<", label))
            for label in re.findall(r'<text [^>]*class="rowlabel"[^>]*>(.*?)</text>', html)]


def test_a_long_row_label_breaks_between_words_to_fit_the_margin() -> None:
    label = str(charts.row_label("server inter-token latency mean", svg_parts.LEFT - 8, 37))
    lines = re.findall(r"<tspan[^>]*>([^<]*)</tspan>", label)
    assert " ".join(lines) == "server inter-token latency mean"
    assert len(lines) > 1 and all(len(line) <= charts.ROW_LABEL_CHARS for line in lines)


def test_component_shares_name_the_whole_they_divide(html: str) -> None:
    """The column said "share of excess" over shares of the whole mean each bar splits."""
    d = real_buffering_report().verdict.decomposition
    text = " ".join(" ".join(inventory(html).text).split())
    assert "excess" not in text
    for basis, components in ((d.ttft_basis, d.ttft_components), (d.itl_basis, d.itl_components)):
        assert basis and f"share of the {basis}" in text
        whole = sum(c.seconds or 0.0 for c in components)
        assert [c.share for c in components] == pytest.approx([(c.seconds or 0.0) / whole for c in components])


def test_timeline_marks_bursts_on_the_gateway_only() -> None:
    stream = real_buffering_bundle().stream
    assert stream is not None
    bursts = {}
    for req in stream.requests:
        _, clumps = charts._clumps([t.t for t in req.tokens])
        bursts.setdefault(req.path, []).extend(n for _, n in clumps)
    assert bursts["direct"] == []
    assert len(bursts["gateway"]) >= 10 and min(bursts["gateway"]) >= 2 and max(bursts["gateway"]) >= 10


def test_gap_histogram_is_bimodal_through_the_buffer() -> None:
    report = real_buffering_report()
    paths = report.views["stream_stats"]["paths"]
    gaps = {name: [g for r in ps["requests"] for g in r["gaps"]] for name, ps in paths.items()}
    direct, gateway = charts.gap_bins(gaps["direct"]), charts.gap_bins(gaps["gateway"])
    assert direct[0] == 0  # no two direct tokens in the same read
    assert gateway[0] > sum(gateway) / 2  # most gateway tokens came in the same read as the previous one
    slow = sum(gateway[i] for i, edge in enumerate([0.0, *charts._GAP_EDGES]) if edge >= 0.3)
    assert slow >= 10  # and the rest wait for the next buffer flush


def test_self_contained(html: str) -> None:
    inv = inventory(html)
    refs = [v for _, attrs in inv.tags for k, v in attrs.items() if k in ("href", "src", "xlink:href")]
    assert all(v and v.startswith("#") for v in refs)
    assert "url(" not in inv.styles[0] and "@import" not in inv.styles[0]
    assert len(html.encode()) < 400_000  # a few hundred KB, bundle included


def test_run_record_shows_every_field(html: str) -> None:
    run = html[html.index('id="run"'):html.index('id="log"')]
    for f in dataclasses.fields(RunRecord):
        assert f.name.replace("_", " ") in run


def test_print_stylesheet_hides_the_nav_and_opens_the_decomposition(html: str) -> None:
    inv = inventory(html)
    printed = inv.styles[0][inv.styles[0].index("@media print"):]
    assert re.search(r"nav\.top\s*\{\s*display:\s*none", printed)
    assert "grid" not in printed  # the screen layout rules are not repeated for paper
    opened = [attrs for tag, attrs in inv.tags if tag == "details" and "open" in attrs]
    assert len(opened) == 2  # where each TTFT and inter-token component comes from
    assert "Where each TTFT component comes from" in html


def test_probe_shape_agrees_with_the_run_record_and_marks_warmup() -> None:
    """With --payload the shape has no prompt length; the run record's measured one is shown, not "—"."""
    b = real_buffering_bundle()
    assert b.stream is not None
    b.stream.shape.prompt_tokens = None
    b.run.prompt_tokens = 142
    warm = b.stream.requests[0]
    warm.warmup, warm.text_excerpt = True, "Once upon a time"
    b.stream.requests[1].text_excerpt = "There was a fox"
    page = render_html(analyze(b))
    run = page[page.index('id="run"'):page.index('id="log"')]
    assert f"<td>142 / {b.stream.shape.max_tokens}</td>" in run
    rows = [row for row in re.findall(r"<tr>.*?</tr>", run) if "Once upon" in row or "There was" in row]
    assert [("(warm-up)" in row) for row in rows] == [True, False]


def test_glossary_maps_other_tools_names(html: str) -> None:
    glossary = html[html.index('id="glossary"'):]
    assert "GuideLLM" in glossary and "including TTFT" in glossary


@pytest.mark.parametrize("kinds", [
    {},
    {"log": bundles.log(["garbage"])},
    {"stream": bundles.stream([bundles.request("gateway", 0, ttft=0.1, gaps=[], outcome="timeout")])},
], ids=["empty", "log-only", "all-failed"])
def test_sparse_evidence_renders_and_says_what_is_missing(kinds: dict) -> None:
    page = render_html(analyze(bundles.bundle(**kinds)))
    assert [a["id"] for t, a in inventory(page).tags if t == "section"] == SECTIONS
    assert "No /metrics window" in page or "No metrics window" in page


def machine_text(page: str) -> str:
    """The text of the GPU-and-host section, cells joined by " | "."""
    section = page.split('<section id="machine">', 1)[1].split("</section>", 1)[0]
    return " | ".join(inventory(section).text)


def gpu_fixture(case: str) -> dict:
    path = FIXTURES / "gpu-xid-errors" / f"{case}.json"
    return from_dict(json.loads(path.read_text())["bundle"], str(path))


def test_gpu_section_shows_the_xid_watch_and_its_events() -> None:
    b = gpu_fixture("fires-app-illegal-address")
    b.gpu.devices[1].errors.append("ecc_errors_uncorrected: Not Supported")
    text = machine_text(render_html(analyze(b)))
    assert "XID watch | GPUs 0, 1, run clock 0.2–12.5 s" in text
    assert "XID events | XID 31 on GPU 0 ×1; XID 43 on GPU 0 ×2" in text
    assert "not read | GPU 1: ecc_errors_uncorrected: Not Supported" in text
    quiet = machine_text(render_html(analyze(gpu_fixture("quiet-watched-no-events"))))
    assert "XID events | none" in quiet and "not read" not in quiet


def test_gpu_section_says_which_devices_were_not_watched_and_why() -> None:
    text = machine_text(render_html(analyze(gpu_fixture("na-nothing-watched"))))
    assert "XID watch | no GPU watched: no GPU supports XID events" in text
    assert "not watched | GPU 0: Not Supported" in text
    assert "| XID events |" not in text


def test_html_reanalyses_to_the_same_verdict(tmp_path) -> None:
    report = real_buffering_report()
    path = tmp_path / "report.html"
    write_file(path, render_html(report).encode("utf-8"))
    again = analyze(load_path(path))
    assert again.verdict.symptom is report.verdict.symptom
    assert again.verdict.primary_remediation == report.verdict.primary_remediation


def test_cli_analyze_of_an_html_report_writes_every_format(tmp_path) -> None:
    save(real_buffering_bundle(), tmp_path / "bundle.json")
    runner = CliRunner()
    first = runner.invoke(app, ["analyze", str(tmp_path / "bundle.json"), "--html", str(tmp_path / "a.html")])
    assert first.exit_code == 1, first.output  # a finding at warning or above
    second = runner.invoke(app, ["analyze", str(tmp_path / "a.html"), "--html", str(tmp_path / "b.html"),
                                 "--md", str(tmp_path / "b.md"), "--json", str(tmp_path / "b.json")])
    assert second.exit_code == 1, second.output
    assert "PROXY-ONLY" in second.output
    for name in ("b.html", "b.md", "b.json"):
        assert (tmp_path / name).stat().st_size > 0
    assert analyze(load_path(tmp_path / "b.html")).verdict.symptom.value == "proxy-only"


@pytest.mark.slow
def test_real_lab_run_renders_and_reanalyses(lab_diagnoses) -> None:
    """The embedded lab's proxy-buffering scenario, diagnosed end to end through the CLI (the
    session's one diagnosis of it, ``tests/support/lab_runs.py``)."""
    lab = lab_diagnoses("proxy-buffering")
    page = lab.html_path.read_text()
    labels = chart_labels(page)
    assert any(label.startswith("Per-request timeline") for label in labels)
    assert "×" in page  # the timeline marks the gateway's bursts
    first = analyze(load_path(lab.json_path))
    again = analyze(load_path(lab.html_path))
    assert again.verdict.symptom is first.verdict.symptom
    assert "LD301" in {f.code for f in again.findings}
    print(f"lab report: {len(page.encode()) // 1024} KiB", file=sys.stderr)


def test_chart_builder_escapes_text_and_attributes() -> None:
    svg = svg_parts.el("text", {"class": '"><script>'}, "<b>&", svg_parts.el("title", None, "</text>"))
    assert str(svg) == '<text class="&#34;&gt;&lt;script&gt;">&lt;b&gt;&amp;<title>&lt;/text&gt;</title></text>'


def test_nice_ticks_cover_the_range_with_round_steps() -> None:
    assert svg_parts.nice_ticks(0, 7.9, 8) == [0, 1, 2, 3, 4, 5, 6, 7]
    assert svg_parts.nice_ticks(0, 0.35, 5) == [0, 0.1, 0.2, 0.3]
    assert svg_parts.nice_ticks(0, 0, 4) == [0, 0.5, 1.0]  # an empty range still gets an axis


def test_arrival_plot_stays_small_for_long_answers() -> None:
    """Steps closer than the drawing's resolution merge: the size follows the canvas, not the answer."""
    long = charts.token_arrivals({"direct": [[(i * 0.002, 1) for i in range(5000)]]})
    longer = charts.token_arrivals({"direct": [[(i * 0.0002, 1) for i in range(50000)]]})
    assert len(longer) < 1.1 * len(long) < 40_000
    assert "5,000 tokens" not in long and "5000 tokens" in long  # the tooltip still counts every token


def test_gauge_panel_keeps_spikes_and_a_bounded_size() -> None:
    """An hour of 1 s scrapes draws like a minute's, and a one-sample spike is still drawn."""
    hour = [[float(t), 0.2] for t in range(3600)]
    hour[1800][1] = 0.97
    minute = [[float(t), 0.2] for t in range(60)]
    big = line_charts.line_panel([line_charts.Series("KV", hour, "c3")], label="kv", y_label="kv", y_max=1.0)
    small = line_charts.line_panel([line_charts.Series("KV", minute, "c3")], label="kv", y_label="kv", y_max=1.0)
    assert len(big) < 40_000
    spike_y = svg_parts.Scale(0, 1.0, 28 + 150, 28)(0.97)
    assert f",{svg_parts.num(spike_y)}" in big
    assert "<circle" in small and "<circle" not in big  # tooltips only where they stay readable


def test_a_report_reanalyses_with_the_budgets_it_was_made_with(tmp_path, monkeypatch) -> None:
    """The recorded real proxy-buffering run, rendered with its scenario's budgets: opening the
    HTML again (from any directory, whatever llm-doctor.toml lies there) gives the same verdict."""
    from tests.realvllm.scenarios import SCENARIOS

    scenario = SCENARIOS["proxy-buffering"]
    runner = CliRunner()
    first = runner.invoke(app, ["analyze", str(scenario.recorded), *scenario.budget_args(), "--fail-on", "critical",
                                "--html", str(tmp_path / "r.html")])
    assert "PROXY-ONLY" in first.output, first.output
    monkeypatch.chdir(tmp_path)
    (tmp_path / "llm-doctor.toml").write_text("[budgets]\nttft = 5.0\ntpot = 5.0\n")  # implicit: ignored
    again = runner.invoke(app, ["analyze", "r.html", "--json", "again.json"])
    assert "PROXY-ONLY" in again.output, again.output
    # the exit gate is the caller's, not the recorded --fail-on critical: today's default (felt) pages on it
    assert again.exit_code == 1
    verdict = json.loads((tmp_path / "again.json").read_text())["verdict"]
    assert verdict["budgets"] == {"ttft_s": scenario.ttft_budget_s, "tpot_s": scenario.tpot_budget_s}
    assert verdict["primary_remediation"]["setting"] == "proxy_buffering"
    assert "within budget, but" not in again.output
    widened = runner.invoke(app, ["analyze", "r.html", "--ttft-budget", "0.5"])  # a flag wins
    # within the wider budget, the bursts still break the stream: proxy-only, said differently
    assert "PROXY-ONLY" in widened.output and "within budget, but delivered in bursts" in widened.output, widened.output
    explicit = runner.invoke(app, ["analyze", "r.html", "--config", "llm-doctor.toml", "--json", "explicit.json"])
    assert "within budget, but delivered in bursts" in explicit.output, explicit.output  # so does a named file
    assert json.loads((tmp_path / "explicit.json").read_text())["verdict"]["budgets"] == {"ttft_s": 5.0, "tpot_s": 5.0}


def test_a_report_naming_a_check_this_install_lacks_still_reanalyses(tmp_path) -> None:
    """Made where a plugin check LD901 was installed, or by a version with a since-renamed option:
    the unknown keys are left out with a warning, the rest of the recorded analysis still applies."""
    from doctor.evidence.run import AnalysisRecord

    bundle = load_path(FIXTURES.parent / "bundles" / "realvllm-proxy-buffering.json.gz")
    bundle.run.analysis = AnalysisRecord(ttft_budget_s=0.2, tpot_budget_s=0.2, select=["LD3", "LD901"],
                                         settings={"LD901": {"threshold": 3}, "LD301": {"renamed_option": 1}})
    save(bundle, tmp_path / "b.json")
    result = CliRunner().invoke(app, ["analyze", str(tmp_path / "b.json"), "--json", str(tmp_path / "r.json")])
    assert result.exit_code in (0, 1), result.output
    assert "'LD901'" in result.output and "LD301.renamed_option" in result.output
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["verdict"]["budgets"] == {"ttft_s": 0.2, "tpot_s": 0.2}
    assert {r["code"][:3] for r in report["results"]} == {"LD3"}  # the known part of the selection held


def test_a_findings_summary_and_why_start_their_sentences_in_capitals(html: str) -> None:
    """A check's summary starts in lower case to follow "LD301 proxy-buffering: "; on the page it is
    a paragraph of its own, and its why follows a full stop."""
    from reports.shared_parts import sentence

    findings = re.findall(r'<div class="finding [^"]*" id="finding-[^"]*">(.*?)</div>', html, re.S)
    assert findings
    for block in findings:
        summary = re.search(r"\n<p>(.)", block)
        # the value is one code span, or the check's own spans with words between ("... on the streaming location")
        why = re.search(r"</code>[^<]*?(?: \(now [^)]*\))?(?: in .*?)?\. (\S)", block)
        assert summary and summary.group(1).isupper(), block[:200]
        assert why and not why.group(1).islower(), block[:400]
    assert sentence("gateway delivers 16.5 events") == "Gateway delivers 16.5 events"
    for name in ("vLLM preempted", "proxy_buffering is on", "config.json says", "`max_num_seqs` 256"):
        assert sentence(name) == name


def test_a_server_claiming_ten_to_the_400_tokens_still_gets_its_report(tmp_path: Path) -> None:
    """Issue 22 item 11: a token event (and a usage trailer) of 10**400 tokens, which a bundle can
    hold and no float can: the arrivals chart raised OverflowError and `diagnose` wrote no report;
    the stream view failed on the per-token time. Both bound the count (``doctor.foundation.wire.number``)."""
    reqs = [bundles.request("direct", i, ttft=0.1, gaps=[0.01] * 5, start=float(i)) for i in range(3)]
    reqs[0].tokens[1].tokens = 10**400
    reqs[1].completion_tokens = 10**400
    reqs[2].reads[0].nbytes = reqs[2].reads[1].events = 10**400
    save(bundles.bundle(stream=bundles.stream(reqs)), tmp_path / "bundle.json")
    result = CliRunner().invoke(app, ["analyze", str(tmp_path / "bundle.json"), "--html", str(tmp_path / "r.html"),
                                      "--json", str(tmp_path / "r.json")])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert result.exit_code == 0, result.output
    assert "Token arrivals" in " ".join(chart_labels((tmp_path / "r.html").read_text()))
    stats = json.loads((tmp_path / "r.json").read_text())["views"]["stream_stats"]["paths"]["direct"]
    assert stats["tpot"]["n"] == 3 and stats["tpot"]["max"] == pytest.approx(0.01)
    assert stats["bytes_per_read"]["max"] == float(2**63)


def test_numbers_past_a_floats_range_are_shown_not_raised() -> None:
    """What ``bench/fuzz.py`` found in bundles of hostile numbers: each formatter and an axis."""
    assert (fmt_bytes(10**400), fmt_seconds(-(10**400)), fmt_pct(10**400)) == ("inf GiB", "-inf s", "inf %")
    assert svg_parts.nice_ticks(0, math.inf) == [] and svg_parts.nice_ticks(0, 1e308 * 10) == []
