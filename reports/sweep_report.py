"""What ``llm-doctor sweep`` prints and writes: the levels, the knee, why, and the setting.

The HTML page is self-contained like the report (same style, inline SVG, no script): the curve
(TTFT p90 and TPOT p90 against the level, each with its budget as a dashed line and the knee
marked; throughput and goodput on their own panel), the recommendation, and one row per level.
"""

from __future__ import annotations

from markupsafe import Markup
from rich.console import Console

from doctor import __version__
from doctor.foundation.units import UNKNOWN, fmt_pct, fmt_seconds
from doctor.runs.sweep_knee import Level, SweepResult
from reports.html_page import environment
from reports.line_charts import level_panel
from reports.terminal import bullets, fitted, grid, printer

#: How the knee line says what stopped the sweep, when it was not a budget.
BINDING = {"client": "the client was the bottleneck", "interrupted": "interrupted"}

LEVEL_HEADERS = ("level", "TTFT p90", "TPOT p90", "requests/s", "goodput/s", "good", "engine", "result")


def _engine_cell(level: Level) -> str:
    e = level.engine
    if not e.known:
        return "no /metrics"
    parts = [f"running {e.running_max:g}" if e.running_max is not None else None,
             f"waiting {e.waiting_max:g}" if e.waiting_max is not None else None,
             f"KV {fmt_pct(e.kv_usage_max)}" if e.kv_usage_max is not None else None,
             f"preempted {e.preemptions:g}" if e.preemptions else None]
    return ", ".join(p for p in parts if p) or "—"


def _rate(value: float | None) -> str:
    return UNKNOWN if value is None else f"{value:.3g}"


def level_rows(result: SweepResult) -> list[list[str]]:
    """One row per level, lightest first."""
    rows = []
    for lv in result.levels:
        s = lv.summary
        over = lv.over(result.budgets)
        verdict = "over " + " and ".join(sorted(over)) if over else "within"
        if lv.suspect:
            verdict += " (client was the bottleneck)"
        if lv.value == result.knee.value:
            verdict += " (knee)"
        rows.append([f"{lv.value:g}", fmt_seconds(s.ttft_judged_s), fmt_seconds(s.tpot_judged_s), _rate(s.requests_per_s),
                     _rate(s.goodput_rps), fmt_pct(s.good_fraction), _engine_cell(lv), verdict])
    return rows


def knee_line(result: SweepResult) -> str:
    knee, unit = result.knee, "streams" if result.by == "concurrency" else "requests/s"
    what = BINDING.get(knee.binding or "", (knee.binding or "").upper() + " binds first")
    if knee.value is None:
        return f"no knee: the lightest level is not within budget ({what})"
    tail = (f"; {what} at {knee.first_over:g}" if knee.first_over is not None
            else f"; every level up to {result.maximum:g} is within budget")
    return f"knee at {knee.value:g} {unit}{tail}"


def recommendation_line(result: SweepResult) -> str:
    r = result.recommendation
    now = f" (now {r.current})" if r.current is not None else ""
    mark = " [inferred: no engine evidence]" if r.inferred else ""
    return f"{r.setting} -> {r.suggested if r.suggested is not None else '?'}{now}{mark}"


def print_sweep(result: SweepResult, console: Console) -> None:
    say = printer(console)
    say(f"[bold]sweep by {result.by}[/]: TTFT budget {fmt_seconds(result.budgets.ttft_s)}, "
        f"TPOT budget {fmt_seconds(result.budgets.tpot_s)} (p90: the early-stopping bound once a level has 64 requests)")
    if result.interrupted:
        say("[bold yellow]interrupted: the levels measured so far[/]")
    say(fitted(grid(LEVEL_HEADERS, level_rows(result), wrap=[6]), console))
    say(f"\n[bold]{knee_line(result)}[/]")
    say(f"[bold]Change one thing:[/] [bold cyan]{recommendation_line(result)}[/]")
    if result.recommendation.why:
        say(bullets(result.recommendation.why))
    costs = [(lv.value, lv.summary.cost_per_million_output_tokens) for lv in result.levels
             if lv.summary.cost_per_million_output_tokens is not None]
    if costs:
        say("cost per million output tokens: " + ", ".join(f"{c:.3g} at {v:g}" for v, c in costs))


def charts(result: SweepResult) -> list[Markup]:
    xs = [lv.value for lv in result.levels]
    x_label = "concurrency (streams)" if result.by == "concurrency" else "offered rate (requests/s)"
    knee = result.knee.value
    return [
        level_panel(xs, {"TTFT p90": [lv.summary.ttft_judged_s for lv in result.levels]}, label="TTFT p90 by level",
                    y_label="TTFT p90", x_label=x_label, budget=result.budgets.ttft_s, knee=knee),
        level_panel(xs, {"TPOT p90": [lv.summary.tpot_judged_s for lv in result.levels]}, label="TPOT p90 by level",
                    y_label="TPOT p90", x_label=x_label, budget=result.budgets.tpot_s, knee=knee),
        level_panel(xs, {"throughput": [lv.summary.requests_per_s for lv in result.levels],
                         "goodput": [lv.summary.goodput_rps for lv in result.levels]},
                    label="throughput and goodput by level", y_label="requests/s", x_label=x_label, knee=knee,
                    y_fmt="{:.3g}".format),
    ]


def render_sweep_html(result: SweepResult) -> str:
    """The self-contained sweep page."""
    return environment().get_template("sweep.html.j2").render(
        result=result, tool_version=__version__, knee=knee_line(result), recommendation=recommendation_line(result),
        headers=LEVEL_HEADERS, rows=level_rows(result), charts=charts(result),
        run_rows=[(k, v) for k, v in result.run.items() if v not in (None, "", [], {}) and not isinstance(v, dict)],
    )
