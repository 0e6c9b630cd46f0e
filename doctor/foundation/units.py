"""How numbers read in summaries, reasoning and reports: one place, so every output says "850 ms" alike."""

from __future__ import annotations

import math
from typing import Any

UNKNOWN = "—"


def real(value: Any) -> float:
    """``value`` as a float to format; an integer past a float's range (a bundle can hold
    ``10**400``, and ``float()`` of it raises) as an infinity of its sign, shown as such."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def fmt_seconds(seconds: Any) -> str:
    """``0.0042`` -> ``4.2 ms``, ``0.85`` -> ``850 ms``, ``2.4`` -> ``2.40 s``, ``None`` -> ``—``."""
    if seconds is None:
        return UNKNOWN
    s = real(seconds)
    if s == 0:
        return "0 ms"
    if abs(s) < 1e-3:
        return f"{s * 1e6:.0f} µs"
    if abs(s) < 0.01:
        return f"{s * 1000:.1f} ms"
    if abs(s) < 1:
        return f"{s * 1000:.0f} ms"
    return f"{s:.2f} s" if abs(s) < 10 else f"{s:.1f} s"


def fmt_pct(fraction: Any) -> str:
    """``0.82`` -> ``82 %`` (a share or a usage fraction, never a value already in percent)."""
    return UNKNOWN if fraction is None else f"{real(fraction) * 100:.0f} %"


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``counted(1, "check")`` -> ``1 check``, ``counted(2, "check")`` -> ``2 checks``: "1 events" reads wrong."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def count_unit(value: Any, unit: str) -> str:
    """A plural unit of counted things said of one of them (``1`` and ``"events"`` -> ``event``);
    any other unit, or any other value, as it is."""
    if value != 1 or isinstance(value, bool) or not unit.isalpha() or not unit.islower() or len(unit) < 3:
        return unit
    if unit.endswith("ies"):
        return unit[:-3] + "y"
    return unit[:-1] if unit.endswith("s") and not unit.endswith("ss") else unit
