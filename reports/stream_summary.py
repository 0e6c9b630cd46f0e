"""The ``llm-doctor probe`` summary: one column per path, so direct and gateway read side by side.

Every percentile is printed with its n, and each latency with MLPerf's early-stopping estimates
and the note on those n is too small for, because a p99 of eight requests is the largest of
eight and should say so.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from doctor.derive.stream_stats import Dist, PathStats, StreamStats
from doctor.evidence import Bundle
from doctor.foundation.serial import to_jsonable


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.1f}"


def _pcts(d: Dist) -> str:
    if not d.n:
        return "-"
    return f"{_ms(d.p50)} / {_ms(d.p90)} / {_ms(d.p99)} ms (n={d.n})"


def _early(d: Dist) -> str:
    """The early-stopping estimates there are, and ``Dist.note`` on the ones n is too small for."""
    if not d.n:
        return "-"
    parts = [f"{name} {_ms(value)} ms" for name, value in (("p90", d.p90_early), ("p99", d.p99_early)) if value is not None]
    if d.note:
        parts.append(d.note)
    return "; ".join(parts)


def _plain(d: Dist, unit: str, digits: int = 1) -> str:
    if not d.n:
        return "-"
    return f"p50 {d.p50:.{digits}f}, max {d.max:.{digits}f}{unit} (n={d.n})"


def _rows(p: PathStats) -> list[tuple[str, str]]:
    """(label, value) of each row of one path's column."""
    rows = [("requests", f"{p.n_ok} ok / {p.n_failed} failed (+{p.n_warmup} warm-up)")]
    for name, d in (("TTFT", p.ttft), ("TPOT", p.tpot), ("ITL", p.itl), ("E2E", p.e2e)):
        rows += [(f"{name} p50/p90/p99", _pcts(d)), (f"{name} early-stopping", _early(d))]
    return [
        *rows,
        ("largest gap", f"{_ms(p.max_gap.max)} ms ({p.stalls} gap(s) > 5x the typical gap)" if p.max_gap.n else "-"),
        ("events per read", _plain(p.events_per_read, "")),
        ("bytes per read", _plain(p.bytes_per_read, " B", 0)),
        ("headers -> first token", _pcts(p.headers_to_first_token)),
        ("first -> last token", _pcts(p.first_to_last_token)),
        ("client queueing", _pcts(p.client_queue)),
        ("failures", ", ".join(f"{k} {v}" for k, v in sorted(p.failures.items())) or "none"),
    ]


def stream_summary_json(stats: StreamStats, bundle: Bundle) -> dict[str, Any]:
    """The ``probe --json`` document: the per-path statistics, and what qualifies them.

    ``client`` is the client's self-check (a suspect client's timings are its own, not the
    server's) and ``errors`` the stream probe's failures, so a script reading the numbers also
    reads why some are missing. ``client`` is None for a bundle without a stream probe.
    """
    stream = bundle.stream
    return {
        **to_jsonable(stats),
        "client": to_jsonable(stream.client) if stream is not None else None,
        "errors": to_jsonable(bundle.errors_for("stream")),
    }


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
    for cells in zip(*columns, strict=True):
        table.add_row(cells[0][0], *(escape(value) for _, value in cells))
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
