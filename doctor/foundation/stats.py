"""The one quantile rule, shared by the probe's self-check and the derived stream statistics.

A leaf module, so that a probe (side effects) and a derived view (pure) use the same rule
without the probe importing the analysis layer. Hand-written because ``statistics.quantiles``
returns cut points for ``n`` equal groups, not one quantile, and refuses a single value.
"""

from __future__ import annotations


def quantile(sorted_values: list[float], q: float) -> float:
    """Linear-interpolated quantile of already sorted values (numpy's default method)."""
    pos = (len(sorted_values) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)
