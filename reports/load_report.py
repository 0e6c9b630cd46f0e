"""What ``llm-doctor load`` writes: the scenario's numbers in its own terms, beside the report.

The rows are worded once (``load_rows``) for the terminal, the HTML section and each level of a
sweep. Offline is throughput only (MLPerf: its latencies mean nothing, every request waited for
the batch); single-stream and server show latency percentiles with their early-stopping bound,
and server adds offered vs achieved arrivals and the late ones (no coordinated omission: their
latency still counts from the schedule).
"""

from __future__ import annotations

from typing import Any

from rich.console import Console

from doctor.derive.load_summary import LoadSummary
from doctor.evidence.stream import LATE_AFTER_S
from doctor.foundation.serial import to_jsonable
from doctor.foundation.units import UNKNOWN, fmt_pct, fmt_seconds
from doctor.model import Report
from reports.json_doc import report_dict
from reports.terminal import fitted, grid, printer


def _rate(value: float | None, unit: str) -> str:
    return UNKNOWN if value is None else f"{value:.3g} {unit}"


def _p90(p90: float | None, early: float | None) -> str:
    bound = f" (early-stopping bound {fmt_seconds(early)})" if early is not None else ""
    return fmt_seconds(p90) + bound


def load_rows(s: LoadSummary) -> list[tuple[str, str]]:
    """(label, value) rows of one summary, as the scenario reads it."""
    rows = [("requests", f"{s.n} sent, {s.n_ok} ok, {s.n_failed} failed")]
    if s.scenario != "offline":
        rows += [
            ("TTFT p50 / p90 / p99", f"{fmt_seconds(s.ttft_p50_s)} / {_p90(s.ttft_p90_s, s.ttft_p90_early_s)} / {fmt_seconds(s.ttft_p99_s)}"),
            ("TPOT p50 / p90", f"{fmt_seconds(s.tpot_p50_s)} / {_p90(s.tpot_p90_s, s.tpot_p90_early_s)}"),
            ("ITL p50 / p90", f"{fmt_seconds(s.itl_p50_s)} / {fmt_seconds(s.itl_p90_s)}"),
            ("E2E p50 / p90", f"{fmt_seconds(s.e2e_p50_s)} / {fmt_seconds(s.e2e_p90_s)}"),
        ]
        if s.p90_note:
            rows.append(("p90", s.p90_note))
        rows.append(("budgets", "over " + " and ".join(b.upper() for b in s.over_budgets) if s.over_budgets
                     else "within both"))
    rows += [
        ("throughput", f"{_rate(s.requests_per_s, 'requests/s')}, {_rate(s.output_tokens_per_s, 'output tokens/s')}"),
        ("goodput", (f"{_rate(s.goodput_rps, 'requests/s')} within TTFT {fmt_seconds(s.ttft_budget_s)} and TPOT "
                     f"{fmt_seconds(s.tpot_budget_s)} ({fmt_pct(s.good_fraction)} of requests)")),
    ]
    if s.offered_rps is not None:
        rows.append(("arrivals", f"offered {_rate(s.offered_rps, '/s')} (Poisson), achieved {_rate(s.achieved_rps, '/s')}"))
        late = f"{s.late} ({fmt_pct(s.late_fraction)}), the latest {fmt_seconds(s.late_max_s)} behind schedule"
        if s.late:
            late += ": the client could not offer this load; their latency counts from the schedule"
        rows.append((f"late arrivals (> {fmt_seconds(LATE_AFTER_S)})", late))
    if s.cost_per_million_output_tokens is not None:
        rows.append(("cost", f"{s.cost_per_million_output_tokens:.3g} per million output tokens at this throughput"))
    if s.client_suspect:
        rows.append(("client suspect", "; ".join(s.client_reasons or [])))
    return rows


def load_dict(report: Report, summary: LoadSummary | None, missing: str | None) -> dict[str, Any]:
    """The JSON report with the scenario and its ``summary`` (``summary.ttft_p90_s`` ...) on top."""
    data = report_dict(report)
    data["scenario"] = report.bundle.run.scenario
    data["summary"] = to_jsonable(summary) if summary is not None else None
    if missing:
        data["summary_missing"] = missing
    return data


def print_load(summary: LoadSummary | None, missing: str | None, console: Console) -> None:
    """The scenario's table; the report's own summary follows it."""
    say = printer(console)
    if summary is None:
        say(f"[red]no load summary:[/] {missing}")
        return
    say(f"[bold]{summary.scenario} scenario[/] on the {summary.path} path")
    say(fitted(grid(("", ""), load_rows(summary), wrap=[1]), console))
    say()
