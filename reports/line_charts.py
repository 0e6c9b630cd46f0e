"""Line charts over time or over a sweep's levels: the engine's /metrics panels of the HTML
report (``line_panel``) and the sweep report's latency per level (``level_panel``).

Apart from the per-request charts (``reports.charts``) because they read series of samples, not
requests, and are shared by two reports.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from markupsafe import Markup

from doctor.foundation.units import fmt_seconds
from reports.svg_parts import LEFT, RIGHT, WIDTH, Scale, el, legend_keys, nice_ticks, num, series_index, svg, x_axis


@dataclass
class Series:
    """One line of a panel: its name for the legend, ``[t, value]`` samples, and the CSS class of its colour."""

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
                             "transform": f"rotate(-90 14 {num(top + plot_h / 2)})", "text-anchor": "middle"}, y_label))
    lx = float(LEFT)
    for s in series:
        pts = " ".join(f"{px},{num(y(v))}" for px, v in _per_column(s.samples, x))
        parts.append(el("polyline", {"points": pts, "class": f"curve thick {s.cls}"}))
        if len(s.samples) <= MARKED_SAMPLES:
            for t, v in s.samples:
                parts.append(el("circle", {"cx": x(t), "cy": y(v), "r": 2.5, "class": f"fill {s.cls}"},
                                el("title", None, f"{s.name} {y_fmt(v)} at t={fmt_seconds(t)}")))
        parts.append(el("rect", {"x": lx, "y": 7, "width": 12, "height": 12, "class": f"fill {s.cls}"}))
        parts.append(el("text", {"x": lx + 17, "y": 17, "class": "legend"}, s.name))
        lx += 40 + 8 * len(s.name)
    parts += x_axis(x, top + plot_h, nice_ticks(tmin, tmax, 8),
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
                             "transform": f"rotate(-90 14 {num(top + plot_h / 2)})", "text-anchor": "middle"}, y_label))
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
        parts.append(el("polyline", {"points": " ".join(f"{num(x(px))},{num(y(v))}" for px, v in points),
                                     "class": f"curve thick {cls}"}))
        for px, v in points:
            parts.append(el("circle", {"cx": x(px), "cy": y(v), "r": 3.0, "class": f"fill {cls}"},
                            el("title", None, f"{name} {y_fmt(v)} at {px:g}")))
    parts += legend_keys(list(series), legend, float(LEFT), 14.0)
    parts += x_axis(x, top + plot_h, sorted(set(xs)), x_label, fmt="{:g}".format)
    return svg(height, *parts, label=label)
