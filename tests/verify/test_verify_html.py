"""The verify page: nothing an endpoint answered becomes markup, and the KL chart draws each prompt against its floor."""

from __future__ import annotations

from doctor.runs.verify_outcome import Endpoint, VerifyResult
from doctor.verify.answers import Answer, ToolCall
from doctor.verify.gate import decide
from doctor.verify.needles import decide_needles, needles
from doctor.verify.prompts import Prompt
from doctor.verify.scoring import PromptScore, Scored
from reports.charts import FloorRow, floor_chart
from reports.verify_report import render_verify_html
from tests.reports.test_report_xss import ALLOWED_TAGS, EVIL, PAYLOADS
from tests.support.html_dom import inventory


def hostile_result() -> VerifyResult:
    prompts = [Prompt(f"p{i}{EVIL}", "chat", {"messages": [{"role": "user", "content": "q"}]}, kind=EVIL) for i in range(3)]
    base = {p.id: [Answer(p.id, text=f"{EVIL} one", model=EVIL, prompt_tokens=3)] * 3 for p in prompts}
    cand = {p.id: [Answer(p.id, text=f"{EVIL} two", model=EVIL + "2", prompt_tokens=4,
                          tool_calls=[ToolCall(EVIL, EVIL)])] * 2 for p in prompts}
    scored = Scored([PromptScore(p.id, 10, 0.5, 0.001, why=EVIL) for p in prompts], kl_mean=0.5, kl_p99=0.6,
                    floor_mean=0.001, floor_p99=0.002, tokens=30)
    wrong = {n.id: [Answer(n.id, text=EVIL, prompt_tokens=3000)] * 2 for n in needles()}
    right = {n.id: [Answer(n.id, text=n.sentence, prompt_tokens=3000)] * 3 for n in needles()}
    return VerifyResult(baseline=Endpoint("baseline", EVIL, EVIL, EVIL), candidate=Endpoint("candidate", EVIL, EVIL, EVIL),
                        answers=decide(prompts, base, cand, scored), long_context=decide_needles(right, wrong, 4096), notes=[EVIL])


def test_no_answer_model_name_or_note_became_markup():
    html = render_verify_html(hostile_result())
    inv = inventory(html)
    assert {tag for tag, _ in inv.tags} <= ALLOWED_TAGS | {"ul"} and inv.scripts == [] and inv.comments == []
    assert not [(tag, name) for tag, attrs in inv.tags for name in attrs if name.lower().startswith("on")]
    assert all((a.get("href") or "#").startswith("#") for _, a in inv.tags)
    text = "".join(inv.text)
    for payload in PAYLOADS[:6]:
        assert payload in text
    assert text.count("<script>alert(1)</script>") >= 20 and "\x1b" not in html
    assert len(inv.styles) == 1 and "</" not in inv.styles[0]


def test_the_floor_chart_reads_each_row_against_its_floor_on_a_log_axis():
    rows = [FloorRow("same", 0.0, 0.0), FloorRow("close", 2e-4, 1e-4), FloorRow("broken", 1.3, 1e-4),
            FloorRow("<b>unscored</b>", None, 1e-4, "another tokenizer")]
    svg = str(floor_chart(rows, bar=0.01, bar_name="bar", label="KL", x_label="KL per token"))
    inv = inventory(svg)
    bars = [a for t, a in inv.tags if t == "rect" and a.get("height") == "14"]
    assert [a["class"] for a in bars] == ["fill s1", "fill s1", "bad"]  # only the one over the bar is marked
    widths = [float(a["width"]) for a in bars]
    assert widths[0] == 1.0 and widths[0] < widths[1] < widths[2]  # zero sits at the axis' start
    ticks = [t for t in inv.text if t.startswith("1e")]
    assert ticks[0] == "1e-6" and ticks[-1] == "1e1"
    assert "<b>unscored</b>" in inv.text and "another tokenizer" in inv.text and "<b>" not in svg
