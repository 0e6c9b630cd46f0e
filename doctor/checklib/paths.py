"""The path a check reads: the one that shows the engine best, or both of them side by side.

Engine checks read the direct path when it has answers (the gateway adds its own time);
proxy-only checks compare the two paths and need both measured. Public through
``doctor.checklib``.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.checking.contract import NotApplicable
from doctor.derive.stream_stats import PathStats, StreamStats
from doctor.evidence import ProbePath


def engine_path(stats: StreamStats) -> PathStats | None:
    """The path that shows the engine best: direct when it has answers, else whichever has."""
    direct = stats.path(ProbePath.DIRECT)
    if direct is not None and direct.ttft.n:
        return direct
    return next((ps for ps in stats.paths.values() if ps.ttft.n), None)


@dataclass
class PathPair:
    """The direct and the gateway path of one run, both measured (``measured_pair``)."""

    direct: PathStats
    gateway: PathStats

    def gateway_adds_ttft(self, min_s: float) -> bool:
        """Whether users felt the gateway's first token later than the engine's, beyond noise.

        The gateway's TTFT p50 must exceed the direct one's by more than ``min_s`` and by more
        than the direct path's own spread (p90 - p50): what separates a finding users felt from
        a risk (headers held, a compressor still flushing per event) that left TTFT as direct.
        """
        d50, g50 = self.direct.ttft.p50, self.gateway.ttft.p50
        if d50 is None or g50 is None:
            return False
        spread = (self.direct.ttft.p90 or d50) - d50
        return g50 - d50 > max(min_s, spread)


def measured_pair(stats: StreamStats) -> PathPair:
    """Both paths with at least one successful request.

    Raises ``NotApplicable`` (which the runner records as the check's outcome) saying why the
    comparison is impossible, so a check needs no branch of its own for it.
    """
    direct, gateway = stats.path(ProbePath.DIRECT), stats.path(ProbePath.GATEWAY)
    if gateway is None or direct is None:
        raise NotApplicable("needs both the direct (--engine) and the gateway (--gateway) path to compare them")
    for ps in (direct, gateway):
        if ps.ttft.n == 0:
            raise NotApplicable(f"no successful request on the {ps.path} path to compare")
    return PathPair(direct=direct, gateway=gateway)


def ttft_wait(ps: PathStats, answer_s: float) -> float:
    """How many answers of ``answer_s`` the p90 request waited beyond the fastest one.

    (TTFT p90 - TTFT min) / answer time: an edge that relays one stream at a time makes the
    c-th concurrent request wait c-1 whole answers, while an engine's own queueing and batched
    prefill stay well under one. A ratio of TTFTs would not do: the fastest direct request can
    be ten times faster than the p90 without any serialisation.
    """
    if ps.ttft.min is None or ps.ttft.p90 is None or answer_s <= 0:
        return 0.0
    return (ps.ttft.p90 - ps.ttft.min) / answer_s
