"""The ``llm-doctor probe`` summary: one column per path, so direct and gateway read side by side.

Every percentile is printed with its n, and p90 with MLPerf's early-stopping estimate (or why
there is none), because a p99 of eight requests is the largest of eight and should say so.
"""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from doctor.derive.stream_stats import Dist, PathStats, StreamStats
from doctor.evidence import Bundle


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.1f}"


def _pcts(d: Dist) -> str:
    if not d.n:
        return "-"
    return f"{_ms(d.p50)} / {_ms(d.p90)} / {_ms(d.p99)} ms (n={d.n})"


def _early(d: Dist) -> str:
    if not d.n:
        return "-"
    if d.p90_early is None:
        return f"insufficient n ({d.n} < 64)"
    p99 = f", p99 {_ms(d.p99_early)} ms" if d.p99_early is not None else ""
    return f"p90 {_ms(d.p90_early)} ms{p99}"


def _plain(d: Dist, unit: str, digits: int = 1) -> str:
    if not d.n:
        return "-"
    return f"p50 {d.p50:.{digits}f}, max {d.max:.{digits}f}{unit} (n={d.n})"


def _rows(p: PathStats) -> list[str]:
    failures = ", ".join(f"{k} {v}" for k, v in sorted(p.failures.items())) or "none"
    return [
        f"{p.n_ok} ok / {p.n_failed} failed (+{p.n_warmup} warm-up)",
        _pcts(p.ttft),
        _early(p.ttft),
        _pcts(p.tpot),
        _pcts(p.itl),
        f"{_ms(p.max_gap.max)} ms ({p.stalls} gap(s) > 5x median)" if p.max_gap.n else "-",
        _plain(p.events_per_read, ""),
        _plain(p.bytes_per_read, " B", 0),
        _pcts(p.headers_to_first_token),
        _pcts(p.first_to_last_token),
        _pcts(p.client_queue),
        failures,
    ]


LABELS = [
    "requests", "TTFT p50/p90/p99", "TTFT early-stopping", "TPOT p50/p90/p99", "ITL p50/p90/p99",
    "largest gap", "events per read", "bytes per read", "headers -> first token", "first -> last token",
    "client queueing", "failures",
]


def print_stream_summary(stats: StreamStats, bundle: Bundle, console: Console) -> None:
    stream = bundle.stream
    shape = stream.shape if stream is not None else None
    head = f"route {stats.route}, concurrency {stats.concurrency}"
    if shape is not None:
        load = f"Poisson {shape.rate:g}/s" if shape.rate else "closed loop"
        head += f", {shape.requests} request(s) per path, {load}, model {shape.model or '(none)'}"
    console.print(escape(head))
    names = list(stats.paths)
    table = Table("", *(f"{n}\n{escape(stats.paths[n].url or '')}" for n in names), box=None)
    columns = [_rows(stats.paths[n]) for n in names]
    for i, label in enumerate(LABELS):
        table.add_row(label, *(escape(col[i]) for col in columns))
    console.print(table)
    if stream is not None:
        c = stream.client
        lag = f"{c.loop_lag_p99_ms:.1f}" if c.loop_lag_p99_ms is not None else "-"
        cpu = f"{c.cpu_percent_max:.0f}" if c.cpu_percent_max is not None else "-"
        console.print(f"client: {escape(c.transport)}; event-loop lag p99 {lag} ms, CPU max {cpu} %")
        if c.suspect:
            console.print("[yellow]client suspect:[/] " + escape("; ".join(c.reasons)))
    for e in bundle.errors_for("stream"):
        console.print(f"[red]evidence error[/] {escape(e.target)} ({escape(e.kind)}): {escape(e.message)}", highlight=False)
