"""MLPerf's early-stopping estimate on ``Dist``: the thresholds of the Single-stream rule at 99 %."""

from __future__ import annotations

import pytest

from doctor.derive.stream_stats import dist, early_stopping_rank


@pytest.mark.parametrize("n, percentile, rank", [
    (63, 0.9, None), (64, 0.9, 1), (80, 0.9, 1), (81, 0.9, 2), (97, 0.9, 3),
    (661, 0.99, None), (662, 0.99, 1), (838, 0.99, 2),
])
def test_rank_thresholds(n, percentile, rank):
    assert early_stopping_rank(n, percentile) == rank


def test_rank_grows_towards_the_percentile():
    # with many samples the estimate closes in on the empirical p90 from above
    n = 10_000
    assert 0.09 * n < early_stopping_rank(n, 0.9) < 0.1 * n


def test_dist_reports_the_estimate_or_why_not():
    small = dist([float(i) for i in range(10)])
    assert small.p90_early is None and "insufficient n" in small.note and small.p90 is not None
    values = [float(i) for i in range(100)]  # rank 3: the third largest
    d = dist(values)
    assert d.p90_early == 97.0 and d.p90_early >= d.p90
    assert d.p99_early is None and "p99" in d.note
