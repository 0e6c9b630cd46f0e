"""How numbers read in summaries and reasoning: one place, so every finding says "850 ms" alike."""

from __future__ import annotations


def fmt_seconds(seconds: float) -> str:
    """``0.0042`` -> ``4.2 ms``, ``0.85`` -> ``850 ms``, ``2.4`` -> ``2.40 s``."""
    if abs(seconds) < 0.01:
        return f"{seconds * 1000:.1f} ms"
    if abs(seconds) < 1:
        return f"{seconds * 1000:.0f} ms"
    return f"{seconds:.2f} s"


def fmt_pct(fraction: float) -> str:
    """``0.82`` -> ``82 %`` (a share or a usage fraction, never a value already in percent)."""
    return f"{fraction * 100:.0f} %"
