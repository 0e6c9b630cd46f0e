"""The two-sample statistics ``compare`` and the fleet view judge latency with: the
Mann-Whitney U test, the Hodges-Lehmann shift, and how many requests a run needs to test at all.

Kept apart from ``doctor.runs.compare_runs``, which decides what a shift means (like runs,
practical thresholds, the decision), so the arithmetic can be read and tested on its own and
a change of wording or of the rule never touches it.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from statistics import NormalDist

#: Two-sided significance per metric. 5 %, as benchstat uses: the practical threshold, not a
#: stricter level, is what keeps noise from paging anyone (a deterministic server's 0.25 ms is
#: "significant" at any level), and a stricter level would make the smallest run that can show a
#: regression larger: at 4 requests a side, all separated, the exact p is 2/70 = 0.029.
ALPHA = 0.05
#: Up to this many samples in both runs together the test's p-value is exact (the permutation
#: distribution of the rank sum, ``_exact_p``); above it the normal approximation is within a
#: few percent of it and the exact count would cost more than the rest of the comparison.
EXACT_UP_TO = 40
#: The power ``needed_requests`` sizes a run for: four times in five, a shift as large as the one
#: seen is found beyond noise.
POWER = 0.8


def mann_whitney(base: list[float], current: list[float]) -> tuple[float, float]:
    """Two-sided p-value and P(current > base) of the Mann-Whitney U test.

    Hand-written rather than taking scipy for two functions (scipy is no dependency, and its
    wheels outweigh this package many times). Ranks are averaged over ties. Up to
    ``EXACT_UP_TO`` samples together the p-value is exact (``_exact_p``): the normal
    approximation errs towards "within noise" at small n, and it is the small runs where a
    several-fold shift must still be seen (2 against 8 fully separated: 0.050 approximated,
    0.044 exact). Above, the approximation with tie-corrected variance and continuity correction.
    """
    n1, n2 = len(base), len(current)
    pooled = sorted([(v, 0) for v in base] + [(v, 1) for v in current])
    doubled = [0] * len(pooled)  # twice the average rank, so that tied ranks stay integers
    ties = 0
    i = 0
    while i < len(pooled):
        j = i
        while j + 1 < len(pooled) and pooled[j + 1][0] == pooled[i][0]:
            j += 1
        for k in range(i, j + 1):
            doubled[k] = i + j + 2
        ties += (j - i + 1) ** 3 - (j - i + 1)
        i = j + 1
    is_current = [side == 1 for _, side in pooled]
    u_current = sum(r for r, side in zip(doubled, is_current, strict=True) if side) / 2 - n2 * (n2 + 1) / 2
    n = n1 + n2
    variance = n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1)))
    if variance <= 0:  # every value equal: no evidence of any shift
        return 1.0, 0.5
    if exact_test(n1, n2):
        return _exact_p(doubled, is_current), u_current / (n1 * n2)
    z = max(abs(u_current - n1 * n2 / 2) - 0.5, 0.0) / math.sqrt(variance)
    return math.erfc(z / math.sqrt(2)), u_current / (n1 * n2)


def exact_test(n_base: int, n_current: int) -> bool:
    """Whether ``mann_whitney`` counts its p-value exactly for runs of these sizes."""
    return n_base + n_current <= EXACT_UP_TO


def _exact_p(doubled: list[int], is_current: list[bool]) -> float:
    """The share of all ways to call k of the pooled samples "current" whose rank sum lies at
    least as far from its mean as the one observed: the exact two-sided p-value.

    Ties keep their average ranks (the distribution given the ties, as an exact test must), so
    ranks are doubled to stay integers. Counting by sum is a knapsack: ``ways[j][s]`` is how many
    sets of j of the samples seen so far sum to s; N x k x sum additions, a few hundred thousand
    at ``EXACT_UP_TO``, where listing the C(N, k) sets would be 10^11.
    """
    k, n = sum(is_current), len(doubled)
    top = sum(sorted(doubled)[n - k:])
    ways = [[1] + [0] * top] + [[0] * (top + 1) for _ in range(k)]
    for r in doubled:
        for j in range(k, 0, -1):
            ways[j][r:] = [a + b for a, b in zip(ways[j][r:], ways[j - 1], strict=False)]
    observed = sum(r for r, side in zip(doubled, is_current, strict=True) if side)
    mean = k * (n + 1)  # k doubled ranks of (n + 1) / 2 on average
    extreme = sum(count for s, count in enumerate(ways[k]) if abs(s - mean) >= abs(observed - mean))
    return min(extreme / math.comb(n, k), 1.0)


def testable(n_base: int, n_current: int) -> bool:
    """Whether runs of these sizes can show anything beyond noise at all: even fully separated,
    3 requests against 3 give p = 2/20, which is no evidence at ``ALPHA``."""
    return n_base > 0 and n_current > 0 and 2 / math.comb(n_base + n_current, n_base) < ALPHA


#: The fewest requests per run (both alike) that ``testable`` accepts: 4 at ``ALPHA`` 0.05.
SMALLEST_TESTABLE = next(n for n in range(1, 1000) if testable(n, n))


def needed_requests(slower: float) -> int | None:
    """About how many requests per run would find a shift like the one seen beyond noise,
    ``POWER`` of the time: Noether's sample size for the U test with runs alike,
    ``(z(1 - ALPHA/2) + z(POWER))^2 / (6 (P(slower) - 1/2)^2)``, and never fewer than
    ``SMALLEST_TESTABLE``. None when the samples show no slowdown to size for."""
    if slower <= 0.5:
        return None
    z = NormalDist().inv_cdf
    return max(math.ceil((z(1 - ALPHA / 2) + z(POWER)) ** 2 / (6 * (slower - 0.5) ** 2)), SMALLEST_TESTABLE)


def hodges_lehmann(base: list[float], current: list[float]) -> float:
    """The median of every current-minus-base difference: how much slower a current request
    typically is than a base one (the shift the U test is about, robust to a few outliers).

    Two load runs hold millions of such differences, so they are never listed: the k-th
    smallest is found by bisecting on its value, counting the differences at or below a value
    with one binary search per current sample, to a nanosecond.
    """
    b, c = sorted(base), sorted(current)
    total = len(b) * len(c)

    def kth(k: int) -> float:  # the k-th smallest difference, 1-based
        lo, hi = c[0] - b[-1], c[-1] - b[0]
        while hi - lo > 1e-9:
            mid = (lo + hi) / 2
            if mid in (lo, hi):  # float resolution reached
                break
            if sum(len(b) - bisect_left(b, x - mid) for x in c) >= k:
                hi = mid
            else:
                lo = mid
        return hi

    return kth((total + 1) // 2) if total % 2 else (kth(total // 2) + kth(total // 2 + 1)) / 2
