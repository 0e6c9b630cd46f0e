"""The self-contained HTML report: jinja2 with autoescape, no network request, bundle embedded.

This module turns a ``Report`` into what the template shows (chart SVGs, table rows); the
template decides the order and the words. Everything that came from the target (model output,
header values, log lines, label values) reaches the page only through autoescaped template
expressions or ``reports.charts``, which escapes every attribute and text node; control
characters are dropped on the way (``finalize``). The only markup not built that way is the
embedded bundle, xz-compressed and base64-encoded by ``doctor.bundle.embed_text``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from functools import cache, partial
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup, escape

from doctor.bundle import EMBED_ID, EMBED_TYPE, embed_text
from doctor.evidence import RequestTrace
from doctor.model import Component, Finding, Outcome, Report, Severity
from doctor.serial import to_jsonable
from doctor.units import fmt_pct, fmt_seconds
from reports import charts
from reports.summary import (
    HEADLINES,
    fmt_bytes,
    fmt_evidence,
    fmt_value,
    key_numbers,
    strip_controls,
    verify_text,
    view,
)

#: Requests drawn per path in the timeline and the arrival plot: enough to see the pattern,
#: few enough that a 500-request run still gives a report of a few hundred KB.
TIMELINE_PER_PATH = 8
ARRIVALS_PER_PATH = 6


def _printable(value: Any) -> Any:
    """Every ``{{ }}`` value: strings lose their control characters before being escaped."""
    if isinstance(value, str) and not isinstance(value, Markup):
        return strip_controls(value)
    return value


@cache
def environment() -> Environment:
    env = Environment(
        loader=PackageLoader("reports", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=_printable,
    )
    env.filters.update(seconds=fmt_seconds, value=fmt_value, bytes=fmt_bytes, pct=fmt_pct, code=code_spans,
                       evidence=fmt_evidence)
    return env


_CODE_SPAN = re.compile(r"`([^`\n]+)`")


def code_spans(text: Any) -> Markup:
    """Checks write settings as Markdown code spans (`proxy_buffering off;`); show them as code.

    The text is escaped first, so the span's content is inert; only our own ``<code>`` is markup.
    """
    return Markup(_CODE_SPAN.sub(r"<code>\1</code>", str(escape(strip_controls("" if text is None else str(text))))))


def _finite(*values: Any) -> bool:
    """A hand-edited bundle may carry null (NaN) times; charts skip them rather than fail."""
    return all(isinstance(v, (int, float)) and math.isfinite(v) for v in values)


def _since_send(req: RequestTrace, t: float | None) -> float | None:
    base = req.t_sent if req.t_sent is not None else req.t_scheduled
    return max(t - base, 0.0) if _finite(t, base) else None


def _measured(requests: list[RequestTrace], per_path: int, ok_only: bool) -> list[RequestTrace]:
    """The first ``per_path`` measured requests of each path, direct first, in send order."""
    out: list[RequestTrace] = []
    seen: dict[str, int] = {}
    for req in requests:
        if req.warmup or (ok_only and not req.ok) or seen.get(req.path, 0) >= per_path:
            continue
        seen[req.path] = seen.get(req.path, 0) + 1
        out.append(req)
    order = charts.series_index(seen)
    return sorted(out, key=lambda r: (order[r.path], r.index))


def timeline_chart(report: Report) -> Markup | None:
    stream = report.bundle.stream
    if stream is None or not stream.requests:
        return None
    rows = [
        charts.TimelineRow(
            path=r.path,
            label=f"{r.path} #{r.index}",
            headers=_since_send(r, r.t_headers),
            first_token=_since_send(r, r.t_first_token),
            tokens=[t for t in (_since_send(r, ev.t) for ev in r.tokens) if t is not None],
            end=_since_send(r, r.t_end),
            outcome=r.outcome,
        )
        for r in _measured(stream.requests, TIMELINE_PER_PATH, ok_only=False)
    ]
    return charts.request_timeline(rows) if rows else None


def arrivals_chart(report: Report) -> Markup | None:
    stream = report.bundle.stream
    if stream is None:
        return None
    curves: dict[str, list[list[float]]] = {}
    for r in _measured(stream.requests, ARRIVALS_PER_PATH, ok_only=True):
        times = [t for ev in r.tokens if (t := _since_send(r, ev.t)) is not None for _ in range(max(ev.tokens, 1))]
        curves.setdefault(r.path, []).append(times)
    return charts.token_arrivals(curves) if curves else None


def gaps_chart(stream_stats: dict[str, Any] | None) -> Markup | None:
    if not stream_stats:
        return None
    gaps = {
        name: [g for rs in ps.get("requests", []) if not rs["warmup"] and rs["outcome"] == "ok" for g in rs["gaps"]]
        for name, ps in stream_stats.get("paths", {}).items()
    }
    gaps = {k: v for k, v in gaps.items() if v}
    return charts.gap_histogram(gaps) if gaps else None


def decomposition_chart(components: list[Component], total: float | None, budget: float | None,
                        label: str, total_name: str) -> Markup | None:
    segments = [charts.Segment(c.name, c.seconds, c.source) for c in components if c.seconds is not None]
    if not any(s.seconds > 0 for s in segments):
        return None
    return charts.stacked_bar(segments, total=total, budget=budget, label=label, total_name=total_name)


def gauge_charts(metrics_window: dict[str, Any] | None, report: Report) -> list[Markup]:
    """KV usage, and running / waiting requests, over the scrape window when scraped."""
    if not metrics_window:
        return []
    stream = report.bundle.stream
    window = (0.0, stream.duration_s) if stream is not None and stream.duration_s else None

    def samples(key: str) -> list[list[float]]:
        gauge = metrics_window.get(key) or {}
        return [p for p in gauge.get("samples") or [] if len(p) == 2 and _finite(*p)]

    out: list[Markup] = []
    kv = samples("kv_usage")
    if kv:
        out.append(charts.line_panel([charts.Series("KV cache usage", kv, "c3")], label="KV cache usage over the window",
                                     y_label="KV usage", y_max=1.0, y_fmt=lambda v: f"{v:.0%}", window=window))
    queue = [charts.Series(name, pts, cls) for name, pts, cls in
             (("running", samples("running"), "s0"), ("waiting", samples("waiting"), "c1")) if pts]
    if queue:
        out.append(charts.line_panel(queue, label="Running and waiting requests over the window",
                                     y_label="requests", window=window))
    return out


def metric_rows(mw: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The metrics-delta table: (quantity, value over the window, vLLM metric it came from)."""
    names: dict[str, str] = mw.get("metric_names") or {}
    rows: list[tuple[str, str, str]] = [
        ("source", fmt_value(mw.get("source")), ""),
        ("window", fmt_seconds(mw.get("window_s")), ""),
        ("scrapes used", fmt_value(mw.get("scrapes_used")), ""),
    ]
    for key in ("preemptions", "prompt_tokens", "generation_tokens", "prefix_cache_hits", "prefix_cache_queries"):
        value = mw.get(key)
        rows.append((key.replace("_", " "), "not exposed" if value is None else fmt_value(value), names.get(key, "")))
    for reason, count in (mw.get("finished_by_reason") or {}).items():
        rows.append((f"finished: {reason}", fmt_value(count), names.get("finished_by_reason", "")))
    for key in ("ttft", "queue", "prefill", "decode", "itl", "e2e"):
        h = mw.get(key)
        if not h:
            continue
        text = (f"n={fmt_value(h.get('count'))}, mean {fmt_seconds(h.get('mean'))}, p50 ≤ {fmt_seconds(h.get('p50_le'))}, "
                f"p90 ≤ {fmt_seconds(h.get('p90_le'))}, p99 ≤ {fmt_seconds(h.get('p99_le'))}")
        rows.append((f"{key} (server histogram)", text, h.get("metric") or names.get(key, "")))
    for key in ("kv_usage", "running", "waiting"):
        g = mw.get(key)
        if not g:
            continue
        f: Callable[[Any], str] = fmt_pct if key == "kv_usage" else fmt_value
        rows.append((f"{key.replace('_', ' ')} (gauge)", f"min {f(g.get('min'))}, max {f(g.get('max'))}, last {f(g.get('last'))}",
                     names.get(key, "")))
    return rows


def _dist(q: str, fmt: Callable[[Any], str] = fmt_seconds) -> Callable[[dict[str, Any], str], str]:
    """A cell showing quantile ``q`` of a ``Dist`` in the stream-stats view."""
    return lambda ps, key: fmt((ps.get(key) or {}).get(q))


#: The per-path comparison, one row per quantity: (label, stats key, how to show it).
PATH_ROWS: list[tuple[str, str, Callable[[dict[str, Any], str], str]]] = [
    ("URL", "url", lambda ps, k: fmt_value(ps.get(k))),
    ("measured ok / failed / warm-up", "n_ok", lambda ps, k: f"{ps['n_ok']} / {ps['n_failed']} / {ps['n_warmup']}"),
    ("TTFT p50", "ttft", _dist("p50")),
    ("TTFT p90", "ttft", _dist("p90")),
    ("TTFT max", "ttft", _dist("max")),
    ("TPOT p50", "tpot", _dist("p50")),
    ("TPOT p90", "tpot", _dist("p90")),
    ("ITL p50 (every gap)", "itl", _dist("p50")),
    ("ITL p90", "itl", _dist("p90")),
    ("ITL max", "itl", _dist("max")),
    ("longest gap per request, p90", "max_gap", _dist("p90")),
    ("E2E p90", "e2e", _dist("p90")),
    ("headers → first token p50", "headers_to_first_token", _dist("p50")),
    ("first → last token p50", "first_to_last_token", _dist("p50")),
    ("events per read p50 / max", "events_per_read",
     lambda ps, k: f"{_dist('p50', fmt_value)(ps, k)} / {_dist('max', fmt_value)(ps, k)}"),
    ("bytes per read p50", "bytes_per_read", _dist("p50", fmt_bytes)),
    ("stalls (gap > 5 × median)", "stalls", lambda ps, k: fmt_value(ps.get(k))),
    ("warm-up TTFT max", "warmup_ttft", _dist("max")),
    ("client queue p90 (scheduled → sent)", "client_queue", _dist("p90")),
    ("failures", "failures", lambda ps, k: ", ".join(f"{o} {n}" for o, n in (ps.get(k) or {}).items()) or "—"),
]


def path_table(stream_stats: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """``PATH_ROWS`` filled in: one row per quantity, one cell per path."""
    paths = list(stream_stats.get("paths", {}).values())
    return [(label, [show(ps, key) for ps in paths]) for label, key, show in PATH_ROWS]


def colored_key_numbers(stream_stats: dict[str, Any]) -> list[tuple[str, list[tuple[str, int, str]]]]:
    """Key numbers with each path's chart colour, for the strip under the verdict."""
    colour = charts.series_index(stream_stats.get("paths", {}))
    return [(label, [(name, colour[name], text) for name, text in values.items()])
            for label, values in key_numbers(stream_stats)]


def run_rows(report: Report) -> list[tuple[str, Any]]:
    """Every field of the run record, in declaration order; unknown values shown as such."""
    return list(to_jsonable(report.bundle.run).items())


def probe_tokens(report: Report) -> dict[str, int | None]:
    """The probe's prompt and max tokens: the shape's, else the run record's.

    With ``--payload`` the request body sets the lengths and the shape may hold none, while the
    run record has the measured prompt length; the probe-shape table shows that rather than "—"
    next to a run record that gives a number.
    """
    stream, run = report.bundle.stream, report.bundle.run
    prompt = stream.shape.prompt_tokens if stream else None
    most = stream.shape.max_tokens if stream else None
    return {"prompt": run.prompt_tokens if prompt is None else prompt,
            "max": run.max_tokens if most is None else most}


def severity_groups(report: Report) -> list[tuple[str, list[Finding]]]:
    """Findings grouped most severe first (the runner already sorts them; groups make it visible)."""
    groups = [(s.value, [f for f in report.findings if f.severity is s]) for s in sorted(Severity, key=lambda s: -s.rank)]
    return [(name, items) for name, items in groups if items]


def render_html(report: Report) -> str:
    """The whole self-contained page, verdict first, bundle embedded for ``analyze report.html``."""
    stream_stats, stream_missing = view(report, "stream_stats")
    metrics_window, metrics_missing = view(report, "metrics_window")
    log_facts, log_missing = view(report, "log_facts")
    d = report.verdict.decomposition
    counts = {o.value: sum(1 for r in report.results if r.outcome is o) for o in Outcome}
    failed = [r for r in report.bundle.stream.requests if not r.ok] if report.bundle.stream else []
    template = environment().get_template("report.html.j2")
    return template.render(
        report=report,
        verdict=report.verdict,
        bundle=report.bundle,
        stream_stats=stream_stats,
        stream_missing=stream_missing,
        path_rows=path_table(stream_stats) if stream_stats else [],
        key_numbers=colored_key_numbers(stream_stats) if stream_stats else [],
        headline=HEADLINES[report.verdict.symptom],
        metrics_window=metrics_window,
        metrics_missing=metrics_missing,
        metric_rows=metric_rows(metrics_window) if metrics_window else [],
        log_facts=log_facts,
        log_missing=log_missing,
        run_rows=run_rows(report),
        probe_tokens=probe_tokens(report),
        verify=partial(verify_text, report),
        severity_groups=severity_groups(report),
        counts=counts,
        failed_requests=failed,
        chart_timeline=timeline_chart(report),
        chart_arrivals=arrivals_chart(report),
        chart_gaps=gaps_chart(stream_stats),
        chart_ttft=decomposition_chart(d.ttft_components, d.ttft_client_s, d.ttft_budget_s,
                                       "TTFT decomposition", "TTFT"),
        chart_itl=decomposition_chart(d.itl_components, d.tpot_client_s, d.tpot_budget_s,
                                      "Inter-token decomposition", "TPOT"),
        chart_gauges=gauge_charts(metrics_window, report),
        bundle_text=embed_text(report.bundle),
        embed_type=EMBED_TYPE,
        embed_id=EMBED_ID,
    )
