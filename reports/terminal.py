"""The terminal summary: verdict, the one remediation, the findings, the passing-check count.

rich renders colour on a TTY and plain text otherwise (``Console`` decides), so cron output
and CI logs stay readable. Piped output (a cron mail, a CI log, ``| less``) is laid out to
``PIPE_WIDTH`` columns (or ``COLUMNS``) with no trailing spaces (``stdout_console``): sentences wrap between
words and table values fold, but table columns holding identifiers (check codes and names,
fact names, row labels) never wrap or shorten, so ``| grep LD301`` finds the check's row. ``verbose`` adds the evidence values, every check's
outcome and the tables of the HTML page, row for row (``reports.shared_parts``): the per-path
comparison, the startup-log facts with their line numbers and the metrics delta. Text from
the target (log lines, header values, model output) is stripped of control characters before
printing: rich escapes its own markup but passes terminal escape sequences through, and a
hostile ``ESC ]`` sequence can rewrite the screen.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import TextIO, cast

from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from doctor.foundation.units import counted
from doctor.model import Outcome, Report, Severity, Symptom
from reports.request_parts import alignment_line, longest_stalls, request_line, slowest_requests, stall_line
from reports.routing_parts import ROUTER_HEADERS, router_rows, router_title
from reports.shared_parts import (
    PARTIAL_NOTE,
    WITNESS_HEADERS,
    engine_line,
    fmt_evidence,
    headline,
    key_numbers,
    log_fact_rows,
    metric_rows,
    missing_metrics,
    passed_count,
    path_table,
    risks,
    strip_controls,
    verify_text,
    view,
    witness_rows,
)

_STYLE = {Severity.CRITICAL: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}
_SYMPTOM_STYLE = {Symptom.HEALTHY: "bold green", Symptom.INCONCLUSIVE: "bold yellow"}


def clean(text: object) -> str:
    """Target text made inert for a terminal: no control characters, no rich markup."""
    return escape(strip_controls(str(text)))


#: How wide piped output is laid out: rich would assume 80 columns, and a mail reader or a CI
#: log page shows 100 comfortably.
PIPE_WIDTH = 100


class _NoTrailingSpaces(io.TextIOBase):
    """A text stream that drops the spaces before each line end: rich pads every table cell to
    its column's width, and a mail reader or ``diff`` shows them."""

    def __init__(self, out: TextIO) -> None:
        super().__init__()
        self._out = out
        self._pending = ""  # the text after the last line end; rich ends every print with one

    def write(self, text: str) -> int:
        *lines, self._pending = (self._pending + text).split("\n")
        for line in lines:
            self._out.write(line.rstrip(" ") + "\n")
        return len(text)

    def flush(self) -> None:
        self._out.flush()


class _StdoutConsole(Console):
    """A console whose reader may leave early (``| head -1``): rich would ``SystemExit(1)``, ending
    a healthy run with the code of an incident before its files are written; the caller decides
    instead (``doctor.foundation.console.reader_may_leave``)."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError


def stdout_console(file: TextIO | None = None) -> Console:
    """The console for a command's stdout (or ``file``): rich's own on a terminal, else
    ``PIPE_WIDTH`` wide (``COLUMNS`` when it is set) without trailing spaces or colour."""
    out = file or sys.stdout
    console = _StdoutConsole(file=out)
    if console.is_terminal:
        return console
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:  # asked for: a wider mail, a narrower pager
        return _StdoutConsole(file=cast(TextIO, _NoTrailingSpaces(out)), width=int(columns))
    # rich only writes and flushes; typeshed's TextIOBase is no IO[str], though it is one at run time
    return _StdoutConsole(file=cast(TextIO, _NoTrailingSpaces(out)), width=PIPE_WIDTH)


def fitted(table: Table, console: Console) -> Table:
    """``table`` at the console's width, or wider where its identifier columns need it.

    rich fits a table into the console's width by folding the columns that may fold and then
    shortening the others with "…"; an identifier cut short is worse than a long line, so the
    table is given the width its unfoldable columns need (print it with ``crop=False``).
    """
    measure = partial(Measurement.get, console, console.options.update_width(1 << 16), table)
    natural = measure()
    if natural.maximum > console.width:
        _pin_whole_columns(table, console, fold_headers=False)
        if measure().minimum > console.width:
            _pin_whole_columns(table, console, fold_headers=True)
        natural = measure()
    table.width = min(natural.maximum, max(console.width, natural.minimum))
    return table


def _pin_whole_columns(table: Table, console: Console, *, fold_headers: bool) -> None:
    """Fix each unfoldable column at the width of its longest cell (and header, unless
    ``fold_headers``: then the header folds between its words).

    rich measures a cell's minimum as its longest word, even in a column that may not fold, and
    when the whole cells do not fit it narrows the folding columns, down to nothing when there
    is one: the witness table at 60 columns lost its witnesses. A pinned column keeps its cells
    whole, and the measured minimum, which ``fitted`` widens the table to, becomes true.
    """
    for column in table.columns:
        if not column.no_wrap:
            continue
        header = console.render_str(column.header) if isinstance(column.header, str) else column.header
        if not isinstance(header, Text):
            continue
        header.no_wrap, header.overflow = not fold_headers, "fold"
        cells = [cell.plain if isinstance(cell, Text) else console.render_str(cell).plain
                 for cell in column.cells if isinstance(cell, (str, Text))]
        heading = header.plain.split() if fold_headers else header.plain.splitlines()
        column.header = header
        column.width = max([cell_len(line) for cell in cells for line in cell.splitlines()]
                           + [cell_len(part) for part in heading] + [1])


def grid(headers: Sequence[str], rows: Iterable[Sequence[object]], *, wrap: Sequence[int] = ()) -> Table:
    """A borderless table of inert cells; only the columns in ``wrap`` fold on a narrow terminal.

    The others hold identifiers and labels, which a reader greps for: they stay whole. A
    column that may fold holds values (or long names) that would otherwise push the table past
    the terminal's width, where rich shortens cells with "…".
    """
    table = Table(box=None, padding=(0, 2, 0, 0))
    for i, header in enumerate(headers):
        table.add_column(clean(header), no_wrap=i not in wrap, overflow="fold" if i in wrap else "ellipsis")
    for row in rows:
        table.add_row(*(clean(cell) for cell in row))
    return table


def bullets(items: Iterable[str], indent: int = 2) -> Padding:
    """``- item`` lines, each item's continuation lines aligned under its text, not at column 0."""
    table = Table.grid(padding=(0, 1, 0, 0))
    table.add_column(no_wrap=True)
    table.add_column()
    for item in items:
        table.add_row("-", item)
    return Padding(table, (0, 0, 0, indent))


def printer(console: Console) -> Callable[..., None]:
    """``console.print`` without automatic highlighting (numbers in sentences are not worth
    colouring, and plain output must match what a pipe gets) and without cropping a line at
    the console's width (a ``fitted`` table may be wider)."""
    return partial(console.print, highlight=False, crop=False)


def print_report(report: Report, console: Console, verbose: bool = False) -> None:
    """Print the summary; ``verbose`` adds the evidence values, every check's outcome and the tables."""
    say = printer(console)

    v = report.verdict
    style = _SYMPTOM_STYLE.get(v.symptom, "bold red")
    say(f"[{style}]{v.symptom.value.upper()}[/]  [bold]{clean(headline(report))}[/]")
    if report.bundle.interrupted:
        say(f"[bold yellow]{PARTIAL_NOTE}[/]")
    say(clean(v.summary))
    if (line := engine_line(report)) is not None:
        say(f"[dim]{clean(line)}[/]")
    for f in risks(report):
        say(f"  [yellow]risk[/] {f.code} {clean(f.name)}: change {clean(f.remediation.setting)} -> "
            f"{clean(f.remediation.suggested)}")
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
    stats = view(report, "stream_stats")[0]
    paths = list(stats.paths) if stats else []
    if stats and paths and verbose:  # every row of the HTML page's per-path comparison
        say("\n[bold]Per path, as the client felt it[/]")
        say(fitted(grid(("", *paths), ((label, *cells) for label, cells in path_table(stats)),
                           wrap=range(1, len(paths) + 1)), console))
    elif paths:
        say()
        say(fitted(grid(("", *paths), ((label, *(values[p] for p in paths)) for label, values in key_numbers(stats))),
                      console))
    felt, _ = view(report, "user_felt")
    witnesses = witness_rows(felt)
    if witnesses:  # the HTML page's rows: the verdict names one of them, the probe's included
        say("\n[bold]What users felt, by witness[/]")
        say(fitted(grid(WITNESS_HEADERS, witnesses, wrap=(0,)), console))
    print_slowest(report, console)
    routing, _ = view(report, "routing")
    if routing is not None and routing.replicas:
        say(f"\n[bold]Behind {clean(router_title(routing))}[/]")
        say(fitted(grid(ROUTER_HEADERS, router_rows(routing), wrap=(0,)), console))
    for note in routing.notes if routing is not None else []:
        say(f"[yellow]router:[/] {clean(note)}")
    if report.findings:
        say(f"\n[bold]Findings ({len(report.findings)})[/]")
    if report.findings:  # a finding's continuation lines align under its text, not at column 0
        findings = Table.grid(padding=(0, 1, 0, 0))
        findings.add_column(no_wrap=True)
        findings.add_column()
        for f in report.findings:
            risk = "" if f.felt else " (risk, not felt)"
            findings.add_row(f"[{_STYLE[f.severity]}]{f.severity.value}[/]",
                             f"{f.code} {clean(f.name)}{risk}: {clean(f.summary)}")
            if verbose:
                findings.add_row("", f"change [cyan]{clean(f.remediation.setting)}[/] -> {clean(f.remediation.suggested)}")
                for ev in f.evidence:
                    findings.add_row("", f"{clean(ev.name)} = {clean(fmt_evidence(ev.value, ev.unit))}  [dim]{clean(ev.source)}[/]")
        say(Padding(findings, (0, 0, 0, 2)))
    counts = {o: sum(1 for r in report.results if r.outcome is o) for o in Outcome}
    say(
        f"\n{counted(passed_count(report), 'check')} passed, {counted(counts[Outcome.FINDING], 'finding')}, "
        f"{counts[Outcome.NOT_APPLICABLE]} not applicable, {counts[Outcome.MISSING_EVIDENCE]} missing evidence, "
        f"{counted(counts[Outcome.ERROR], 'error')}"
    )
    if verbose:
        say(fitted(grid(("code", "name", "outcome", "message"),
                           ((r.code, r.name, r.outcome.value, r.message) for r in report.results), wrap=(3,)), console))
        print_log_facts(report, console)
        print_metrics_delta(report, console)
    for result in report.results:
        if result.outcome is Outcome.ERROR:  # a failed check is not just a count: say which and why
            say(f"[red]check error[/] {result.code} {clean(result.name)}: {clean(result.message)}")
    for e in report.bundle.errors:
        say(f"[red]evidence error[/] {clean(e.source)} ({clean(e.kind)}): {clean(e.message)}")
    for w in report.warnings:
        say(f"[yellow]warning:[/] {clean(w)}")


def print_slowest(report: Report, console: Console) -> None:
    """The three slowest requests, each split into its hops by the engine's own spans, and the three
    longest stalls with the other requests' prompts computed during them; without spans, one line on
    how to get them (evidence missing, not an error)."""
    say = printer(console)
    hops, missing = view(report, "request_hops")
    if hops is None:
        if missing and missing.startswith("no spans were received"):
            say(f"\n[dim]Per-request hops: {clean(missing)}[/]")
        return
    say("\n[bold]The slowest requests, by hop[/] [dim](the engine's own spans)[/]")
    say(bullets([clean(request_line(row)) for row in slowest_requests(hops)]))
    if stalled := longest_stalls(hops):
        say("[bold]The longest stalls between tokens, and the prompts computed meanwhile[/]")
        say(bullets([clean(stall_line(row)) for row in stalled]))
    for line in [alignment_line(hops), *hops.untraced]:
        if line:
            say(f"  [dim]{clean(line)}[/]")


def print_log_facts(report: Report, console: Console) -> None:
    """The startup-log facts, each with the line it was read from, and the startup errors."""
    say = printer(console)
    facts, missing = view(report, "log_facts")
    say("\n[bold]Startup-log facts[/]" + (f" from {clean(facts.source)}" if facts else ""))
    if facts is None:
        say(f"none: {clean(missing)}")
        return
    for e in facts.errors or []:
        line = f", line {e.line}" if e.line else ""
        say(f"[red]startup error[/] ({clean(e.kind)}{line}): {clean(e.message)}")
    rows = [(f.fact, f"{f.value} ({f.note})" if f.note else f.value, f.line) for f in log_fact_rows(facts)]
    say(fitted(grid(("fact", "value", "log line"), rows, wrap=(1,)), console))


def print_metrics_delta(report: Report, console: Console) -> None:
    """What changed in /metrics over the probe window, and what its /metrics lacked."""
    say = printer(console)
    window, missing = view(report, "metrics_window")
    say("\n[bold]Metrics over the probe window[/]")
    if window is None:
        say(f"none: {clean(missing)}")
        return
    # metric names are identifiers, but long ones: on a narrow terminal they fold rather than lose their end
    say(fitted(grid(("quantity", "over the window", "vLLM metric"), metric_rows(window), wrap=(1, 2)), console))
    if (missing := missing_metrics(window)) is not None:
        say(clean(missing))
    for note in window.notes or []:
        say(f"note: {clean(note)}")
