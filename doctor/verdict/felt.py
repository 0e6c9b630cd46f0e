"""What each witness felt against the budgets, as numbers: no sentence is built here.

A witness (``doctor.derive.user_felt``) is one source of what users felt: the probe's requests
on one path, or the server's histograms. ``Felt`` holds how far it went over each budget, both
as an excess (clamped at zero, what the decision compares) and as a plain multiple (what the
reasoning prints). ``Bursts`` and ``SoFar`` are two more facts of the run the decision reads:
a gateway that delivers the stream in bursts, and an adaptive run that ended before it could
show the p90 within budget. ``doctor.verdict.wording`` words all three.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING

from doctor.derive.stream_stats import StreamStats, stall_base
from doctor.derive.user_felt import FREEZE_SHARE, Freezes, Witness
from doctor.evidence.stream import DEADLINE, ProbePath
from doctor.model import Budgets
from doctor.probes.sampling import within_so_far

if TYPE_CHECKING:
    from doctor.evidence import StreamEvidence


#: A gateway delivers bursts when its reads carry at least this many events each (median)
#: while the direct path's carry at most ``BURST_DIRECT`` (one flush per token).
BURST_EVENTS = 3.0
BURST_DIRECT = 1.5


@dataclass
class Felt:
    """What one witness felt, against the budgets (``excess``: p90 / budget - 1, >= 0).

    A freeze inside an answer (the p90 of each answer's largest gap; server side, the share of
    answers with a gap beyond the budget) is held to the first-token budget: a reader waits for
    it exactly as for a first token, and a mean per-token time hides it (one 5 s stall in 256
    tokens adds only 20 ms to that answer's TPOT). Histogram p90s count at their lower bound.
    """

    witness: Witness
    ttft_excess: float = 0.0
    tpot_excess: float = 0.0
    freeze_excess: float = 0.0
    # the same as plain multiples of the budget (not clamped at 1), for the reasoning
    ttft_ratio: float = 0.0
    tpot_ratio: float = 0.0
    freeze_ratio: float = 0.0
    # server side: the answers that froze beyond the budget, when at least ``FREEZE_SHARE`` of them did
    freezes: Freezes | None = None
    # the TTFT p90 is within budget only at the lower bound of waits the probe gave up on below the
    # budget (a tight --deadline): unbounded, they could carry it over, so it shows nothing
    ttft_open: bool = False

    @property
    def path(self) -> str:
        return self.witness.path

    @property
    def inter_excess(self) -> float:
        return max(self.tpot_excess, self.freeze_excess)

    @property
    def over(self) -> bool:
        return self.ttft_excess > 0 or self.inter_excess > 0

    @property
    def froze(self) -> bool:
        """Answers froze beyond the first-token budget: the largest-gap p90, or the server's share."""
        return self.freezes is not None or self.freeze_excess > 0


def felt_of(witness: Witness, budgets: Budgets) -> Felt:
    """The witness's p90s (at their lower bound) against the budgets."""
    f = Felt(witness)
    if witness.ttft is not None:
        e = witness.ttft
        f.ttft_ratio = e.p90_low / budgets.ttft_s
        f.ttft_excess = max(f.ttft_ratio - 1, 0.0)
        f.ttft_open = bool(e.censored) and not f.ttft_excess and (e.p90_high is None or e.p90_high > budgets.ttft_s)
    if witness.tpot is not None:
        f.tpot_ratio = witness.tpot.p90_low / budgets.tpot_s
        f.tpot_excess = max(f.tpot_ratio - 1, 0.0)
    if witness.max_gap is not None:
        f.freeze_ratio = witness.max_gap.p90_low / budgets.ttft_s
        f.freeze_excess = max(f.freeze_ratio - 1, 0.0)
    freezes = witness.freezes(budgets.ttft_s)
    if freezes is not None and freezes.share >= FREEZE_SHARE:
        # At least a tenth of the answers froze beyond the bucket bound: their largest-gap p90 is at least that.
        f.freezes = freezes
        f.freeze_ratio = max(freezes.gap_s / budgets.ttft_s, f.freeze_ratio)
        f.freeze_excess = max(f.freeze_ratio - 1, 0.0) or 1e-9
    return f


@dataclass
class Bursts:
    """The gateway breaks the one-flush-per-token contract the engine keeps: events per read (median)
    on each path, and the median pace of the bursts (None when no measured request had one)."""

    gateway_events: float
    direct_events: float
    pace_s: float | None


def bursts(stats: StreamStats | None) -> Bursts | None:
    """The gateway's bursts when it delivers ``BURST_EVENTS`` per read and the engine one, else None."""
    if stats is None:
        return None
    gw, direct = stats.path(ProbePath.GATEWAY), stats.path(ProbePath.DIRECT)
    if gw is None or direct is None or gw.events_per_read.p50 is None or direct.events_per_read.p50 is None:
        return None
    if gw.events_per_read.p50 < BURST_EVENTS or direct.events_per_read.p50 > BURST_DIRECT:
        return None
    paces = [base for r in gw.requests if not r.warmup and (base := stall_base(r.gaps)) is not None]
    return Bursts(gw.events_per_read.p50, direct.events_per_read.p50, statistics.median(paces) if paces else None)


@dataclass
class Unshown:
    """Every witness within budget, yet none shows the first token within it: ``open`` witnesses
    within only at waits the probe gave up on below the budget, or no witness with a TTFT at all.
    ``warmups``: each path's warm-up first token, measured but set aside as a possible cold start
    (LD103's subject); ``cut``: requests the user's ``--deadline`` cut, warm-ups included."""

    open: list[Felt]
    warmups: dict[str, float]
    cut: int


def unshown(felts: list[Felt], stats: StreamStats | None) -> Unshown | None:
    """What the run measured when the witnesses do not show the first token within budget (one of
    them ``ttft_open``, or none with a TTFT, no witness at all included), else None."""
    open_ = [f for f in felts if f.ttft_open]
    if not open_ and any(f.witness.ttft is not None for f in felts):
        return None
    paths = stats.paths.values() if stats is not None else ()
    warmups = {str(ps.path): ps.warmup_ttft.max for ps in paths if ps.warmup_ttft.max is not None}
    return Unshown(open_, warmups, sum(1 for ps in paths for r in ps.requests if r.outcome == DEADLINE))


@dataclass
class SoFar:
    """An adaptive run that ended (its duration ran out, its deadline, an interrupt) before its
    stopping rule could show ``path`` within budget: ``fast`` of the ``needed`` fast answers."""

    path: str
    fast: int
    needed: int
    stopped: str | None


def so_far(stream: StreamEvidence | None, budgets: Budgets) -> SoFar | None:
    """The first path short of "clearly within budget"; None when every path is, or when the user
    fixed the count (``--requests``: their choice, said in the run record)."""
    if stream is None or stream.shape.duration_s is None:
        return None
    paths = list(dict.fromkeys(r.path for r in stream.requests))
    short = within_so_far(stream.requests, paths, budgets.ttft_s, budgets.tpot_s, stream.client.freezes)
    if short is None:
        return None
    path, fast, needed = short
    return SoFar(path, fast, needed, stream.shape.stopped)
