"""The terminal summary: verdict, the one remediation, the findings, the passing-check count.

rich renders colour on a TTY and plain text otherwise (``Console`` decides), so cron output
and CI logs stay readable. ``verbose`` adds every check's outcome and the evidence values.
"""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from doctor.model import Outcome, Report, Severity, Symptom

_STYLE = {Severity.CRITICAL: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}


def print_report(report: Report, console: Console, verbose: bool = False) -> None:
    v = report.verdict
    style = "bold green" if v.symptom is Symptom.HEALTHY else "bold red"
    console.print(f"[{style}]{escape(v.symptom.value)}[/]  {escape(v.summary)}")
    if v.client_suspect:
        console.print("[yellow]client suspect:[/] the probing client may have distorted these timings")
    if v.primary_remediation:
        r = v.primary_remediation
        now = f" (now {escape(r.current)})" if r.current else ""
        console.print(f"[bold]Change one thing:[/] {escape(r.setting)} -> {escape(r.suggested)}{now}. {escape(r.why)}")
        console.print(f"[bold]Verify:[/] {escape(r.verify)}")
    if v.missing:
        console.print("[yellow]Missing evidence:[/] " + escape("; ".join(v.missing)))
    for f in report.findings:
        console.print(f"  [{_STYLE[f.severity]}]{f.severity.value:8}[/] {f.code} {escape(f.name)}: {escape(f.summary)}")
        if verbose:
            for ev in f.evidence:
                console.print(f"           {escape(ev.name)} = {escape(str(ev.value))} {escape(ev.unit)}  [dim]{escape(ev.source)}[/]")
    counts = {o: sum(1 for r in report.results if r.outcome is o) for o in Outcome}
    console.print(
        f"{counts[Outcome.PASS]} passed, {counts[Outcome.FINDING]} finding(s), "
        f"{counts[Outcome.NOT_APPLICABLE]} not applicable, {counts[Outcome.MISSING_EVIDENCE]} missing evidence, "
        f"{counts[Outcome.ERROR]} error(s)"
    )
    if verbose:
        table = Table("code", "name", "outcome", "message", box=None)
        for r in report.results:
            table.add_row(r.code, r.name, r.outcome.value, escape(r.message))
        console.print(table)
    for e in report.bundle.errors:
        console.print(f"[red]evidence error[/] {escape(e.source)} ({escape(e.kind)}): {escape(e.message)}")
    for w in report.warnings:
        console.print(f"[yellow]warning:[/] {escape(w)}")
