"""A short Markdown summary for pasting into a ticket or a chat thread."""

from __future__ import annotations

from doctor.model import Report


def _cell(text: object) -> str:
    """Markdown table cells cannot hold pipes or newlines."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_markdown(report: Report) -> str:
    v = report.verdict
    lines = [f"## llm-doctor: {v.symptom.value}", "", _cell(v.summary), ""]
    if v.primary_remediation:
        r = v.primary_remediation
        current = f" (now {r.current})" if r.current else ""
        lines += [
            f"**Change one thing:** `{r.setting}` → {r.suggested}{current}. {r.why}",
            "",
            f"**Verify:** {r.verify}",
            "",
        ]
    if report.findings:
        lines += ["| severity | code | finding |", "|---|---|---|"]
        lines += [f"| {f.severity.value} | {f.code} | {_cell(f.summary)} |" for f in report.findings]
        lines.append("")
    passed = sum(1 for r in report.results if r.outcome.value == "pass")
    lines.append(f"{passed} check(s) passed; llm-doctor {report.tool_version}, run {report.bundle.run.started_at}.")
    return "\n".join(lines) + "\n"
