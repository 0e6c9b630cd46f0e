"""The terminal summary: verdict, the one remediation, the findings, the passing-check count.

rich renders colour on a TTY and plain text otherwise (``Console`` decides), so cron output
and CI logs stay readable. Piped output is not hard-wrapped (``stdout_console``), and table
columns holding identifiers (check codes and names, path names) never wrap or shorten, so
``| grep`` finds whole lines. ``verbose`` adds the evidence values, the per-path numbers and
every check's outcome. Text from the target (log lines, header values, model output) is
stripped of control characters before printing: rich escapes its own markup but passes
terminal escape sequences through, and a hostile ``ESC ]`` sequence can rewrite the screen.
"""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Table

from doctor.model import Outcome, Report, Severity, Symptom
from reports.summary import HEADLINES, fmt_evidence, key_numbers, passed_count, strip_controls, verify_text, view

_STYLE = {Severity.CRITICAL: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}
_SYMPTOM_STYLE = {Symptom.HEALTHY: "bold green", Symptom.INCONCLUSIVE: "bold yellow"}


def clean(text: object) -> str:
    """Target text made inert for a terminal: no control characters, no rich markup."""
    return escape(strip_controls(str(text)))


def stdout_console() -> Console:
    """The console for a command's stdout: soft-wrapped when it is not a terminal.

    rich hard-wraps at 80 columns when it cannot ask a terminal for its width; a pipe, a log
    file or ``| grep`` then gets sentences cut in two. A terminal keeps rich's wrapping.
    """
    console = Console()
    console.soft_wrap = not console.is_terminal
    return console


def unwrapped(table: Table, console: Console) -> Table:
    """``table`` at its natural width when ``console`` does not wrap (``soft_wrap``), else as is.

    rich lays a table out to the console's width, 80 columns when there is no terminal to ask,
    and folds cells to fit; in a pipe each row should stay one line, whatever its length.
    """
    if console.soft_wrap:
        table.width = Measurement.get(console, console.options.update_width(1 << 16), table).maximum
    return table


def print_report(report: Report, console: Console, verbose: bool = False) -> None:
    """Print the summary; ``verbose`` adds the evidence values and every check's outcome."""
    def say(*objects: object) -> None:
        # No automatic highlighting: numbers in sentences are not worth colouring, and plain
        # output must match what a pipe gets.
        console.print(*objects, highlight=False)

    v = report.verdict
    style = _SYMPTOM_STYLE.get(v.symptom, "bold red")
    say(f"[{style}]{v.symptom.value.upper()}[/]  [bold]{HEADLINES[v.symptom]}[/]")
    say(clean(v.summary))
    if v.client_suspect:
        say("[yellow]client suspect:[/] the probing client may have distorted these timings")
    if v.primary_remediation:
        r = v.primary_remediation
        now = f" (now {clean(r.current)})" if r.current else ""
        where = f" [dim]in {clean(r.where)}[/]" if r.where else ""
        say(f"\n[bold]Change one thing:[/] [bold cyan]{clean(r.setting)}[/] -> "
                      f"[bold cyan]{clean(r.suggested)}[/]{now}{where}")
        if verbose:
            say(f"[bold]Why:[/] {clean(r.why)}")
        say(f"[bold]Verify:[/] {clean(verify_text(report, r.verify))}")
    if v.missing:
        say("[yellow]Missing evidence:[/] " + clean("; ".join(v.missing)))
    stats, _ = view(report, "stream_stats")
    paths = list((stats or {}).get("paths", {}))
    if paths:
        table = Table(box=None, padding=(0, 2, 0, 0))
        for column in ("", *(clean(p) for p in paths)):
            table.add_column(column, no_wrap=True)
        for label, values in key_numbers(stats):
            table.add_row(label, *(values[p] for p in paths))
        say()
        say(unwrapped(table, console))
    if report.findings:
        say(f"\n[bold]Findings ({len(report.findings)})[/]")
    for f in report.findings:
        say(f"  [{_STYLE[f.severity]}]{f.severity.value:8}[/] {f.code} {clean(f.name)}: {clean(f.summary)}")
        if verbose:
            say(f"           change [cyan]{clean(f.remediation.setting)}[/] -> {clean(f.remediation.suggested)}")
            for ev in f.evidence:
                say(f"           {clean(ev.name)} = {clean(fmt_evidence(ev.value, ev.unit))}  [dim]{clean(ev.source)}[/]")
    counts = {o: sum(1 for r in report.results if r.outcome is o) for o in Outcome}
    say(
        f"\n{passed_count(report)} check(s) passed, {counts[Outcome.FINDING]} finding(s), "
        f"{counts[Outcome.NOT_APPLICABLE]} not applicable, {counts[Outcome.MISSING_EVIDENCE]} missing evidence, "
        f"{counts[Outcome.ERROR]} error(s)"
    )
    if verbose:
        table = Table(box=None, padding=(0, 2, 0, 0))
        for column in ("code", "name", "outcome"):
            table.add_column(column, no_wrap=True)
        table.add_column("message", overflow="fold")
        for r in report.results:
            table.add_row(r.code, clean(r.name), r.outcome.value, clean(r.message))
        say(unwrapped(table, console))
    for r in report.results:
        if r.outcome is Outcome.ERROR:  # a failed check is not just a count: say which and why
            say(f"[red]check error[/] {r.code} {clean(r.name)}: {clean(r.message)}")
    for e in report.bundle.errors:
        say(f"[red]evidence error[/] {clean(e.source)} ({clean(e.kind)}): {clean(e.message)}")
    for w in report.warnings:
        say(f"[yellow]warning:[/] {clean(w)}")
