"""Nothing that came from the target or its logs becomes markup in any report.

A report is built whose every string field a renderer shows holds script, event-handler,
``javascript:`` and ``</style>`` / ``</script>`` payloads: model names, response header names and
values, generated text, log lines, metric label values, error messages, finding texts, run-record
labels, path names. The HTML is parsed with the standard library's parser and checked for what
an injection would leave behind; the Markdown and terminal outputs are checked for raw HTML and
terminal escape sequences.
"""

from __future__ import annotations

import base64
import io
import json
import lzma

import pytest
from markdown_it import MarkdownIt
from rich.console import Console

from doctor.bundle import EMBED_ID, EMBED_TYPE, load_path
from doctor.checking.runner import analyze
from doctor.evidence import (
    Endpoint,
    EndpointsEvidence,
    EvidenceError,
    GpuDevice,
    GpuEvidence,
    GpuProcess,
    HostEvidence,
    ModelInfo,
    ProcessInfo,
    XidEvent,
    XidWatch,
)
from doctor.foundation.serial import to_jsonable
from doctor.model import (
    CheckResult,
    Component,
    EvidenceValue,
    Finding,
    Outcome,
    Remediation,
    Report,
    Severity,
    SymptomClass,
)
from reports import render_html, render_json, render_markdown
from reports.terminal import print_report
from tests.support import bundles
from tests.support.html_dom import inventory
from tests.support.report_cases import real_buffering_bundle, real_buffering_report

PAYLOADS = [
    "<script>alert(1)</script>",
    '"><img src=x onerror=alert(1)>',
    "'><svg onload=alert(1)>",
    "javascript:alert(1)",
    "</style><script>alert(1)</script>",
    "</script><script>alert(1)</script>",
    "<!--",
    "\x1b]0;pwned\x07\x1b[31m",
]
EVIL = " ".join(PAYLOADS)
JS_URL = "javascript:alert(1)"

#: Every element the report template and the charts emit; an injection would add another.
ALLOWED_TAGS = {
    "html", "head", "meta", "title", "style", "body", "main", "nav", "a", "section", "span", "h1", "h2", "h3",
    "p", "div", "dl", "dt", "dd", "code", "strong", "em", "b", "i", "ol", "li", "table", "tr", "th", "td",
    "figure", "figcaption", "svg", "line", "rect", "text", "tspan", "path", "circle", "polyline", "details", "summary",
    "pre", "br", "script",
}


def _prom_label(value: str) -> str:
    """A label value as the Prometheus text format escapes it."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def hostile_report() -> Report:
    b = real_buffering_bundle(keep_tokens=30)
    # Hostile headers on a direct request. Path names are not free text (``ProbePath``; a bundle
    # naming a third path is refused, tests/collection/test_bundle.py), but the shape's URL map keeps any key.
    evil_path = bundles.request("direct", 99, ttft=0.1, gaps=[0.02] * 5, start=0.0,
                                headers={"content-type": "text/event-stream", "server": EVIL, EVIL: EVIL})
    evil_path.text_excerpt = EVIL
    failed = bundles.request("gateway", 98, ttft=0.1, gaps=[], outcome="http-status")
    failed.error = failed.body_excerpt = EVIL
    assert b.stream is not None
    b.stream.requests += [evil_path, failed]
    for req in b.stream.requests:
        req.text_excerpt = EVIL
        req.headers["server"] = EVIL
    b.stream.shape.model = EVIL
    b.stream.shape.paths[EVIL] = JS_URL
    b.stream.shape.payload = {"model": EVIL, "messages": [{"role": "user", "content": EVIL}]}
    b.stream.shape.payload_source = EVIL
    b.stream.client.transport = EVIL
    b.stream.client.suspect = True
    b.stream.client.reasons = [EVIL]
    b.metrics = bundles.metrics(("before", -0.1, {"vllm:num_requests_running": 0, "vllm:kv_cache_usage_perc": 0.1}),
                                ("after", 3.0, {"vllm:num_requests_running": 1, "vllm:kv_cache_usage_perc": 0.5}),
                                url=JS_URL)
    for scrape in b.metrics.scrapes:
        scrape.text = scrape.text.replace('model_name="m"', f'model_name="{_prom_label(EVIL)}"')
    b.log = bundles.log([f"INFO 11-29 09:12:01 [api_server.py:1812] vLLM API server version {EVIL}", EVIL], source=EVIL)
    b.endpoints = EndpointsEvidence(endpoints=[
        Endpoint(role=EVIL, url=JS_URL, version=EVIL, models=[ModelInfo(id=EVIL, root=EVIL)],
                 http_version=EVIL, headers={EVIL: EVIL, "server": EVIL}),
    ])
    b.gpu = GpuEvidence(available=True, driver_version=EVIL, nvml_version=EVIL, cuda_visible_devices=EVIL,
                        devices=[GpuDevice(index=0, name=EVIL, throttle_reasons=[EVIL],
                                           processes=[GpuProcess(pid=1, name=EVIL)], errors=[EVIL]),
                                 GpuDevice(index=1, name=EVIL, errors=[f"xid_events: {EVIL}", EVIL])],
                        topology={EVIL: EVIL},
                        xid=XidWatch(watched=[0], start_t=0.0, end_t=1.0, reason=EVIL,
                                     events=[XidEvent(gpu=0, xid=31, seen_t=1.0, seen_wall=1.0)]))
    b.host = HostEvidence(hostname=EVIL, os=EVIL, python=EVIL, cpu_model=EVIL,
                          vllm_process=ProcessInfo(pid=1, name=EVIL, cmdline=EVIL, found_by=EVIL))
    b.errors = [EvidenceError(source=EVIL, target=JS_URL, action=EVIL, kind=EVIL, message=EVIL, fatal=True)]
    b.redactions = {EVIL: 1}
    for name in ("model", "model_revision", "served_model_name", "vllm_version", "provider", "region",
                 "client_location", "engine_url", "gateway_url", "metrics_url", "log_source", "arrival"):
        setattr(b.run, name, EVIL)
    b.run.labels = {EVIL: EVIL}
    b.run.engine_config = {EVIL: EVIL}

    report = analyze(b)
    remediation = Remediation(setting=EVIL, suggested=EVIL, why=f"`{EVIL}` {EVIL}", verify=EVIL, current=EVIL, where=EVIL)
    finding = Finding(code="LD999", name="hostile", title=EVIL, severity=Severity.CRITICAL,
                      symptom=SymptomClass.PROXY_ONLY, summary=EVIL, remediation=remediation,
                      evidence=[EvidenceValue(EVIL, EVIL, EVIL, EVIL), EvidenceValue(EVIL, 1.5, "s", EVIL)], cause=EVIL)
    report.findings.insert(0, finding)
    # a risk, listed under the headline (terminal, HTML risks list) with its hostile remediation
    risk = Finding(code="LD998", name="hostile-risk", title=EVIL, severity=Severity.WARNING,
                   symptom=SymptomClass.PROXY_ONLY, summary=EVIL, remediation=remediation, cause=EVIL, felt=False)
    report.findings.insert(1, risk)
    report.results.append(CheckResult(code="LD999", name=EVIL, outcome=Outcome.FINDING,
                                      symptom=SymptomClass.PROXY_ONLY, message=EVIL, finding=finding))
    v = report.verdict
    v.summary, v.reasoning, v.missing, v.client_suspect = EVIL, [EVIL, f"`{EVIL}`"], [EVIL], True
    v.primary_remediation, v.primary_code = remediation, "LD999"
    v.decomposition.ttft_components = [Component(name=EVIL, seconds=0.2, share=0.5, source=EVIL)]
    v.decomposition.itl_components = [Component(name=EVIL, seconds=0.01, share=0.5, source=EVIL)]
    v.budgets = {EVIL: 0.5}
    report.warnings = [EVIL]
    report.tool_version = report.generated_at = EVIL
    # Views are JSON; push the payloads through every part the template reads, whatever the
    # derivations made of the hostile log and scrapes.
    mw = report.views["metrics_window"]
    assert set(mw) != {"missing"}, mw
    mw.update(source=EVIL, finished_by_reason={EVIL: 1.0}, missing=[EVIL], notes=[EVIL], errors=[EVIL],
              metric_names={"preemptions": EVIL, "running": EVIL})
    mw["engines"] = {EVIL: {"engine": EVIL, "model_name": EVIL, "preemptions": None, "requests_finished": None,
                            "kv_usage": None, "running": None, "waiting": None},
                     "1": {"engine": "1", "model_name": EVIL, "preemptions": 1.0, "requests_finished": 2.0,
                           "kv_usage": {"max": 0.5}, "running": {"max": 1}, "waiting": {"max": 0}}}
    report.views["log_facts"] = {
        "source": EVIL,
        "facts": {EVIL: {"value": EVIL, "line": 1, "raw": EVIL, "note": EVIL}},
        "errors": [{"kind": EVIL, "message": EVIL, "line": 2, "raw": EVIL}],
        "stats": [{"line": 3, "timestamp": EVIL, "running": 1.0, "waiting": 0.0, "swapped": None, "pending": None,
                   "kv_usage_pct": 5.0, "cpu_kv_usage_pct": None, "prefix_cache_hit_pct": None,
                   "prompt_throughput": 1.0, "generation_throughput": 2.0, "preemptions": None}],
        "preemption_warnings": 0, "preemptions_cumulative": None, "startups": [],
    }
    return report


@pytest.fixture(scope="module")
def report() -> Report:
    return hostile_report()


@pytest.fixture(scope="module")
def html(report: Report) -> str:
    return render_html(report)


def test_no_payload_became_markup(html: str) -> None:
    inv = inventory(html)
    assert {tag for tag, _ in inv.tags} <= ALLOWED_TAGS
    handlers = [(tag, name) for tag, attrs in inv.tags for name in attrs if name.lower().startswith("on")]
    assert handlers == []
    urls = [(tag, name, value) for tag, attrs in inv.tags for name, value in attrs.items()
            if name.lower() in ("href", "src", "xlink:href", "action", "formaction", "srcset", "poster")]
    assert all(value and value.startswith("#") for _, _, value in urls), urls  # in-page anchors only
    assert not any((value or "").strip().lower().startswith("javascript:") for _, attrs in inv.tags
                   for value in attrs.values())
    assert inv.comments == []


def test_only_script_is_the_embedded_bundle(html: str) -> None:
    inv = inventory(html)
    assert [attrs for attrs, _ in inv.scripts] == [{"type": EMBED_TYPE, "id": EMBED_ID}]
    body = lzma.decompress(base64.b64decode(inv.scripts[0][1], validate=True))
    json.loads(body)  # the whole element body is the bundle, not cut short


def test_style_element_is_the_template_css(html: str) -> None:
    benign = inventory(render_html(real_buffering_report()))
    assert inventory(html).styles == benign.styles
    assert len(benign.styles) == 1 and "</" not in benign.styles[0]


def test_payloads_are_shown_as_text(html: str) -> None:
    text = "".join(inventory(html).text)
    for payload in PAYLOADS[:6]:
        assert payload in text
    assert text.count("<script>alert(1)</script>") >= 40  # every field above shows it, as text
    assert "\x1b" not in html  # terminal escapes are not markup, but have no business in HTML either


def test_gpu_watch_rows_show_payloads_as_text(html: str) -> None:
    """The XID watch's reason and each device's NVML notes reach the GPU section, as text."""
    section = html.split('<section id="machine">', 1)[1].split("</section>", 1)[0]
    text = " | ".join(inventory(section).text)
    script = "<script>alert(1)</script>"
    assert "XID events | XID 31 on GPU 0 ×1" in text
    for row in ("XID watch | GPUs 0, run clock 0.0–1.0 s (1.00 s); ", "not watched | GPU 1: ", "not read | GPU 0: "):
        assert row + script in text, row


def test_csp_forbids_scripts_and_requests(html: str) -> None:
    metas = [attrs for tag, attrs in inventory(html).tags if tag == "meta" and attrs.get("http-equiv")]
    assert metas[0]["content"] == "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


def test_hostile_html_still_reanalyses(html: str, report: Report, tmp_path) -> None:
    path = tmp_path / "report.html"
    path.write_text(html, encoding="utf-8")
    loaded = load_path(path)
    assert to_jsonable(loaded) == to_jsonable(report.bundle)
    assert analyze(loaded).bundle.run.model == EVIL


def test_markdown_has_no_raw_html_or_links(report: Report) -> None:
    """Rendered as GitHub does (CommonMark, raw HTML allowed), the summary holds only our elements."""
    text = render_markdown(report)
    inv = inventory(MarkdownIt("commonmark", {"html": True}).enable("table").render(text))
    assert {tag for tag, _ in inv.tags} <= {"h3", "p", "strong", "code", "table", "thead", "tbody", "tr", "th", "td",
                                            "blockquote", "details", "summary", "ul", "li", "em"}
    assert [attrs for tag, attrs in inv.tags if attrs and tag != "th" and tag != "td"] == []
    assert "<script>alert(1)</script>" in "".join(inv.text)  # shown, as text
    assert "\x1b" not in text


def test_terminal_strips_escape_sequences(report: Report) -> None:
    for tty in (False, True):
        buf = io.StringIO()
        print_report(report, Console(file=buf, width=200, force_terminal=tty), verbose=True)
        out = buf.getvalue()
        assert "\x1b]" not in out and "\x07" not in out  # no OSC sequence (title, hyperlink) from the target
        assert ("\x1b" in out) is tty  # on a TTY only rich's own colours
        assert "<script>alert(1)</script>" in out  # shown, as text


def test_json_round_trips_payloads(report: Report) -> None:
    data = json.loads(render_json(report))
    assert data["verdict"]["summary"] == EVIL
    assert data["findings"][0]["remediation"]["setting"] == EVIL
