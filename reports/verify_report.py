"""``verify``'s outputs: the terminal (the two verdicts first, then the prompts that differed and
where), a versioned JSON document for a gate, Markdown for a ticket, and a self-contained HTML page.

Answers are the endpoints' text: every one is made inert (``clean`` for the terminal, ``md`` /
``code`` for Markdown, the autoescaping template for HTML) and cut short, except in the JSON (a
machine reads it) and the HTML's answers side by side (whole, escaped, capped at ``HTML_SHOWN``).
The HTML page is the report's kind (``reports.html_page.environment``, the shared style, inline
SVG, no script): the verdicts, the KL per prompt against its floor as a chart
(``reports.charts.floor_chart``), the answers that differ side by side, every prompt in a table.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from markupsafe import Markup
from rich.console import Console

from doctor import __version__
from doctor.runs.verify_outcome import LatencyVerdict, VerifyResult
from doctor.verify.gate import AnswersVerdict, Half, PromptRow, bars
from doctor.verify.needles import NeedleVerdict
from reports.charts import FloorRow, floor_chart
from reports.comparison import row_json
from reports.html_page import environment
from reports.markdown import code, md
from reports.terminal import clean, printer

#: The version of ``verify_json``'s document: bumped when a field changes meaning or goes away.
VERIFY_JSON_VERSION = 1
#: Characters of an answer shown in the terminal and in Markdown.
SHOWN = 100
#: Characters of an answer shown whole in the HTML page's side by side (an answer of megabytes is cut).
HTML_SHOWN = 20_000

_COLOUR = {"PASS": "green", "FAIL": "red", "ABSTAIN": "yellow"}


def _cut(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= SHOWN else text[:SHOWN - 1] + "…"


def _shown(row: PromptRow, side: str, cut: bool = True) -> str:
    answer = row.baseline if side == "baseline" else row.candidate
    if answer is None:
        return "(not asked)"
    if answer.error:
        return f"(no answer: {answer.error})"
    if answer.tool_calls:
        return ", ".join(answer.tools())
    text = _cut(answer.text) if cut else answer.text[:HTML_SHOWN] + ("…" if len(answer.text) > HTML_SHOWN else "")
    return text if text.strip() else "(empty)"


def differing(verdict: AnswersVerdict) -> list[PromptRow]:
    """The prompts worth reading: a structural problem first, then answers whose text differs."""
    return [r for r in verdict.rows if r.problems] + [r for r in verdict.rows if r.differs and not r.problems]


def _where(row: PromptRow) -> str:
    if row.difference is None:
        return ""
    i, base, cand = row.difference
    return f"first differs at word {i + 1}: {base!r} -> {cand!r}"


def _halves(result: VerifyResult) -> list[tuple[str, Half]]:
    return [(name, half) for name, half in (("answers", result.answers), ("long-context", result.long_context),
                                            ("latency", result.latency)) if half is not None]


def print_verify(result: VerifyResult, console: Console) -> None:
    """The verdicts first (each with its reasons), the symptom, then the prompts that differed."""
    say = printer(console)
    for name, half in _halves(result):
        say(f"[bold]{name}: [{_COLOUR[half.decision.value]}]{half.decision.value}[/][/]")
        for reason in half.reasons:
            say(f"  - {clean(reason)}")
        for note in half.notes:
            say(f"  [dim]· {clean(note)}[/]")
    if result.symptom is not None:
        colour = {True: "green", False: "red", None: "yellow"}[result.symptom.fixed]
        say(f"[bold]symptom: [{colour}]{clean(result.symptom.sentence)}[/][/]")
    for note in result.notes:
        say(f"[dim]{clean(note)}[/]")
    sides = [e for e in (result.baseline, result.candidate) if e is not None]
    say("[dim]" + clean("; ".join(f"{e.role}: {e.recorded or e.url} ({e.model or 'model unknown'}, {e.engine or 'engine unidentified'})"
                                   for e in sides)) + "[/]")
    if result.answers is not None:
        rows = differing(result.answers)
        if rows:
            say(f"\n[bold]prompts that differ ({len(rows)} of {len(result.answers.rows)})[/]")
        for row in rows[:20]:
            kl = _kl(row)
            say(f"  {clean(row.prompt_id)} ({clean(row.kind)}){': ' + clean('; '.join(row.problems)) if row.problems else ''}"
                f"{' ' + clean(_where(row)) if row.difference else ''}{kl}")
            say(f"    baseline : {clean(_shown(row, 'baseline'))}")
            say(f"    candidate: {clean(_shown(row, 'candidate'))}")


def _kl(row: PromptRow) -> str:
    s = row.score
    if s is None or s.kl is None:
        return ""
    return f" [dim](KL {s.kl:.4f}, floor {s.floor:.4f})[/]" if s.floor is not None else f" [dim](KL {s.kl:.4f})[/]"


def _answers_json(verdict: AnswersVerdict) -> dict[str, Any]:
    scored = verdict.scored
    return {
        "decision": verdict.decision.value, "reasons": verdict.reasons, "notes": verdict.notes,
        "teacher_forced": None if scored is None else {
            "unavailable": scored.unavailable, "tokens": scored.tokens, "kl_mean": scored.kl_mean, "kl_p99": scored.kl_p99,
            "floor_mean": scored.floor_mean, "floor_p99": scored.floor_p99},
        "prompts": [{
            "id": r.prompt_id, "kind": r.kind, "baseline": r.baseline.to_json(),
            "candidate": r.candidate.to_json() if r.candidate else None, "baseline_stable": r.stable,
            "candidate_stable": r.candidate_stable, "problems": r.problems, "differs": r.differs,
            "first_difference": None if r.difference is None else
            {"word": r.difference[0], "baseline": r.difference[1], "candidate": r.difference[2]},
            "kl": r.score.kl if r.score else None, "floor": r.score.floor if r.score else None,
            "logprob_delta": r.score.delta if r.score else None,
            "not_scored": r.score.why if r.score else None,
        } for r in verdict.rows],
    }


def _latency_json(verdict: LatencyVerdict) -> dict[str, Any]:
    return {"decision": verdict.decision.value, "reasons": verdict.reasons, "notes": verdict.notes,
            "rows": [row_json(r) for r in verdict.rows]}


def _needles_json(verdict: NeedleVerdict) -> dict[str, Any]:
    return {"decision": verdict.decision.value, "reasons": verdict.reasons, "notes": verdict.notes,
            "max_model_len": verdict.max_model_len, "context_tokens": verdict.context_tokens,
            "needles": [asdict(r) for r in verdict.rows]}


def verify_json(result: VerifyResult) -> str:
    """The whole result as one JSON document (``verify_version``), what a gate reads instead of the text."""
    def side(e: Any) -> dict[str, Any] | None:
        return None if e is None else {"url": e.url, "model": e.model, "engine": e.engine, "recorded": e.recorded}

    symptom = result.symptom
    doc = {
        "verify_version": VERIFY_JSON_VERSION, "exit_code": int(result.exit_code()),
        "baseline": side(result.baseline), "candidate": side(result.candidate),
        "answers": _answers_json(result.answers) if result.answers else None,
        "long_context": _needles_json(result.long_context) if result.long_context else None,
        "latency": _latency_json(result.latency) if result.latency else None,
        "symptom": None if symptom is None else {
            "symptom": symptom.symptom, "metric": symptom.metric, "before_p90_s": symptom.before_p90,
            "after_p90_s": symptom.after_p90, "budget_s": symptom.budget_s, "fixed": symptom.fixed, "sentence": symptom.sentence},
        "notes": result.notes,
    }
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def verify_markdown(result: VerifyResult) -> str:
    """A ticket's summary: the verdicts with their reasons, the symptom, and the prompts that differ as a table."""
    out = ["## llm-doctor verify", ""]
    for name, half in _halves(result):
        out.append(f"**{name}: {half.decision.value}**")
        out += [f"- {md(reason)}" for reason in half.reasons] + [f"- _{md(note)}_" for note in half.notes] + [""]
    if result.symptom is not None:
        out += [f"**symptom:** {md(result.symptom.sentence)}", ""]
    out += [f"- {md(note)}" for note in result.notes]
    if result.answers is not None and (rows := differing(result.answers)):
        out += ["", "| prompt | problem / first difference | baseline | candidate |", "|---|---|---|---|"]
        out += [f"| {code(r.prompt_id)} | {md('; '.join(r.problems) or _where(r))} | {md(_shown(r, 'baseline'))} | "
                f"{md(_shown(r, 'candidate'))} |" for r in rows[:30]]
    return "\n".join(out).rstrip() + "\n"


def _decisions(result: VerifyResult) -> tuple[str, str]:
    """(the whole run's decision, one line naming each half's) for the page's head."""
    overall = {0: "PASS", 1: "FAIL"}.get(int(result.exit_code()), "ABSTAIN")
    parts = [f"{name}: {half.decision.value}" for name, half in _halves(result)]
    if result.symptom is not None:
        parts.append(result.symptom.sentence)
    return overall, " · ".join(parts) or "nothing compared"


def kl_chart(verdict: AnswersVerdict) -> Markup | None:
    """Every scored prompt's KL estimate against its floor, the pooled mean's bar as the line; None when nothing was scored."""
    scored = verdict.scored
    if scored is None or scored.unavailable or not scored.prompts:
        return None
    rows = [FloorRow(s.prompt_id, s.kl, s.floor, s.why or "") for s in scored.prompts]
    return floor_chart(rows, bar=bars(scored)[0], bar_name="bar on the mean", x_label="KL estimate per token (log scale)",
                       label="Teacher-forced KL per prompt, candidate against the baseline's own floor")


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}"


def render_verify_html(result: VerifyResult) -> str:
    """The self-contained verify page: the verdicts, the KL chart, the answers that differ side by side, every prompt."""
    overall, headline = _decisions(result)
    verdict = result.answers
    rows = verdict.rows if verdict else []
    fixed = result.symptom.fixed if result.symptom else None
    return environment().get_template("verify.html.j2").render(
        result=result, tool_version=__version__, overall=overall, headline=headline, halves=_halves(result),
        css={"PASS": "healthy", "FAIL": "", "ABSTAIN": "inconclusive"},
        symptom_decision={True: "PASS", False: "FAIL", None: "ABSTAIN"}[fixed],
        chart=kl_chart(verdict) if verdict else None, differ=differing(verdict) if verdict else [],
        where={r.prompt_id: _where(r) for r in rows},
        shown={r.prompt_id: (_shown(r, "baseline", cut=False), _shown(r, "candidate", cut=False)) for r in rows},
        kl={r.prompt_id: (_number(r.score.kl), _number(r.score.floor)) if r.score else ("", "") for r in rows},
        sides=[e for e in (result.baseline, result.candidate) if e is not None],
    )
