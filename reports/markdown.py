"""A short Markdown summary for pasting into a ticket or a chat thread.

Issue trackers render inline HTML and links in Markdown, so text that reaches the summary
(which may quote the target: model names, labels, log lines) is escaped by ``md``, but only
where Markdown would act on it: brackets (links, images), a ``<`` that opens a tag, comment or
autolink, an ``&`` that spells an entity, pipes (table cells), backslashes; newlines are
flattened. Everything else stays as typed, so "lag p99 85.4 ms > 10 ms" reads the same in a
chat tool that shows the Markdown source as in one that renders it. Code spans the checks
write (`proxy_buffering off;`) are kept: inside a code span nothing is interpreted.
"""

from __future__ import annotations

import re

from doctor.foundation.units import counted
from doctor.model import Report
from reports.shared_parts import (
    PARTIAL_NOTE,
    engine_line,
    fmt_evidence,
    headline,
    key_numbers,
    passed_count,
    strip_controls,
    verify_text,
    view,
)

_SPECIAL = str.maketrans({"|": "\\|", "[": "\\[", "]": "\\]", "\\": "\\\\", "\n": " ", "\r": " "})
#: ``<`` before a letter, ``/``, ``!`` or ``?`` may open an HTML tag, a comment or an autolink;
#: ``&`` before ``name;`` or ``#123;`` is an entity. Elsewhere both are plain characters.
_MARKUP_START = re.compile(r"<(?=[A-Za-z/!?])|&(?=#?\w+;)")
_CODE_SPAN = re.compile(r"(`[^`\n]+`)")


def md(text: object) -> str:
    """Escape text for Markdown prose or a table cell, keeping its `code spans` intact."""
    parts = _CODE_SPAN.split(strip_controls(str(text)))
    return "".join(p.replace("\n", " ").replace("|", "\\|") if i % 2
                   else _MARKUP_START.sub(lambda m: "\\" + m.group(), p.translate(_SPECIAL))
                   for i, p in enumerate(parts))


def code(text: object) -> str:
    """A code span that survives backticks in the value."""
    value = strip_controls(str(text)).replace("\n", " ").replace("|", "\\|")
    fence = "``" if "`" in value else "`"
    return f"{fence} {value} {fence}" if fence == "``" else f"`{value}`"


def render_markdown(report: Report, full_report: str | None = None) -> str:
    """A few lines for a ticket or chat: verdict, the one change, how to verify, the findings.

    ``full_report``: the file name of the HTML (or JSON) report written beside it, which the
    footer points at; without one the footer says how to get one, not a report that is not there.
    """
    v = report.verdict
    lines = [f"### llm-doctor: **{v.symptom.value}**: {md(headline(report))}", ""]
    if report.bundle.interrupted:
        lines += [f"> **{PARTIAL_NOTE}**", ""]
    lines += [md(v.summary), ""]
    if (engine := engine_line(report)) is not None:
        lines += [md(engine), ""]
    if v.client_suspect:
        lines += ["> The probing client may have distorted these timings (client self-check).", ""]
    if v.primary_remediation:
        r = v.primary_remediation
        now = f" (now {md(r.current)})" if r.current else ""
        where = f" in {md(r.where)}" if r.where else ""
        lines += [f"**Change one thing:** {code(r.setting)} → {code(r.suggested)}{now}{where}", "",
                  f"**Why:** {md(r.why)}", "", f"**Verify:** {md(verify_text(report, r.verify))}", ""]
    if v.missing:
        lines += [f"**Missing evidence:** {md('; '.join(v.missing))}", ""]
    stats, _ = view(report, "stream_stats")
    numbers = key_numbers(stats)
    paths = list(stats.paths) if stats else []
    if paths:
        lines += ["| | " + " | ".join(md(p) for p in paths) + " |", "|---|" + "---:|" * len(paths)]
        lines += [f"| {label} | " + " | ".join(values[p] for p in paths) + " |" for label, values in numbers]
        lines.append("")
    if report.findings:
        lines += [f"**Findings ({len(report.findings)})**", "", "| severity | check | finding | change |", "|---|---|---|---|"]
        for f in report.findings:
            lines.append(f"| {f.severity.value}{'' if f.felt else ' (risk, not felt)'} | {f.code} {md(f.name)} | {md(f.summary)} | "
                         f"{code(f.remediation.setting)} → {code(f.remediation.suggested)} |")
        lines.append("")
    primary = next((f for f in report.findings if f.code == v.primary_code), None)
    if primary and primary.evidence:
        lines += [f"**Evidence for {primary.code}:**", ""]
        lines += [f"- {md(e.name)}: {md(fmt_evidence(e.value, e.unit))} ({md(e.source)})" for e in primary.evidence]
        lines.append("")
    run = report.bundle.run
    facts = [f"llm-doctor {md(report.tool_version)}", f"{counted(passed_count(report), 'check')} passed"]
    facts += [f"{label} {md(value)}" for label, value in
              (("model", run.model), ("vLLM", run.vllm_version), ("region", run.region), ("run", run.started_at)) if value]
    if full_report:
        where = f"Full evidence: {md(full_report)} ({code('llm-doctor analyze ' + full_report)} re-analyses it)"
    else:
        where = f"No full report was written with this summary ({code('--html PATH')} writes one)"
    lines.append("_" + "; ".join(facts) + f". {where}._")
    return "\n".join(lines) + "\n"
