"""What a fleet run prints after its replicas' reports: a row per replica, the imbalance, the verdict.

Sees only a ``doctor.runs.fleet_view.FleetView``. Replica names come from the URLs the user gave, and
summaries from reports: every cell goes through ``reports.terminal.clean``.
"""

from __future__ import annotations

from rich.console import Console

from doctor.foundation.units import UNKNOWN, fmt_seconds
from doctor.runs.fleet_view import ALPHA, FleetView
from reports.terminal import clean, fitted, grid, printer


def print_fleet(view: FleetView, console: Console) -> None:
    say = printer(console)
    rows = [[r.name, r.symptom, fmt_seconds(r.ttft_p90), fmt_seconds(r.tpot_p90),
             UNKNOWN if r.waiting_max is None else f"{r.waiting_max:g}", f"{r.failed} / {r.measured}"] for r in view.rows]
    say(fitted(grid(["replica", "verdict", "TTFT p90", "TPOT p90", "queue max", "failed"], rows), console))
    if view.slowest is not None and view.fastest is not None:
        ratio = "" if view.ttft_ratio is None else f" ({view.ttft_ratio:.1f}x the TTFT p90)"
        if view.p_value is None:
            test = "too few requests to test against noise"
        else:
            test = f"{'beyond' if view.imbalanced else 'within'} noise, Mann-Whitney U p={view.p_value:.2g} at alpha {ALPHA:g}"
        head = "[bold yellow]Replica imbalance:[/]" if view.imbalanced else "Replica spread:"
        say(f"{head} slowest {clean(view.slowest)} against fastest {clean(view.fastest)}{clean(ratio)}: {test}")
    colour = "green" if view.affected == 0 else "red"
    say(f"[bold {colour}]{clean(view.headline)}[/]")
