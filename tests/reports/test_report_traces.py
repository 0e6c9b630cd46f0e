"""The per-request join in the reports: the terminal's three slowest, the HTML's waterfalls, the JSON's view.

Built from a bundle whose spans are shaped as vLLM 0.32's (``tests.support.bundles.traced``): two
of twenty requests queued behind other users' long prefills. A span's attributes come from the
engine, so a hostile request id must reach every report as text, never as markup.
"""

from __future__ import annotations

import io
import re

from rich.console import Console

from doctor.checking.runner import analyze
from reports import render_html
from reports.json_doc import render_json
from reports.terminal import print_report
from tests.support import bundles

HOSTILE = '<script>alert(1)</script>"><img src=x onerror=alert(2)>'


def traced_report(hostile: bool = False):
    stream = bundles.stream([bundles.request("direct", i, ttft=t, gaps=[0.03] * 7, start=i * 2.0)
                             for i, t in enumerate([0.2] * 18 + [1.4, 1.31])])
    traces = bundles.traced(stream, {18: 1.12, 19: 1.05}, others=[(0.0, 1.8), (0.9, 0.1)])
    if hostile:
        for span in traces.spans:
            span.attributes["gen_ai.request.id"] = HOSTILE
    return analyze(bundles.bundle(stream=stream, traces=traces))


def terminal(report) -> str:
    out = io.StringIO()
    print_report(report, Console(file=out, width=200, color_system=None))
    return out.getvalue()


def test_the_terminal_explains_the_three_slowest_one_line_each():
    text = terminal(traced_report())
    lines = [line.strip() for line in text.splitlines() if line.strip().startswith("- request")]
    assert len(lines) == 3  # the third is one of the eighteen alike
    assert [re.match(r"- request (\d+)", line).group(1) for line in lines][:2] == ["18", "19"]
    assert lines[0].startswith("- request 18 (direct): TTFT 1.40 s = queue 1.12 s (80 %)")
    assert "LD110" in text


def test_the_verdict_names_the_slow_requests_hop():
    report = traced_report()
    d = report.verdict.decomposition
    assert d.ttft_slow_components[0].name == "queue" and "2 slowest requests" in d.ttft_slow_basis
    assert any(line.startswith("the 2 slowest requests' TTFT") and "queue" in line for line in report.verdict.reasoning)


def test_the_json_carries_the_join_and_the_html_draws_waterfalls():
    report = traced_report()
    doc = render_json(report)
    assert '"request_hops"' in doc and '"slow_hop": "queue"' in doc
    html = render_html(report)
    section = html[html.index("The slowest requests, hop by hop"):]
    assert section.index("<svg") < section.index("Token arrivals")
    assert "queue 1.12 s from" in section  # a hop's own bar, with its tooltip


def test_without_spans_the_reports_say_how_to_turn_tracing_on():
    stream = bundles.stream([bundles.request("direct", i, ttft=0.2, gaps=[0.03] * 3) for i in range(4)])
    for r in stream.requests:
        r.trace_id, r.span_id = f"{r.index + 1:032x}", f"{r.index + 1:016x}"
    report = analyze(bundles.bundle(stream=stream))
    assert "--otlp-traces-endpoint" in terminal(report)
    assert "--otlp-traces-endpoint" in render_html(report)
    assert report.views["request_hops"]["missing"].startswith("no spans were received")


def test_a_hostile_span_attribute_stays_text():
    report = traced_report(hostile=True)
    html = render_html(report)
    assert "<script>alert" not in html and "onerror=alert" not in html.replace("onerror=alert(2)&gt;", "")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "\x1b" not in terminal(report)


def test_the_longest_stalls_name_the_prompt_computed_meanwhile_in_the_terminal_and_the_html():
    """A stream stalled 1.5 s after its 6th token while another user's 1,800-token prompt was computed:
    both reports name the stall, its request and the other request (an engine id, so escaped in HTML)."""
    stream = bundles.stream([bundles.request("direct", i, ttft=0.2, gaps=[0.03] * 5 + [1.5 if i == 3 else 0.03] + [0.03] * 5,
                                             start=i * 4.0) for i in range(6)])
    traces = bundles.traced(stream, {}, prompts=[(3 * 4.0 + 0.35, 1.5, 1800)])
    for span in traces.spans:
        if span.attributes.get("gen_ai.request.id") == "cmpl-user-0":
            span.attributes["gen_ai.request.id"] = HOSTILE
    report = analyze(bundles.bundle(stream=stream, traces=traces))
    text = terminal(report)
    stalls = [line.strip() for line in text.splitlines() if line.strip().startswith("- stall")]
    assert len(stalls) == 1 and stalls[0].startswith("- stall 1.50 s in request 3 (direct) after token 6 (usual gap 30 ms)")
    flat = " ".join(text.split())  # the line folds at the console's width
    assert "after token 6 (usual gap 30 ms), 100 % of it while the engine computed another user's request" in flat
    assert "(1,800 prompt tokens, prefill 1.50 s)" in flat
    html = render_html(report)
    assert "stall 1.50 s in request 3 (direct)" in html and HOSTILE not in html
