"""Inline SVG charts for the HTML report, written by hand on purpose.

Why not a library: the report must make no network request and open offline years from now,
under a CSP that forbids scripts. Plotly and Vega need their JavaScript runtime (megabytes,
and no script may run); matplotlib would add numpy and ~40 MB to a CLI whose runtime
dependencies are fixed; pygal's output wants external JS for its tooltips. The five charts we
need are a handful of lines, rectangles and ticks, so a small builder that escapes every
attribute and text node (``markupsafe``, already installed with jinja2) is less code than
adapting any of them, and keeps the output small and static. Native SVG ``<title>`` elements
give hover tooltips without JavaScript.

Colours are CSS classes (``s0``, ``s1`` ... per series) styled by the page, so a dark theme or
print stylesheet restyles the charts too. Every function returns ``Markup``; callers never
concatenate raw strings into SVG.

This module holds the per-request charts (timeline, token arrivals, gap histogram) and the
latency breakdown bar; the building blocks are ``reports.svg_parts`` and the line charts over
time or sweep levels ``reports.line_charts``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from markupsafe import Markup

from doctor.foundation.units import fmt_seconds
from doctor.foundation.wire import MAX_NUMBER
from reports.svg_parts import LEFT, RIGHT, WIDTH, Scale, el, legend_keys, nice_ticks, num, series_index, svg, x_axis


@dataclass
class TimelineRow:
    """One request, times in seconds since it was sent; ``None`` for moments that never came."""

    path: str
    label: str
    headers: float | None = None
    first_token: float | None = None
    tokens: list[float] = field(default_factory=list)
    end: float | None = None
    outcome: str = "ok"


#: Token events closer than this arrived in the same read, as far as a user can tell.
SAME_READ_S = 5e-4


def _clumps(times: Sequence[float]) -> tuple[list[float], list[tuple[float, int]]]:
    """Split token times into lone tokens and bursts (time, count) of tokens that came together."""
    singles: list[float] = []
    bursts: list[tuple[float, int]] = []
    i = 0
    while i < len(times):
        j = i + 1
        while j < len(times) and times[j] - times[i] <= SAME_READ_S:
            j += 1
        if j - i > 1:
            bursts.append((times[i], j - i))
        else:
            singles.append(times[i])
        i = j
    return singles, bursts


def request_timeline(rows: Sequence[TimelineRow]) -> Markup:
    """Per-request bars: send at 0, headers (|), first token (●), every token (tick), end.

    Rows are grouped by path; a buffering gateway shows as clumps of ticks with long empty
    stretches, a healthy stream as an even comb.
    """
    row_h, top = 30, 40
    height = top + row_h * len(rows) + 48
    xmax = max([r.end or 0 for r in rows] + [t for r in rows for t in r.tokens[-1:]] + [0.001])
    x = Scale(0, xmax, LEFT, WIDTH - RIGHT)
    series = series_index(r.path for r in rows)
    parts: list[Markup] = legend_keys(list(series), series, LEFT, 16)
    parts.append(el("text", {"x": WIDTH - RIGHT, "y": 16, "class": "legend", "text-anchor": "end"},
                    "black bar: headers · dot: first token · ticks: tokens (×n: n tokens in one read)"))
    ticks = nice_ticks(0, xmax, 8)
    for i, r in enumerate(rows):
        y = top + i * row_h + row_h / 2
        s = series[r.path]
        parts.append(el("text", {"x": LEFT - 8, "y": y + 4, "class": "rowlabel", "text-anchor": "end"}, r.label))
        end = r.end if r.end is not None else (r.tokens[-1] if r.tokens else None)
        tip = f"{r.label}: " + ", ".join(
            f"{name} {fmt_seconds(v)}" for name, v in
            (("headers", r.headers), ("first token", r.first_token), ("end", end)) if v is not None
        ) + f", {len(r.tokens)} token events" + ("" if r.outcome == "ok" else f", outcome {r.outcome}")
        if end is not None:
            parts.append(el("rect", {"x": x(0), "y": y - 3, "width": max(x(end) - x(0), 1.0), "height": 6,
                                     "class": f"span s{s}"}, el("title", None, tip)))
        singles, bursts = _clumps(r.tokens)
        if singles:
            d = "".join(f"M{px} {num(y - 7)}v14" for px in dict.fromkeys(str(round(x(t))) for t in singles))
            parts.append(el("path", {"d": d, "class": f"tok s{s}"}, el("title", None, tip)))
        for t, n in bursts:
            parts.append(el("rect", {"x": x(t) - 2, "y": y - 9, "width": 4, "height": 18, "class": f"fill s{s}"},
                            el("title", None, f"{n} tokens arrived together at {fmt_seconds(t)}")))
            parts.append(el("text", {"x": x(t), "y": y - 11, "class": "burst", "text-anchor": "middle"}, f"×{n}"))
        if r.headers is not None:
            parts.append(el("path", {"d": f"M{num(x(r.headers))} {num(y - 10)}v20", "class": "hdr"}))
        if r.first_token is not None:
            parts.append(el("circle", {"cx": x(r.first_token), "cy": y, "r": 4.5, "class": f"fill s{s} ring"}))
        if end is not None:
            parts.append(el("path", {"d": f"M{num(x(end))} {num(y - 9)}v18", "class": "end"}))
        if r.outcome != "ok":
            parts.append(el("text", {"x": x(end or 0) + 8, "y": y + 4, "class": "bad"}, r.outcome))
    parts += x_axis(x, top + row_h * len(rows) + 6, ticks, "seconds since the request was sent", top=top - 6)
    return svg(height, *parts, label="Per-request timeline, direct vs gateway")


def token_arrivals(curves: Mapping[str, Sequence[Sequence[tuple[float, int]]]]) -> Markup:
    """Cumulative tokens received vs time since send, one step line per request.

    Each request is its token events as ``(time, tokens it carried)``: the work is per event,
    never per token, so a server claiming ten billion tokens in one chunk costs one step, not a
    list ten billion long. A smooth diagonal is a healthy stream; a staircase of vertical jumps
    is a buffer being flushed, and the width of each step is how long the user saw nothing.
    A claim beyond ``MAX_NUMBER`` (a bundle may hold ``10**400``, which no float can) is drawn
    at that bound.
    """
    curves = {name: [[(t, min(n, MAX_NUMBER)) for t, n in req] for req in reqs] for name, reqs in curves.items()}
    top, plot_h = 30, 300
    height = top + plot_h + 46
    all_t = [t for reqs in curves.values() for req in reqs for t, _ in req]
    xmax = max([*all_t, 0.001])
    ymax = max([sum(n for _, n in req) for reqs in curves.values() for req in reqs] + [1]) * 1.05
    x = Scale(0, xmax, LEFT, WIDTH - RIGHT)
    y = Scale(0, ymax, top + plot_h, top)
    series = series_index(curves)
    parts: list[Markup] = legend_keys(list(series), series, LEFT, 16)
    for v in nice_ticks(0, ymax, 5):
        parts.append(el("line", {"x1": x.a, "x2": x.b, "y1": y(v), "y2": y(v), "class": "grid"}))
        parts.append(el("text", {"x": LEFT - 8, "y": y(v) + 4, "class": "tick", "text-anchor": "end"}, f"{v:g}"))
    parts.append(el("text", {"x": 14, "y": top + plot_h / 2, "class": "axis-label",
                             "transform": f"rotate(-90 14 {num(top + plot_h / 2)})", "text-anchor": "middle"},
                    "tokens received"))
    for name, reqs in curves.items():
        for i, events in enumerate(reqs):
            if not events:
                continue
            # One vertical step per distinct canvas x: tokens closer than the drawing's resolution
            # merge into one step, so a 2,000-token answer costs a few hundred points.
            steps: dict[str, int] = {}
            count = 0
            for t, n in events:
                count += n
                steps[str(round(x(t)))] = count
            pts = [f"{num(x(0))},{num(y(0))}"]
            before = 0
            for px, count in steps.items():
                pts += [f"{px},{num(y(before))}", f"{px},{num(y(count))}"]
                before = count
            parts.append(el("polyline", {"points": " ".join(pts), "class": f"curve s{series[name]}"},
                            el("title", None, f"{name} request {i + 1}: {count} tokens, "
                                              f"first after {fmt_seconds(events[0][0])}, last after {fmt_seconds(events[-1][0])}")))
    parts += x_axis(x, top + plot_h, nice_ticks(0, xmax, 8), "seconds since the request was sent")
    return svg(height, *parts, label="Token arrivals: cumulative tokens received per request")


#: Gap-histogram bins: everything under 0.1 ms (tokens delivered in the same read) in the
#: first bin, then quarter-decades up to 10 s and beyond.
_GAP_EDGES = [10 ** (-4 + k / 4) for k in range(0, 21)]


def gap_bins(gaps: Sequence[float]) -> list[int]:
    counts = [0] * (len(_GAP_EDGES) + 1)
    for g in gaps:
        i = 0
        while i < len(_GAP_EDGES) and g >= _GAP_EDGES[i]:
            i += 1
        counts[i] += 1
    return counts


def gap_histogram(gaps_by_path: Mapping[str, Sequence[float]]) -> Markup:
    """Inter-token gap distribution, one panel per path on a shared log axis.

    Bars are the share of that path's gaps, so paths with different token counts compare. A
    buffering proxy is bimodal: a tall bar at ~0 (tokens that came in the same read) and a
    cluster at the flush interval, with the direct path's single mode in between.
    """
    panel_h, gap_between, top = 110, 26, 16
    names = list(gaps_by_path)
    height = top + len(names) * (panel_h + gap_between) + 30
    nbins = len(_GAP_EDGES) + 1
    x = Scale(0, nbins, LEFT, WIDTH - RIGHT)
    series = series_index(names)
    parts: list[Markup] = []
    for p, name in enumerate(names):
        gaps = gaps_by_path[name]
        counts = gap_bins(gaps)
        total = max(sum(counts), 1)
        y0 = top + p * (panel_h + gap_between)
        y = Scale(0, 1, y0 + panel_h, y0)
        parts.append(el("text", {"x": LEFT - 40, "y": y0 + panel_h / 2, "class": "rowlabel", "text-anchor": "end"}, name))
        parts.append(el("text", {"x": LEFT - 40, "y": y0 + panel_h / 2 + 16, "class": "tick", "text-anchor": "end"},
                        f"n={len(gaps)}"))
        for v in (0.5, 1):
            parts.append(el("line", {"x1": x.a, "x2": x.b, "y1": y(v), "y2": y(v), "class": "grid"}))
            parts.append(el("text", {"x": x.a - 4, "y": y(v) + 4, "class": "tick", "text-anchor": "end"}, f"{v:.0%}"))
        for i, c in enumerate(counts):
            if not c:
                continue
            lo = "0" if i == 0 else fmt_seconds(_GAP_EDGES[i - 1])
            hi = fmt_seconds(_GAP_EDGES[i]) if i < len(_GAP_EDGES) else "∞"
            share = c / total
            parts.append(el("rect", {"x": x(i) + 1, "y": y(share), "width": x(1) - x(0) - 2,
                                     "height": max(y(0) - y(share), 1.0), "class": f"fill s{series[name]}"},
                            el("title", None, f"{name}: {c} gaps ({share:.0%}) in [{lo}, {hi})")))
            parts.append(el("text", {"x": x(i + 0.5), "y": y(share) - 3, "class": "burst", "text-anchor": "middle"}, str(c)))
        parts.append(el("line", {"x1": x.a, "x2": x.b, "y1": y(0), "y2": y(0), "class": "axis"}))
    axis_y = top + len(names) * (panel_h + gap_between) - gap_between + 2
    labels = {0: "<0.1 ms"} | {i: fmt_seconds(_GAP_EDGES[i]) for i in range(4, len(_GAP_EDGES), 4)}
    for i, text in labels.items():
        xi = x(i + 1) if i else x(0.5)
        parts.append(el("text", {"x": xi, "y": axis_y + 14, "class": "tick", "text-anchor": "middle"}, text))
    parts.append(el("text", {"x": x.b, "y": axis_y + 30, "class": "axis-label", "text-anchor": "end"},
                    "gap between consecutive token events (log scale); bar = share of that path's gaps"))
    return svg(height, *parts, label="Inter-token gap distribution, direct vs gateway")


#: Decomposition components keep their colour from chart to chart and run to run.
_COMPONENT_COLOURS = {"gateway": "c0", "transport": "c1", "queue": "c2", "prefill": "c3"}


#: Characters of a 12px row label that fit in the ``LEFT`` margin (about 7 units each).
ROW_LABEL_CHARS = 15


def row_label(text: str, x: float, y_mid: float) -> Markup:
    """A right-aligned label ending at ``x``, its lines centred on ``y_mid``, broken between
    words to fit the left margin: one long line ran off the canvas ("ateway TTFT mean")."""
    lines: list[str] = []
    for word in text.split():
        if lines and len(lines[-1]) + 1 + len(word) <= ROW_LABEL_CHARS:
            lines[-1] += " " + word
        else:
            lines.append(word)
    first = y_mid + 4 - 14 * (len(lines) - 1) / 2
    return el("text", {"x": x, "y": first, "class": "rowlabel", "text-anchor": "end"},
              *(el("tspan", {"x": x, "dy": 14 if i else None}, line) for i, line in enumerate(lines)))


def component_colours(names: Iterable[str]) -> dict[str, str]:
    spare = iter(["c4", "c5", "c2", "c3", "c1", "c0"] * 4)
    return {n: _COMPONENT_COLOURS.get(n) or next(spare) for n in names}


@dataclass
class Segment:
    """One component of a stacked latency bar: its name, seconds, and a note for the tooltip (its source)."""

    name: str
    seconds: float
    note: str = ""


def stacked_bar(segments: Sequence[Segment], *, total: float | None, budget: float | None,
                label: str, total_name: str) -> Markup:
    """One horizontal bar split into components (e.g. gateway / transport / queue / prefill),
    with the measured total and the budget marked, so "which part is over" reads at a glance."""
    top, bar_h = 20, 34
    height = top + bar_h + 66
    shown = [s for s in segments if s.seconds > 0]
    colour = component_colours(s.name for s in shown)
    xmax = max([sum(s.seconds for s in shown), total or 0, budget or 0, 1e-3]) * 1.05
    x = Scale(0, xmax, LEFT, WIDTH - RIGHT)
    parts: list[Markup] = [row_label(total_name, LEFT - 8, top + bar_h / 2)]
    pos = 0.0
    for s in shown:
        w = x(pos + s.seconds) - x(pos)
        tip = f"{s.name}: {fmt_seconds(s.seconds)}" + (f" ({s.note})" if s.note else "")
        parts.append(el("rect", {"x": x(pos), "y": top, "width": max(w, 1.0), "height": bar_h,
                                 "class": f"fill {colour[s.name]}"}, el("title", None, tip)))
        if w > 70:
            parts.append(el("text", {"x": x(pos) + w / 2, "y": top + bar_h / 2 + 4, "class": "seglabel",
                                     "text-anchor": "middle"}, f"{s.name} {fmt_seconds(s.seconds)}"))
        pos += s.seconds
    if budget is not None:
        parts.append(el("path", {"d": f"M{num(x(budget))} {top - 8}v{bar_h + 16}", "class": "budget"}))
        parts.append(el("text", {"x": x(budget), "y": top + bar_h + 22, "class": "budget-label",
                                 "text-anchor": "middle"}, f"budget {fmt_seconds(budget)}"))
    if total is not None:
        parts.append(el("path", {"d": f"M{num(x(total))} {top - 8}v{bar_h + 16}", "class": "total"}))
        parts.append(el("text", {"x": x(total), "y": top - 10, "class": "legend", "text-anchor": "middle"},
                        f"measured {fmt_seconds(total)}"))
    legend_y = top + bar_h + 50
    lx = float(LEFT)
    for s in shown:
        parts.append(el("rect", {"x": lx, "y": legend_y - 9, "width": 12, "height": 12, "class": f"fill {colour[s.name]}"}))
        text = f"{s.name} {fmt_seconds(s.seconds)}"
        parts.append(el("text", {"x": lx + 17, "y": legend_y + 1, "class": "legend"}, text))
        lx += 40 + 7 * len(text)
    return svg(height, *parts, label=label)


@dataclass
class FloorRow:
    """One row of ``floor_chart``: a label, the measured value, the floor it is read against (either
    None when not measured), and a note for the tooltip (why it was not)."""

    label: str
    value: float | None
    floor: float | None
    note: str = ""


#: ``floor_chart``'s axis never starts under this: a KL estimate of 1e-9 and of 0 read the same.
FLOOR_AXIS_MIN = 1e-6
#: Characters of a row's label shown in the left margin (the whole label is the row's tooltip).
FLOOR_LABEL_CHARS = 2 * ROW_LABEL_CHARS


def _decade(value: float, up: bool) -> float:
    exponent = math.log10(value)
    return 10.0 ** (math.ceil(exponent) if up else math.floor(exponent))


def floor_chart(rows: Sequence[FloorRow], *, bar: float | None, bar_name: str, label: str, x_label: str,
                value_name: str = "candidate", floor_name: str = "baseline floor") -> Markup:
    """One row per item: the measured value as a bar and its floor (what the reference's own repeats
    give) as a ring on the same log axis, with the gate's ``bar`` as a dashed line; an item over its
    floor by orders of magnitude reads at a glance, and a zero sits at the axis' start, said in its tooltip.

    A log axis because the values span decades: the same weights give 0, a harmless numerics change
    1e-4, a broken copy 1 or more.
    """
    top, row_h = 50, 22  # the legend's line, then the bar's label above the rows
    height = top + row_h * len(rows) + 44
    seen = [v for r in rows for v in (r.value, r.floor) if v is not None and math.isfinite(v) and v > 0]
    if bar is not None and bar > 0:
        seen.append(bar)
    zero = any(v == 0 for r in rows for v in (r.value, r.floor))  # a zero reads as far below the bar, at the axis' start
    lo = max(FLOOR_AXIS_MIN, _decade(min(seen), up=False)) if seen and not zero else FLOOR_AXIS_MIN
    hi = max(_decade(max(seen), up=True), lo * 10) if seen else 1.0
    x = Scale(math.log10(lo), math.log10(hi), LEFT, WIDTH - RIGHT)

    def at(v: float) -> float:
        return x(math.log10(min(max(v, lo), hi)))

    series = series_index(["direct", "gateway"])  # the baseline's colour, the candidate's
    key = WIDTH - RIGHT - 60 - 8 * (len(value_name) + len(floor_name))  # on the right: the bar's label is on the left
    parts: list[Markup] = [
        el("rect", {"x": key, "y": 7, "width": 12, "height": 12, "class": f"fill s{series['gateway']}"}),
        el("text", {"x": key + 17, "y": 17, "class": "legend"}, value_name),
        el("circle", {"cx": key + 46 + 8 * len(value_name), "cy": 13, "r": 5, "class": f"fill s{series['direct']} ring"}),
        el("text", {"x": key + 56 + 8 * len(value_name), "y": 17, "class": "legend"}, floor_name),
    ]
    bottom = top + row_h * len(rows)
    for i in range(round(math.log10(lo)), round(math.log10(hi)) + 1):
        xt = x(float(i))
        parts.append(el("line", {"x1": xt, "x2": xt, "y1": top - 4, "y2": bottom, "class": "grid"}))
        parts.append(el("text", {"x": xt, "y": bottom + 16, "class": "tick", "text-anchor": "middle"}, f"1e{i}"))
    parts.append(el("line", {"x1": x.a, "x2": x.b, "y1": bottom, "y2": bottom, "class": "axis"}))
    parts.append(el("text", {"x": x.b, "y": bottom + 32, "class": "axis-label", "text-anchor": "end"}, x_label))
    for n, row in enumerate(rows):
        y = top + n * row_h
        shown = row.label if len(row.label) <= FLOOR_LABEL_CHARS else row.label[:FLOOR_LABEL_CHARS - 1] + "…"
        parts.append(el("text", {"x": LEFT - 8, "y": y + row_h / 2 + 4, "class": "rowlabel", "text-anchor": "end"},
                        el("title", None, row.label), shown))
        value = "not measured" if row.value is None else f"{row.value:.3g}"
        floor = "not measured" if row.floor is None else f"{row.floor:.3g}"
        tip = f"{row.label}: {value_name} {value}, {floor_name} {floor}" + (f" ({row.note})" if row.note else "")
        if row.value is not None and math.isfinite(row.value):
            over = bar is not None and row.value > bar
            parts.append(el("rect", {"x": x.a, "y": y + 4, "width": max(at(row.value) - x.a, 1.0), "height": row_h - 8,
                                     "class": "bad" if over else f"fill s{series['gateway']}"}, el("title", None, tip)))
        else:
            parts.append(el("text", {"x": x.a + 4, "y": y + row_h / 2 + 4, "class": "tick"}, el("title", None, tip),
                            row.note or "not measured"))
        if row.floor is not None and math.isfinite(row.floor):
            parts.append(el("circle", {"cx": at(row.floor), "cy": y + row_h / 2, "r": 5, "class": f"fill s{series['direct']} ring"},
                            el("title", None, tip)))
    if bar is not None and bar > 0:
        parts.append(el("path", {"d": f"M{num(at(bar))} {top - 6}v{bottom - top + 10}", "class": "budget"}))
        right = at(bar) > WIDTH * 0.75  # near the right edge the label reads leftwards from the line
        parts.append(el("text", {"x": at(bar) + (-4 if right else 4), "y": top - 10, "class": "budget-label",
                                 "text-anchor": "end" if right else "start"},
                        f"{bar_name} {bar:.3g}"))
    return svg(height, *parts, label=label)


@dataclass
class WaterfallRow:
    """One request's hops (name, start, seconds from its send) and its client reads, for ``waterfalls``."""

    label: str
    hops: list[tuple[str, float, float]]
    ticks: list[float] = field(default_factory=list)
    ttft: float | None = None


def waterfalls(rows: Sequence[WaterfallRow]) -> Markup:
    """The slowest requests as waterfalls: per request one bar per hop (to the engine, queue, prefill,
    delivery...) at its place on the request's own clock, and the client's reads as ticks below it."""
    row_h, top = 40, 40
    height = top + row_h * len(rows) + 48
    xmax = max([r.ttft or 0 for r in rows] + [h[1] + h[2] for r in rows for h in r.hops] + [0.001]) * 1.05
    x = Scale(0, xmax, LEFT, WIDTH - RIGHT)
    colour = component_colours(dict.fromkeys(h[0] for r in rows for h in r.hops))
    parts: list[Markup] = []
    lx = float(LEFT)
    for name, c in colour.items():
        parts.append(el("rect", {"x": lx, "y": 7, "width": 12, "height": 12, "class": f"fill {c}"}))
        parts.append(el("text", {"x": lx + 17, "y": 17, "class": "legend"}, name))
        lx += 30 + 7 * len(name)
    for i, r in enumerate(rows):
        y = top + i * row_h + 12
        parts.append(row_label(r.label, LEFT - 8, y + 6))
        for name, start, seconds in r.hops:
            if seconds <= 0:
                continue
            parts.append(el("rect", {"x": x(max(0.0, start)), "y": y, "width": max(x(start + seconds) - x(start), 1.0),
                                     "height": 12, "class": f"fill {colour[name]}"},
                            el("title", None, f"{r.label}: {name} {fmt_seconds(seconds)} from {fmt_seconds(start)}")))
        shown = [t for t in r.ticks if 0 <= t <= xmax]
        if shown:
            d = "".join(f"M{px} {num(y + 16)}v7" for px in dict.fromkeys(str(round(x(t))) for t in shown))
            parts.append(el("path", {"d": d, "class": "tok s0"}, el("title", None, f"{r.label}: the client's reads")))
        if r.ttft is not None:
            parts.append(el("circle", {"cx": x(r.ttft), "cy": y + 6, "r": 4, "class": "fill s0 ring"},
                            el("title", None, f"{r.label}: first token at the client, {fmt_seconds(r.ttft)}")))
    parts += x_axis(x, top + row_h * len(rows) + 6, nice_ticks(0, xmax, 8), "seconds since the request was sent", top=top - 6)
    return svg(height, *parts, label="The slowest requests, hop by hop (the engine's own spans)")
