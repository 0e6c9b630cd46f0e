"""A fleet of replicas probed in one run: a row per replica, their imbalance, the fleet's verdict.

Pure: it reads the replicas' analysed reports (``{name: Report}``, one ``diagnose`` each) and
nothing else. Imbalance is judged the way ``compare`` judges a regression, from distributions
and not from a fixed ratio: the slowest replica's per-request TTFTs against the fastest's, with
the same Mann-Whitney U test as ``compare`` (``doctor.runs.rank_tests.mann_whitney``), held to a
stricter ``ALPHA``. A balancer that sends one replica more
than its share (or a replica on a sick GPU) shows as a shift beyond noise; two replicas 10 %
apart on six requests each do not.

The fleet's verdict: healthy when every replica is; otherwise the symptom most replicas share
(ties go to the slower replicas' symptom), said with how many of them have it, since "1 of 8
replicas queues" and "the fleet queues" call for different remediations (a balancer or a bad
node, against capacity).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from doctor.derive.view_json import view
from doctor.evidence import ProbePath
from doctor.model import Report, Symptom
from doctor.runs.compare_runs import request_samples
from doctor.runs.rank_tests import mann_whitney

#: Two-sided significance of the imbalance: stricter than ``compare``'s, which has a practical
#: threshold besides, because the slowest of several replicas against the fastest is the most
#: extreme pair of many, which a test of one pair takes for more evidence than it is.
ALPHA = 0.01
#: Below this many samples on either side, no difference can reach ``ALPHA``: said, not tested.
MIN_SAMPLES = 6


@dataclass
class ReplicaRow:
    """One replica's numbers, from its own report (``None``: not measured)."""

    name: str
    symptom: str
    ttft_p90: float | None = None
    tpot_p90: float | None = None
    waiting_max: float | None = None  # vllm:num_requests_waiting, the most during its probe
    failed: int = 0
    measured: int = 0
    summary: str = ""


@dataclass
class FleetView:
    """The fleet as a round over several replicas prints it (``reports.fleet``): a row per replica,
    whether the slowest replica's TTFTs are beyond noise from the fastest's, and the symptom most
    replicas share with how many have it.
    """

    rows: list[ReplicaRow] = field(default_factory=list)
    symptom: str = Symptom.HEALTHY.value
    affected: int = 0  # replicas with the fleet's symptom (0 when healthy)
    fastest: str | None = None  # by TTFT p90
    slowest: str | None = None
    ttft_ratio: float | None = None  # slowest / fastest TTFT p90
    p_value: float | None = None  # the noise test of the slowest against the fastest; None: untested
    imbalanced: bool = False  # the slowest replica's TTFTs beyond noise from the fastest's

    @property
    def headline(self) -> str:
        n = len(self.rows)
        if self.symptom == Symptom.HEALTHY.value:
            return f"fleet healthy: {n} of {n} replicas healthy"
        return f"fleet {self.symptom}: {self.affected} of {n} replicas {self.symptom}"


def replica_row(name: str, report: Report) -> ReplicaRow:
    stats, window = view(report, "stream_stats")[0], view(report, "metrics_window")[0]
    direct = stats.paths.get(ProbePath.DIRECT) if stats else None
    return ReplicaRow(
        name=name,
        symptom=report.verdict.symptom.value,
        ttft_p90=direct.ttft_felt.p90 if direct else None,
        tpot_p90=direct.tpot.p90 if direct else None,
        waiting_max=window.waiting.max if window and window.waiting else None,
        failed=direct.n_failed if direct else 0,
        measured=direct.n_ok + direct.n_failed if direct else 0,
        summary=report.verdict.summary,
    )


def fleet_view(reports: dict[str, Report]) -> FleetView:
    """Rows in the order given, the imbalance between the fastest and slowest replica, the verdict."""
    view = FleetView(rows=[replica_row(name, report) for name, report in reports.items()])
    timed = sorted((row for row in view.rows if row.ttft_p90 is not None), key=lambda row: row.ttft_p90 or 0.0)
    if len(timed) >= 2:
        fast, slow = timed[0], timed[-1]
        view.fastest, view.slowest = fast.name, slow.name
        if fast.ttft_p90:
            view.ttft_ratio = (slow.ttft_p90 or 0.0) / fast.ttft_p90
        fast_ttfts, slow_ttfts = (request_samples(reports[row.name], ProbePath.DIRECT, "TTFT") for row in (fast, slow))
        if min(len(fast_ttfts), len(slow_ttfts)) >= MIN_SAMPLES:
            view.p_value, slower = mann_whitney(fast_ttfts, slow_ttfts)
            view.imbalanced = view.p_value < ALPHA and slower > 0.5
    sick = sorted((row for row in view.rows if row.symptom != Symptom.HEALTHY.value), key=lambda row: -(row.ttft_p90 or 0.0))
    if sick:
        counts = Counter(row.symptom for row in sick)  # slowest first: ``max`` keeps the first of a tie
        view.symptom = max(counts, key=counts.__getitem__)
        view.affected = counts[view.symptom]
    return view
