"""The self-contained HTML report: jinja2 with autoescape, no network request, bundle embedded.

This module turns a ``Report`` into what the template shows (chart SVGs; the table rows come
from ``reports.shared_parts``, which ``--verbose`` prints too); the template decides the order and
the words. Everything that came from the target (model output,
header values, log lines, label values) reaches the page only through autoescaped template
expressions or ``reports.charts``, which escapes every attribute and text node; control
characters are dropped on the way (``finalize``). The only markup not built that way is the
embedded bundle, xz-compressed and base64-encoded by ``doctor.bundle.embed_text``.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from functools import cache, partial
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup, escape

from doctor.bundle import EMBED_ID, EMBED_TYPE, embed_text
from doctor.derive.metrics_window import MetricsWindow
from doctor.derive.stream_stats import StreamStats
from doctor.derive.view_json import GaugeKey
from doctor.evidence import GpuEvidence, RequestTrace
from doctor.evidence.machine import XID_NOTE_PREFIX
from doctor.foundation.serial import to_jsonable
from doctor.foundation.units import counted, fmt_pct, fmt_seconds
from doctor.model import Component, Finding, Outcome, Report, Severity
from doctor.scalers.model import ScalingView
from reports import charts, line_charts, svg_parts
from reports.request_parts import alignment_line, longest_stalls, request_line, slowest_requests, stall_line
from reports.routing_parts import ROUTER_HEADERS, router_rows, router_title
from reports.scaling_report import scaler_rows
from reports.shared_parts import (
    PARTIAL_NOTE,
    WITNESS_HEADERS,
    engine_line,
    fmt_bytes,
    fmt_evidence,
    fmt_value,
    headline,
    key_numbers,
    log_fact_rows,
    metric_rows,
    missing_metrics,
    path_table,
    risks,
    sentence,
    strip_controls,
    verify_text,
    view,
    witness_rows,
)
from reports.sizing_report import sizing_rows

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
    env.filters.update(seconds=fmt_seconds, value=fmt_value, bytes=fmt_bytes, pct=fmt_pct, code=code_spans, setting_value=setting_value,
                       evidence=fmt_evidence, counted=counted,
                       sentence=sentence)
    return env


_CODE_SPAN = re.compile(r"`([^`\n]+)`")


def code_spans(text: Any) -> Markup:
    """Checks write settings as Markdown code spans (`proxy_buffering off;`); show them as code.

    The text is escaped first, so the span's content is inert; only our own ``<code>`` is markup.
    """
    return Markup(_CODE_SPAN.sub(r"<code>\1</code>", str(escape(strip_controls("" if text is None else str(text))))))


def setting_value(text: Any) -> Markup:
    """A remediation's value as code: whole, or, when the check wrote it with its own code spans
    ("`gzip off;` (and `proxy_buffering off;`) on ..."), those spans, never their backticks."""
    if _CODE_SPAN.search("" if text is None else str(text)):
        return code_spans(text)
    return Markup("<code>{}</code>").format(strip_controls("" if text is None else str(text)))


def _finite(*values: Any) -> bool:
    """A hand-edited bundle may carry null (NaN) times; charts skip them rather than fail."""
    return all(isinstance(v, (int, float)) and math.isfinite(v) for v in values)


def _since_send(req: RequestTrace, t: float | None) -> float | None:
    base = req.t_sent if req.t_sent is not None else req.t_scheduled
    return max(t - base, 0.0) if t is not None and base is not None and _finite(t, base) else None


def _measured(requests: list[RequestTrace], per_path: int, ok_only: bool) -> list[RequestTrace]:
    """The first ``per_path`` measured requests of each path, direct first, in send order."""
    out: list[RequestTrace] = []
    seen: dict[str, int] = {}
    for req in requests:
        if req.warmup or (ok_only and not req.ok) or seen.get(req.path, 0) >= per_path:
            continue
        seen[req.path] = seen.get(req.path, 0) + 1
        out.append(req)
    order = svg_parts.series_index(seen)
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


#: The slowest requests drawn as waterfalls.
WATERFALLS = 8


def waterfall_chart(report: Report) -> tuple[Markup | None, list[str]]:
    """The slowest requests' hops as waterfalls; the lines under them: the slowest requests, the longest
    stalls and the prompts computed during them, and what the join could not see."""
    hops, missing = view(report, "request_hops")
    if hops is None:
        return None, [missing] if missing and missing.startswith("no spans were received") else []
    rows = [charts.WaterfallRow(label=f"{r.path} #{r.index}", hops=[(h.name, h.start, h.seconds) for h in r.hops],
                                ticks=r.ticks, ttft=r.ttft) for r in slowest_requests(hops, WATERFALLS)]
    notes = [line for line in [alignment_line(hops), *hops.untraced] if line]
    lines = [request_line(r) for r in slowest_requests(hops)] + [stall_line(r) for r in longest_stalls(hops)]
    return (charts.waterfalls(rows) if rows else None), lines + notes


def arrivals_chart(report: Report) -> Markup | None:
    stream = report.bundle.stream
    if stream is None:
        return None
    curves: dict[str, list[list[tuple[float, int]]]] = {}
    for r in _measured(stream.requests, ARRIVALS_PER_PATH, ok_only=True):
        events = [(t, max(ev.tokens, 1)) for ev in r.tokens if (t := _since_send(r, ev.t)) is not None]
        curves.setdefault(r.path, []).append(events)
    return charts.token_arrivals(curves) if curves else None


def gaps_chart(stream_stats: StreamStats | None) -> Markup | None:
    if not stream_stats:
        return None
    gaps: dict[str, list[float]] = {
        name: [g for rs in ps.requests if not rs.warmup and rs.outcome == "ok" for g in rs.gaps]
        for name, ps in stream_stats.paths.items()
    }
    gaps = {k: v for k, v in gaps.items() if v}
    return charts.gap_histogram(gaps) if gaps else None


def decomposition_chart(components: list[Component], total: float | None, budget: float | None,
                        label: str, total_name: str) -> Markup | None:
    segments = [charts.Segment(c.name, c.seconds, c.source) for c in components if c.seconds is not None]
    if not any(s.seconds > 0 for s in segments):
        return None
    return charts.stacked_bar(segments, total=total, budget=budget, label=label, total_name=total_name)


def gauge_charts(metrics_window: MetricsWindow | None, report: Report) -> list[Markup]:
    """KV usage, and running / waiting requests, over the scrape window when scraped."""
    if not metrics_window:
        return []
    stream = report.bundle.stream
    window = (0.0, stream.duration_s) if stream is not None and stream.duration_s else None

    def samples(key: GaugeKey) -> list[list[float]]:
        gauge = getattr(metrics_window, key)
        return [p for p in (gauge.samples if gauge else None) or [] if len(p) == 2 and _finite(*p)]

    out: list[Markup] = []
    kv = samples("kv_usage")
    if kv:
        out.append(line_charts.line_panel([line_charts.Series("KV cache usage", kv, "c3")], label="KV cache usage over the window",
                                     y_label="KV usage", y_max=1.0, y_fmt=lambda v: f"{v:.0%}", window=window))
    queue = [line_charts.Series(name, pts, cls) for name, pts, cls in
             (("running", samples("running"), "s0"), ("waiting", samples("waiting"), "c1")) if pts]
    if queue:
        out.append(line_charts.line_panel(queue, label="Running and waiting requests over the window",
                                     y_label="requests", window=window))
    return out


def scaler_charts(scaling: ScalingView | None) -> list[Markup]:
    """Each autoscaler's desired and current replicas over the window (kube-state-metrics' history),
    on the window's clock like the engine's queue above it, the ceiling as its top."""
    out: list[Markup] = []
    for history in scaling.history if scaling is not None else []:
        lines = [line_charts.Series(name, [list(p) for p in samples if len(p) == 2 and _finite(*p)], cls)
                 for name, samples, cls in (("desired", history.desired, "c1"), ("current", history.current, "s0"))]
        lines = [line for line in lines if line.samples]
        if lines:
            ceiling = history.ceiling
            out.append(line_charts.line_panel(
                lines, label=f"Replicas of {history.label} over the window",
                y_label="replicas", y_max=ceiling * 1.1 if ceiling is not None and ceiling > 0 else None))
    return out


def colored_key_numbers(stream_stats: StreamStats) -> list[tuple[str, list[tuple[str, int, str]]]]:
    """Key numbers with each path's chart colour, for the strip under the verdict."""
    colour = svg_parts.series_index(stream_stats.paths)
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


def gpu_watch_rows(gpu: GpuEvidence | None) -> list[tuple[str, str]]:
    """The XID watch (window, events, devices not watched and why) and each device's NVML notes."""
    if gpu is None or not gpu.available:
        return []
    rows: list[tuple[str, str]] = []
    watch = gpu.xid
    if watch is None:
        rows.append(("XID watch", "not run (it runs only around a stream probe)"))
    elif not watch.watched:
        rows.append(("XID watch", f"no GPU watched: {fmt_value(watch.reason)}"))
    else:
        window = (f", run clock {watch.start_t:.1f}–{watch.end_t:.1f} s ({fmt_seconds(watch.end_t - watch.start_t)})"
                  if watch.start_t is not None and watch.end_t is not None and _finite(watch.start_t, watch.end_t) else "")
        rows.append(("XID watch", f"GPUs {', '.join(map(str, watch.watched))}{window}"
                                  + (f"; {watch.reason}" if watch.reason else "")))
        counts = Counter((e.xid, e.gpu) for e in watch.events)
        events = "; ".join(f"XID {xid} on GPU {fmt_value(index)} ×{n}" for (xid, index), n in sorted(
            counts.items(), key=lambda c: (c[0][0], -1 if c[0][1] is None else c[0][1])))
        rows.append(("XID events", (events or "none") + (" (more were left unread)" if watch.truncated else "")))
    unwatched = [d for d in gpu.devices if watch is not None and d.index not in watch.watched]
    if unwatched:
        rows.append(("not watched", "; ".join(
            f"GPU {d.index}: " + (next((e.removeprefix(XID_NOTE_PREFIX) for e in d.errors if e.startswith(XID_NOTE_PREFIX)),
                                       None) or fmt_value(watch.reason if watch else None)) for d in unwatched)))
    notes = [f"GPU {d.index}: {e}" for d in gpu.devices for e in d.errors if not e.startswith(XID_NOTE_PREFIX)]
    if notes:
        rows.append(("not read", "; ".join(notes)))
    return rows


def severity_groups(report: Report) -> list[tuple[str, list[Finding]]]:
    """Findings grouped most severe first (the runner already sorts them; groups make it visible)."""
    groups = [(s.value, [f for f in report.findings if f.severity is s]) for s in sorted(Severity, key=lambda s: -s.rank)]
    return [(name, items) for name, items in groups if items]


def render_html(report: Report, load: tuple[str, list[tuple[str, str]]] | None = None) -> str:
    """The whole self-contained page, verdict first, bundle embedded for ``analyze report.html``.

    ``load``: the title and rows of a load scenario (``reports.load_report``), shown after the verdict.
    """
    stream_stats, stream_missing = view(report, "stream_stats")
    metrics_window, metrics_missing = view(report, "metrics_window")
    log_facts, log_missing = view(report, "log_facts")
    sizing, _ = view(report, "sizing")
    scaling, _ = view(report, "scalers")
    routing, _ = view(report, "routing")
    d = report.verdict.decomposition
    counts = {o.value: sum(1 for r in report.results if r.outcome is o) for o in Outcome}
    failed = [r for r in report.bundle.stream.requests if not r.ok] if report.bundle.stream else []
    template = environment().get_template("report.html.j2")
    return template.render(
        report=report,
        load=load,
        verdict=report.verdict,
        bundle=report.bundle,
        stream_stats=stream_stats,
        stream_missing=stream_missing,
        path_rows=path_table(stream_stats) if stream_stats else [],
        key_numbers=colored_key_numbers(stream_stats) if stream_stats else [],
        witness_headers=WITNESS_HEADERS,
        witnesses=witness_rows(view(report, "user_felt")[0]),
        witnesses_missing=view(report, "user_felt")[1],
        headline=headline(report),
        engine_line=engine_line(report),
        risks=risks(report),
        partial_note=PARTIAL_NOTE,
        metrics_window=metrics_window,
        metrics_missing=metrics_missing,
        metric_rows=metric_rows(metrics_window) if metrics_window else [],
        missing_metrics=missing_metrics(metrics_window) if metrics_window else None,
        log_facts=log_facts,
        log_fact_rows=log_fact_rows(log_facts) if log_facts else [],
        log_missing=log_missing,
        sizing_rows=sizing_rows(sizing) if sizing else [],
        scaler_rows=scaler_rows(scaling.scalers) if scaling is not None else [],
        scaler_workload=scaling.workload if scaling is not None else None,
        router=routing,
        router_title=router_title(routing) if routing else "",
        router_headers=ROUTER_HEADERS,
        router_rows=router_rows(routing) if routing else [],
        scaler_charts=scaler_charts(scaling),
        sizing=sizing,
        run_rows=run_rows(report),
        probe_tokens=probe_tokens(report),
        verify=partial(verify_text, report),
        severity_groups=severity_groups(report),
        gpu_watch_rows=gpu_watch_rows(report.bundle.gpu),
        counts=counts,
        failed_requests=failed,
        chart_timeline=timeline_chart(report),
        waterfall=waterfall_chart(report),
        chart_arrivals=arrivals_chart(report),
        chart_gaps=gaps_chart(stream_stats),
        # both bars total what their parts split (a mean, named by the basis), not a p90
        chart_ttft=decomposition_chart(d.ttft_components, sum(c.seconds or 0.0 for c in d.ttft_components)
                                       if d.ttft_basis else d.ttft_client_s, d.ttft_budget_s,
                                       "TTFT decomposition", d.ttft_basis or "TTFT"),
        # the inter-token parts split the engine path's TPOT mean: the bar's total is that, not
        # what the user's path felt (through a buffering gateway the two differ)
        chart_itl=decomposition_chart(d.itl_components, sum(c.seconds or 0.0 for c in d.itl_components)
                                      if d.itl_basis else d.tpot_client_s, d.tpot_budget_s,
                                      "Inter-token decomposition", d.itl_basis or "TPOT"),
        chart_gauges=gauge_charts(metrics_window, report),
        bundle_text=embed_text(report.bundle),
        embed_type=EMBED_TYPE,
        embed_id=EMBED_ID,
    )
