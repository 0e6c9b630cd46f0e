"""What ``llm-doctor compare`` prints: why two runs are unlike, and the side-by-side table.

Sees only a ``doctor.runs.compare_runs.Comparison``. Run-record values come from bundles, which may
come from anyone: every cell goes through ``reports.terminal.clean``.

The table is laid out to the console's width (``reports.terminal``): headers are one word a
line, only the verdict folds (between words), and where even that does not fit (``COLUMNS=60``)
each row is a line of its own instead, its numbers folding beside its name.
"""

from __future__ import annotations

import json
from typing import Any

from rich.cells import cell_len
from rich.console import Console
from rich.table import Table

from doctor.foundation.units import UNKNOWN, fmt_seconds
from doctor.model import PER_TOKEN, Practical
from doctor.runs.compare_runs import Comparison, Decision, FieldDiff, Row
from doctor.runs.rank_tests import ALPHA, EXACT_UP_TO, SMALLEST_TESTABLE
from reports.terminal import clean, fitted, grid, printer

#: The space ``reports.terminal.grid`` keeps after each column.
PADDING = 2


def _shown(value: Any) -> str:
    if value is None:
        return UNKNOWN
    return json.dumps(value, sort_keys=True, default=str) if isinstance(value, dict | list) else str(value)


def _field_rows(diffs: list[FieldDiff]) -> list[list[str]]:
    return [[d.field, _shown(d.base), _shown(d.current)] for d in diffs]


_VERDICT = {Decision.REGRESSION: "REGRESSION", Decision.UNDECIDED: "UNDECIDED"}


def _verdict(row: Row) -> str:
    p = " (too few)" if row.p_value is None and row.decision is Decision.UNDECIDED else ""
    p = p if row.p_value is None else f" (p={row.p_value:.2g})"
    return _VERDICT.get(row.decision, row.decision.value) + p


def _signed(seconds: float) -> str:
    return ("+" if seconds > 0 else "") + fmt_seconds(seconds)


def _shift(row: Row) -> str:
    """``+351 ms (+675%)``: the typical request's shift, the number the threshold is held to (the
    percentage unspaced, so that a narrow column folds only between the two)."""
    if row.shift is None:
        return UNKNOWN
    relative = "" if row.shift_relative is None else f" ({row.shift_relative * 100:+.0f}%)"
    return _signed(row.shift) + relative


HEADERS = ("path", "metric", "base\np50", "current\np50", "base\np90", "current\np90", "shift", "n", "verdict")


def _cells(row: Row) -> list[str]:
    return [row.path, row.metric, fmt_seconds(row.base_p50), fmt_seconds(row.current_p50), fmt_seconds(row.base_p90),
            fmt_seconds(row.current_p90), _shift(row), f"{row.n_base} / {row.n_current}", _verdict(row)]


def _table(rows: list[Row], console: Console) -> Table | None:
    """Every column whole but the verdict, which folds between words into what the console has
    left; None when that is narrower than its longest word. Headers are one word a line, so that
    a column is as wide as its values. The verdict's width is set here, not left to rich, which
    narrows every folding column alike, through the middle of a word."""
    cells = [_cells(r) for r in rows]
    widths = [max(cell_len(line) for text in (header, *column) for line in text.split("\n"))
              for header, column in zip(HEADERS, zip(*cells, strict=True), strict=True)]
    room = console.width - sum(widths[:-1]) - PADDING * len(widths)
    if room < max(cell_len(word) for text in (HEADERS[-1], *(c[-1] for c in cells)) for word in text.split()):
        return None
    table = grid(HEADERS, cells, wrap=(len(HEADERS) - 1,))
    table.columns[-1].width = min(room, widths[-1])
    return table


def _narrow(rows: list[Row]) -> Table:
    """The table's content as a line per row, for a console too narrow for its columns: the row's
    name, then its numbers folding between words beside it."""
    lines = [[r.label, (f"{_verdict(r)}; p50 {fmt_seconds(r.base_p50)} -> {fmt_seconds(r.current_p50)}, "
                        f"p90 {fmt_seconds(r.base_p90)} -> {fmt_seconds(r.current_p90)}, "
                        f"shift {_shift(r)}, n {r.n_base} / {r.n_current}")] for r in rows]
    table = grid(["", ""], lines, wrap=(1,))
    table.show_header = False
    return table


def _print_rows(rows: list[Row], console: Console) -> None:
    """The table where its columns fit the console, else a line per row."""
    table = _table(rows, console)
    printer(console)(fitted(_narrow(rows), console) if table is None else table)


def rule_text(practical: Practical) -> str:
    """The regression rule in one sentence, with the thresholds in force."""
    return (f"A regression is beyond noise (two-sided Mann-Whitney U test over per-request values, ITL: each request's "
            f"median gap; alpha {ALPHA:g}, exact up to {EXACT_UP_TO} requests) and a shift of the typical request "
            f"(the median current-minus-base difference) above {practical.relative * 100:g} % of the base median "
            f"and {practical.ttft_s * 1000:g} ms (TTFT, E2E) or {practical.tpot_s * 1000:g} ms ({', '.join(PER_TOKEN)}).")


def undecided_text(row: Row) -> str:
    """Why ``row`` could not be decided, and about how many requests per run would decide it."""
    n = f"{row.n_base} / {row.n_current} requests"
    if row.shift is None:
        return f"measured in one run only ({n}); at least {row.needed} per run are needed"
    if row.p_value is None:
        seen = f"shift {_shift(row)}, but " if row.shift > (row.threshold or 0.0) else ""
        return f"{seen}{n} are too few to test; about {row.needed} requests per run are needed"
    more = ("the samples show no consistent slowdown to size a run for" if row.needed is None
            else f"about {row.needed} requests per run would tell")
    return f"shift {_shift(row)} is not beyond noise (p={row.p_value:.2g}) with {n}; {more}"


def print_unlike(comparison: Comparison, console: Console, *, refused: bool, head: str | None = None) -> None:
    """Each differing run-record field, base and current, and whether that stops the comparison
    (``head`` replaces the first words, for a caller that compares unlike runs on purpose)."""
    say = printer(console)
    head = head or ("Unlike runs: not compared" if refused else "Unlike runs, compared anyway (--allow-unlike)")
    say(f"[bold yellow]{head}[/]; these run-record fields differ: {clean(', '.join(d.field for d in comparison.unlike))}")
    say(fitted(grid(["field", "base", "current"], _field_rows(comparison.unlike), wrap=(1, 2)), console))
    if refused:
        say("Compare runs that differ only in the change under test, or pass --allow-unlike to see the numbers anyway.")


def print_comparison(comparison: Comparison, console: Console) -> None:
    """Attribution, the table, the rule, and a line naming each regression and each undecided row."""
    say = printer(console)
    if not comparison.attributable:
        names = ", ".join(d.field for d in comparison.engine_changes)
        say(f"[bold yellow]Not attributable:[/] {len(comparison.engine_changes)} engine settings changed ({clean(names)}); "
            "change one setting at a time to know which one moved the latency.")
    elif comparison.engine_changes:
        change = comparison.engine_changes[0]
        say(f"One engine setting changed: {clean(change.field)} {clean(_shown(change.base))} -> {clean(_shown(change.current))}.")
    if not comparison.rows:
        say("No path was probed in both runs: nothing to compare.")
        return
    _print_rows(comparison.rows, console)
    say(f"[dim]{clean(rule_text(comparison.practical))}[/]")
    if comparison.undecided:
        say("[bold yellow]Could not decide:[/]")
        undecided = grid(["", ""], [[r.label, undecided_text(r)] for r in comparison.undecided], wrap=(1,))
        undecided.show_header = False
        say(fitted(undecided, console))
    if comparison.regressions:
        say("[bold red]Regression:[/] " + clean(", ".join(f"{r.label} {_shift(r)}" for r in comparison.regressions)))
    elif not comparison.undecided:
        say("[bold green]No regression:[/] every difference is within noise or under the practical threshold.")


def row_json(r: Row) -> dict[str, Any]:
    """One judged row as JSON: ``compare --json``'s rows, and ``verify``'s latency half."""
    return {"path": r.path, "metric": r.metric, "base": {"p50": r.base_p50, "p90": r.base_p90, "n": r.n_base},
            "current": {"p50": r.current_p50, "p90": r.current_p90, "n": r.n_current}, "p90_change": r.change,
            "p_value": r.p_value, "exact": r.exact, "p_slower": r.slower, "beyond_noise": r.beyond_noise,
            "shift_s": r.shift, "shift_relative": r.shift_relative, "threshold_s": r.threshold,
            "decision": r.decision.value, "regression": r.regression, "needed_requests": r.needed}


def comparison_json(comparison: Comparison, *, refused: bool) -> str:
    """The comparison as one JSON document (``compare --json``): what a gate reads instead of the table.

    ``refused`` says the rows were not computed because the runs are unlike; ``regressions``
    and ``undecided`` name each metric and path as the exit code counts them.
    """
    def diff(d: FieldDiff) -> dict[str, Any]:
        return {"field": d.field, "base": d.base, "current": d.current}

    practical = comparison.practical
    doc = {
        "refused": refused,
        "unlike": [diff(d) for d in comparison.unlike],
        "engine_changes": [diff(d) for d in comparison.engine_changes],
        "attributable": comparison.attributable,
        "test": {"name": "mann-whitney-u", "sided": "two", "alpha": ALPHA, "exact_up_to": EXACT_UP_TO,
                 "min_samples": SMALLEST_TESTABLE},
        "practical": {"relative": practical.relative, "ttft_s": practical.ttft_s, "tpot_s": practical.tpot_s},
        "rows": [] if refused else [row_json(r) for r in comparison.rows],
        "regressions": [] if refused else [r.label for r in comparison.regressions],
        "undecided": [] if refused else [r.label for r in comparison.undecided],
    }
    return json.dumps(doc, indent=2, default=str) + "\n"
