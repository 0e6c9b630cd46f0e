"""The SVG building blocks every chart of the HTML report draws with: escaped elements, the
canvas, round ticks, a linear scale, the x axis, the legend and the colour per path.

Kept apart from the charts (``reports.charts``, ``reports.line_charts``) so that the one place
that escapes attributes and text (``el``) is small enough to review on its own: a chart never
builds markup any other way. Why the charts are hand-written SVG at all is in ``reports.charts``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

from doctor.foundation.units import fmt_seconds
from reports.shared_parts import strip_controls

WIDTH = 960  # viewBox width; the page scales the SVG to its container
LEFT = 120  # room for row labels
RIGHT = 24

Attrs = Mapping[str, object]


def num(value: float) -> str:
    """Coordinates with one decimal: enough on a 960-unit canvas, and small files."""
    text = f"{value:.1f}"
    return text[:-2] if text.endswith(".0") else text


def _attr(value: object) -> str:
    return num(value) if isinstance(value, float) else strip_controls(str(value))


def el(tag: str, attrs: Attrs | None = None, *children: object) -> Markup:
    """One SVG element; attribute values and text children are escaped, ``Markup`` children kept."""
    head = tag + "".join(f' {k.rstrip("_").replace("_", "-")}="{escape(_attr(v))}"'
                         for k, v in (attrs or {}).items() if v is not None)
    if not children:
        return Markup(f"<{head}/>")
    body = "".join(str(c) if isinstance(c, Markup) else str(escape(strip_controls(str(c)))) for c in children)
    return Markup(f"<{head}>{body}</{tag}>")


def svg(height: float, *children: object, label: str) -> Markup:
    """The chart's canvas, ``WIDTH`` wide, with ``label`` as its accessible name and tooltip."""
    return el("svg", {"viewBox": f"0 0 {WIDTH} {num(height)}", "role": "img", "aria-label": label,
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


def x_axis(scale: Scale, y: float, ticks: Iterable[float], label: str,
            fmt: Callable[[float], str] = fmt_seconds, top: float | None = None) -> list[Markup]:
    """The x axis at ``y``: its line, ticks (and grid lines up to ``top``) and label."""
    out = [el("line", {"x1": scale.a, "x2": scale.b, "y1": y, "y2": y, "class": "axis"})]
    for t in ticks:
        x = scale(t)
        if top is not None:
            out.append(el("line", {"x1": x, "x2": x, "y1": top, "y2": y, "class": "grid"}))
        out.append(el("text", {"x": x, "y": y + 16, "class": "tick", "text-anchor": "middle"}, fmt(t)))
    out.append(el("text", {"x": scale.b, "y": y + 32, "class": "axis-label", "text-anchor": "end"}, label))
    return out


def legend_keys(names: Sequence[str], series: Mapping[str, int], x: float, y: float) -> list[Markup]:
    """One colour key per series name, left to right from (x, y)."""
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
