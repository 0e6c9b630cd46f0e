"""What ``llm-doctor compare`` prints: why two runs are unlike, and the side-by-side table.

Sees only a ``doctor.compare.Comparison``. Run-record values come from bundles, which may
come from anyone: every cell goes through ``reports.terminal.clean``.
"""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console

from doctor.compare import ALPHA, MIN_SAMPLES, Comparison, FieldDiff, Row
from doctor.units import UNKNOWN, fmt_seconds
from reports.terminal import clean, fitted, grid, printer


def _shown(value: Any) -> str:
    if value is None:
        return UNKNOWN
    return json.dumps(value, sort_keys=True, default=str) if isinstance(value, dict | list) else str(value)


def _field_rows(diffs: list[FieldDiff]) -> list[list[str]]:
    return [[d.field, _shown(d.base), _shown(d.current)] for d in diffs]


def _judgement(row: Row) -> str:
    if row.p_value is None:
        return f"untested (n < {MIN_SAMPLES})"
    if not row.beyond_noise:
        return f"within noise (p={row.p_value:.2g})"
    return f"{'REGRESSION' if row.regression else 'improvement'} (p={row.p_value:.2g})"


def _change(row: Row) -> str:
    return UNKNOWN if row.change is None else f"{row.change * 100:+.0f} %"


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
    """Attribution, the table, and one line naming each regression beyond noise."""
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
    rows = [[r.path, r.metric, fmt_seconds(r.base_p50), fmt_seconds(r.current_p50), fmt_seconds(r.base_p90), fmt_seconds(r.current_p90),
             _change(r), f"{r.n_base} / {r.n_current}", _judgement(r)] for r in comparison.rows]
    say(fitted(grid(["path", "metric", "base p50", "current p50", "base p90", "current p90", "p90 change", "n", "vs noise"], rows),
                  console))
    say(f"[dim]Noise: two-sided Mann-Whitney U test over per-request values (ITL: each request's median gap), alpha {ALPHA:g}.[/]")
    regressions = comparison.regressions
    if regressions:
        say("[bold red]Regression beyond noise:[/] " + clean(", ".join(f"{r.metric} ({r.path})" for r in regressions)))
    else:
        say("[bold green]No regression beyond noise.[/]")


def comparison_json(comparison: Comparison, *, refused: bool) -> str:
    """The comparison as one JSON document (``compare --json``): what a gate reads instead of the table.

    ``refused`` says the rows were not computed because the runs are unlike; ``regressions``
    names each metric and path beyond noise towards slower, as the exit code counts them.
    """
    def diff(d: FieldDiff) -> dict[str, Any]:
        return {"field": d.field, "base": d.base, "current": d.current}

    doc = {
        "refused": refused,
        "unlike": [diff(d) for d in comparison.unlike],
        "engine_changes": [diff(d) for d in comparison.engine_changes],
        "attributable": comparison.attributable,
        "test": {"name": "mann-whitney-u", "sided": "two", "alpha": ALPHA, "min_samples": MIN_SAMPLES},
        "rows": [] if refused else [
            {"path": r.path, "metric": r.metric, "base": {"p50": r.base_p50, "p90": r.base_p90, "n": r.n_base},
             "current": {"p50": r.current_p50, "p90": r.current_p90, "n": r.n_current}, "p90_change": r.change,
             "p_value": r.p_value, "p_slower": r.slower, "beyond_noise": r.beyond_noise, "regression": r.regression}
            for r in comparison.rows],
        "regressions": [] if refused else [f"{r.metric} ({r.path})" for r in comparison.regressions],
    }
    return json.dumps(doc, indent=2, default=str) + "\n"
