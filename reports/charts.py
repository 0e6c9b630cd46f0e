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
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from markupsafe import Markup, escape

from doctor.foundation.units import fmt_seconds
from doctor.foundation.wire import MAX_NUMBER
from reports.shared_parts import strip_controls

WIDTH = 960  # viewBox width; the page scales the SVG to its container
LEFT = 120  # room for row labels
RIGHT = 24

Attrs = Mapping[str, object]


def _num(value: float) -> str:
    """Coordinates with one decimal: enough on a 960-unit canvas, and small files."""
    text = f"{value:.1f}"
    return text[:-2] if text.endswith(".0") else text


def _attr(value: object) -> str:
    return _num(value) if isinstance(value, float) else strip_controls(str(value))


def el(tag: str, attrs: Attrs | None = None, *children: object) -> Markup:
    """One SVG element; attribute values and text children are escaped, ``Markup`` children kept."""
    head = tag + "".join(f' {k.rstrip("_").replace("_", "-")}="{escape(_attr(v))}"'
                         for k, v in (attrs or {}).items() if v is not None)
    if not children:
        return Markup(f"<{head}/>")
    body = "".join(str(c) if isinstance(c, Markup) else str(escape(strip_controls(str(c)))) for c in children)
    return Markup(f"<{head}>{body}</{tag}>")


def svg(height: float, *children: object, label: str) -> Markup:
    return el("svg", {"viewBox": f"0 0 {WIDTH} {_num(height)}", "role": "img", "aria-label": label,
                      "class": "chart", "xmlns": "http://www.w3.org/2000/svg"}, el("title", None, label), *children)


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values covering [lo, hi] (1, 2, 5 x 10^k steps)."""
    if hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / max(count, 1)
    if not (math.isfinite(raw) and raw > 0):  # an axis past a float's range (or a span lost to rounding): no ticks
        return []
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step) * step
    ticks = []
    t = start
    while t <= hi + step * 1e-9:
        if t >= lo - step * 1e-9:
            ticks.append(round(t, 10))
        t += step
    return ticks


@dataclass
class Scale:
    """Linear map from data units to canvas units."""

    lo: float
    hi: float
    a: float
    b: float

    def __call__(self, v: float) -> float:
        span = self.hi - self.lo or 1.0
        return self.a + (v - self.lo) / span * (self.b - self.a)


def _x_axis(scale: Scale, y: float, ticks: Iterable[float], label: str,
            fmt: Callable[[float], str] = fmt_seconds, top: float | None = None) -> list[Markup]:
    out = [el("line", {"x1": scale.a, "x2": scale.b, "y1": y, "y2": y, "class": "axis"})]
    for t in ticks:
        x = scale(t)
        if top is not None:
            out.append(el("line", {"x1": x, "x2": x, "y1": top, "y2": y, "class": "grid"}))
        out.append(el("text", {"x": x, "y": y + 16, "class": "tick", "text-anchor": "middle"}, fmt(t)))
    out.append(el("text", {"x": scale.b, "y": y + 32, "class": "axis-label", "text-anchor": "end"}, label))
    return out


def _legend(names: Sequence[str], series: Mapping[str, int], x: float, y: float) -> list[Markup]:
    out = []
    for name in names:
        out.append(el("rect", {"x": x, "y": y - 9, "width": 12, "height": 12, "class": f"fill s{series[name]}"}))
        out.append(el("text", {"x": x + 17, "y": y + 1, "class": "legend"}, name))
        x += 30 + 8 * len(name)
    return out


def series_index(names: Iterable[str]) -> dict[str, int]:
    """Stable colour per path: ``direct`` is always s0 and ``gateway`` s1, others follow (s5, grey,
    for every path past the palette)."""
    fixed = {"direct": 0, "gateway": 1}
    out: dict[str, int] = {}
    spare = 2
    for n in dict.fromkeys(names):
        if n in fixed:
            out[n] = fixed[n]
        else:
            out[n] = min(spare, 5)
            spare += 1
    return out


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
    parts: list[Markup] = _legend(list(series), series, LEFT, 16)
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
            d = "".join(f"M{px} {_num(y - 7)}v14" for px in dict.fromkeys(str(round(x(t))) for t in singles))
            parts.append(el("path", {"d": d, "class": f"tok s{s}"}, el("title", None, tip)))
        for t, n in bursts:
            parts.append(el("rect", {"x": x(t) - 2, "y": y - 9, "width": 4, "height": 18, "class": f"fill s{s}"},
                            el("title", None, f"{n} tokens arrived together at {fmt_seconds(t)}")))
            parts.append(el("text", {"x": x(t), "y": y - 11, "class": "burst", "text-anchor": "middle"}, f"×{n}"))
        if r.headers is not None:
            parts.append(el("path", {"d": f"M{_num(x(r.headers))} {_num(y - 10)}v20", "class": "hdr"}))
        if r.first_token is not None:
            parts.append(el("circle", {"cx": x(r.first_token), "cy": y, "r": 4.5, "class": f"fill s{s} ring"}))
        if end is not None:
            parts.append(el("path", {"d": f"M{_num(x(end))} {_num(y - 9)}v18", "class": "end"}))
        if r.outcome != "ok":
            parts.append(el("text", {"x": x(end or 0) + 8, "y": y + 4, "class": "bad"}, r.outcome))
    parts += _x_axis(x, top + row_h * len(rows) + 6, ticks, "seconds since the request was sent", top=top - 6)
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
    parts: list[Markup] = _legend(list(series), series, LEFT, 16)
    for v in nice_ticks(0, ymax, 5):
        parts.append(el("line", {"x1": x.a, "x2": x.b, "y1": y(v), "y2": y(v), "class": "grid"}))
        parts.append(el("text", {"x": LEFT - 8, "y": y(v) + 4, "class": "tick", "text-anchor": "end"}, f"{v:g}"))
    parts.append(el("text", {"x": 14, "y": top + plot_h / 2, "class": "axis-label",
                             "transform": f"rotate(-90 14 {_num(top + plot_h / 2)})", "text-anchor": "middle"},
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
            pts = [f"{_num(x(0))},{_num(y(0))}"]
            before = 0
            for px, count in steps.items():
                pts += [f"{px},{_num(y(before))}", f"{px},{_num(y(count))}"]
                before = count
            parts.append(el("polyline", {"points": " ".join(pts), "class": f"curve s{series[name]}"},
                            el("title", None, f"{name} request {i + 1}: {count} tokens, "
                                              f"first after {fmt_seconds(events[0][0])}, last after {fmt_seconds(events[-1][0])}")))
    parts += _x_axis(x, top + plot_h, nice_ticks(0, xmax, 8), "seconds since the request was sent")
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
        parts.append(el("path", {"d": f"M{_num(x(budget))} {top - 8}v{bar_h + 16}", "class": "budget"}))
        parts.append(el("text", {"x": x(budget), "y": top + bar_h + 22, "class": "budget-label",
                                 "text-anchor": "middle"}, f"budget {fmt_seconds(budget)}"))
    if total is not None:
        parts.append(el("path", {"d": f"M{_num(x(total))} {top - 8}v{bar_h + 16}", "class": "total"}))
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
class Series:
    name: str
    samples: list[list[float]]  # [t, value]
    cls: str  # CSS class for the line colour


#: Up to this many samples each gets a dot with a tooltip; beyond, the line alone.
MARKED_SAMPLES = 120


def _per_column(samples: Sequence[Sequence[float]], x: Scale) -> list[tuple[int, float]]:
    """At most first, min, max and last sample per canvas column, so a spike survives and an hour
    of scrapes costs no more than a minute's."""
    columns: dict[int, list[float]] = {}
    for t, v in samples:
        columns.setdefault(round(x(t)), []).append(v)
    out: list[tuple[int, float]] = []
    for px, vs in columns.items():
        keep = [vs[0], min(vs), max(vs), vs[-1]] if len(vs) > 4 else vs
        out += [(px, v) for v in keep]
    return out


def line_panel(series: Sequence[Series], *, label: str, y_label: str, y_max: float | None = None,
               y_fmt: Callable[[float], str] = "{:g}".format, window: tuple[float, float] | None = None) -> Markup:
    """Gauges over time (KV usage, running / waiting), with the probe window shaded."""
    top, plot_h = 28, 150
    height = top + plot_h + 46
    ts = [p[0] for s in series for p in s.samples]
    vs = [p[1] for s in series for p in s.samples]
    tmin = min(ts + ([window[0]] if window else []))
    tmax = max(ts + ([window[1]] if window else []))
    if tmax <= tmin:
        tmax = tmin + 1
    top_v = y_max if y_max is not None else max([*vs, 1.0]) * 1.1
    x = Scale(tmin, tmax, LEFT, WIDTH - RIGHT)
    y = Scale(0, top_v, top + plot_h, top)
    parts: list[Markup] = []
    if window:
        parts.append(el("rect", {"x": x(window[0]), "y": top, "width": max(x(window[1]) - x(window[0]), 1.0),
                                 "height": plot_h, "class": "window"}, el("title", None, "probe window")))
    for v in nice_ticks(0, top_v, 4):
        if v > top_v:
            continue
        parts.append(el("line", {"x1": x.a, "x2": x.b, "y1": y(v), "y2": y(v), "class": "grid"}))
        parts.append(el("text", {"x": LEFT - 8, "y": y(v) + 4, "class": "tick", "text-anchor": "end"}, y_fmt(v)))
    parts.append(el("text", {"x": 14, "y": top + plot_h / 2, "class": "axis-label",
                             "transform": f"rotate(-90 14 {_num(top + plot_h / 2)})", "text-anchor": "middle"}, y_label))
    lx = float(LEFT)
    for s in series:
        pts = " ".join(f"{px},{_num(y(v))}" for px, v in _per_column(s.samples, x))
        parts.append(el("polyline", {"points": pts, "class": f"curve thick {s.cls}"}))
        if len(s.samples) <= MARKED_SAMPLES:
            for t, v in s.samples:
                parts.append(el("circle", {"cx": x(t), "cy": y(v), "r": 2.5, "class": f"fill {s.cls}"},
                                el("title", None, f"{s.name} {y_fmt(v)} at t={fmt_seconds(t)}")))
        parts.append(el("rect", {"x": lx, "y": 7, "width": 12, "height": 12, "class": f"fill {s.cls}"}))
        parts.append(el("text", {"x": lx + 17, "y": 17, "class": "legend"}, s.name))
        lx += 40 + 8 * len(s.name)
    parts += _x_axis(x, top + plot_h, nice_ticks(tmin, tmax, 8),
                     "seconds relative to the first probe request (shaded: probe window)")
    return svg(height, *parts, label=label)


def level_panel(xs: Sequence[float], series: Mapping[str, Sequence[float | None]], *, label: str, y_label: str,
                x_label: str, budget: float | None = None, knee: float | None = None,
                y_fmt: Callable[[float], str] = fmt_seconds) -> Markup:
    """A sweep's curve: each series against the level (concurrency or rate), the budget as a dashed
    line and the knee as a vertical marker. Points without a value are left out of their line."""
    top, plot_h = 28, 170
    height = top + plot_h + 46
    values = [v for vs in series.values() for v in vs if v is not None and math.isfinite(v)]
    top_v = max([*values, budget or 0.0, 1e-9]) * 1.15
    x = Scale(min(xs, default=0.0), max(xs, default=1.0), LEFT, WIDTH - RIGHT)
    y = Scale(0, top_v, top + plot_h, top)
    parts: list[Markup] = []
    for v in nice_ticks(0, top_v, 4):
        if v <= top_v:
            parts.append(el("line", {"x1": x.a, "x2": x.b, "y1": y(v), "y2": y(v), "class": "grid"}))
            parts.append(el("text", {"x": LEFT - 8, "y": y(v) + 4, "class": "tick", "text-anchor": "end"}, y_fmt(v)))
    parts.append(el("text", {"x": 14, "y": top + plot_h / 2, "class": "axis-label",
                             "transform": f"rotate(-90 14 {_num(top + plot_h / 2)})", "text-anchor": "middle"}, y_label))
    if budget is not None:
        parts.append(el("line", {"x1": x.a, "x2": x.b, "y1": y(budget), "y2": y(budget), "class": "budget"}))
        parts.append(el("text", {"x": x.b, "y": y(budget) - 5, "class": "budget-label", "text-anchor": "end"},
                        f"budget {y_fmt(budget)}"))
    if knee is not None:
        parts.append(el("line", {"x1": x(knee), "x2": x(knee), "y1": top, "y2": top + plot_h, "class": "total"},
                        el("title", None, f"knee at {knee:g}")))
        parts.append(el("text", {"x": x(knee) + 4, "y": top + 12, "class": "legend"}, f"knee {knee:g}"))
    legend = series_index(series)
    for name, vs in series.items():
        cls = f"s{legend[name]}"
        points = [(px, v) for px, v in zip(xs, vs, strict=True) if v is not None and math.isfinite(v)]
        parts.append(el("polyline", {"points": " ".join(f"{_num(x(px))},{_num(y(v))}" for px, v in points),
                                     "class": f"curve thick {cls}"}))
        for px, v in points:
            parts.append(el("circle", {"cx": x(px), "cy": y(v), "r": 3.0, "class": f"fill {cls}"},
                            el("title", None, f"{name} {y_fmt(v)} at {px:g}")))
    parts += _legend(list(series), legend, float(LEFT), 14.0)
    parts += _x_axis(x, top + plot_h, sorted(set(xs)), x_label, fmt="{:g}".format)
    return svg(height, *parts, label=label)
