"""Where the time went: the two decompositions of a mean latency, in seconds and shares.

Means, because the server's histograms give nothing else; each share is of the mean it splits,
which ``Split`` names (``of`` and ``measure``) so that the wording can quote it.

- **First token**, on the path users take: gateway (gateway minus direct TTFT mean), transport
  (direct TTFT mean minus the server's), server queue and prefill (histogram means), and what
  is left. Of the server's TTFT mean instead when the server saw more than the probe
  (``prefer_server``), as the queue and prefill checks quote it.
- **Inter-token**, on the engine path: stalls (gaps over ``STALL_FACTOR`` x the request's
  median, above that median) and the steady decode left; from the server's inter-token
  histogram when no probe stream ran. A component is named for the cause that fired (preemption
  stalls, prefill interference; GPU state, batch depth).

What would have completed a split goes to ``missing`` (texts in ``doctor.verdict.missing``).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from doctor.derive.chunking import tokens_per_chunk
from doctor.derive.request_hops import hop_totals
from doctor.derive.stream_stats import STALL_FACTOR, PathStats, StreamStats
from doctor.evidence.stream import ProbePath
from doctor.model import Cause, Component, Finding, Severity
from doctor.verdict import missing as hint

if TYPE_CHECKING:
    from doctor.derive.metrics_window import MetricsWindow
    from doctor.derive.request_hops import RequestHopsView
    from doctor.evidence import StreamEvidence

#: Inter-token components that are the engine's steady per-token time (the rest is pure overhead).
STEADY_DECODE = ("decode", "batch-depth", "gpu-state")


@dataclass
class Split:
    """One decomposition: the components, what would have completed it, and the mean it splits
    (``seconds`` of ``measure`` on ``of``, over ``count`` requests, or gaps when ``gaps``)."""

    components: list[Component] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    of: str = ""  # "server", or the probe path
    measure: str = ""  # "TTFT mean", "TPOT mean", "inter-token latency mean"
    seconds: float = 0.0
    count: float = 0.0
    gaps: bool = False  # ``count`` counts inter-token gaps, not requests

    @property
    def label(self) -> str:
        """What the shares are of, without numbers, for the chart (``direct TPOT mean``)."""
        return f"{self.of} {self.measure}" if self.of else ""

    @property
    def server(self) -> bool:
        return self.of == "server"

    def part(self, name: str) -> Component | None:
        return next((c for c in self.components if c.name == name), None)

    def dominant(self, allowance: float = 0.0) -> Component | None:
        """The component holding most of the excess: steady decode counts only above ``allowance``
        (the TPOT budget), since decoding within budget is no excess; everything else is overhead."""
        def excess(c: Component) -> float:
            seconds = c.seconds or 0.0
            return max(seconds - allowance, 0.0) if c.name in STEADY_DECODE else seconds

        best = max(self.components, key=excess, default=None)
        return best if best is not None and excess(best) > 0 else None


def server_ttft(mw: MetricsWindow | None) -> float | None:
    """The server's TTFT mean over the window, when its histogram has one."""
    return mw.ttft.mean if mw is not None and mw.ttft is not None else None


def _shares(components: list[Component]) -> list[Component]:
    total = sum(c.seconds or 0.0 for c in components)
    for c in components:
        c.share = (c.seconds or 0.0) / total if total > 0 else None
    return components


def _no_server_split(mw: MetricsWindow | None) -> list[str]:
    """``missing.NO_SERVER_SPLIT``, unless the TTFT histogram is there and observed nothing in the
    window: a frozen histogram is evidence (a wedged engine, LD105), not a missing one."""
    frozen = mw is not None and mw.ttft is not None and not mw.ttft.count
    return [] if frozen else [hint.NO_SERVER_SPLIT]


def ttft_split(stats: StreamStats | None, probe_paths: set[str], mw: MetricsWindow | None, prefer_server: bool) -> Split:
    """Mean TTFT on the users' path = gateway + transport + queue + prefill (+ what is left); of the
    server's TTFT mean when the server saw more than the probe (``prefer_server``). ``probe_paths``:
    the paths the probe measured."""
    split = Split()
    server = server_ttft(mw)
    parts: list[Component] = []
    if prefer_server or stats is None or not probe_paths:
        if mw is None or mw.ttft is None or server is None:
            split.missing.extend(_no_server_split(mw))
            return split
        whole = server
        split.of, split.measure, split.seconds, split.count = "server", "TTFT mean", whole, mw.ttft.count
    else:
        user = stats.paths[ProbePath.GATEWAY if ProbePath.GATEWAY in probe_paths else ProbePath.DIRECT]
        direct = stats.paths[ProbePath.DIRECT] if ProbePath.DIRECT in probe_paths else None
        whole = user.ttft.mean or 0.0
        split.of, split.measure, split.seconds, split.count = user.path, "TTFT mean", whole, user.ttft.n
        if direct is not None and user is not direct:
            parts.append(Component("gateway", max(whole - (direct.ttft.mean or 0.0), 0.0),
                                   source="stream: gateway TTFT mean - direct TTFT mean"))
        elif direct is None and server is not None:
            parts.append(Component("gateway", max(whole - server, 0.0),
                                   source="stream: gateway TTFT mean - server TTFT mean (network included: no direct path)"))
        if direct is not None and server is not None:
            parts.append(Component("transport", max((direct.ttft.mean or 0.0) - server, 0.0),
                                   source="stream: direct TTFT mean - metrics: server TTFT mean"))
        if direct is None and ProbePath.GATEWAY in probe_paths and server is None:
            split.missing.append(hint.DIRECT_PATH)
    if mw is None:
        split.missing.append(hint.METRICS)
    else:
        queue = mw.queue.mean if mw.queue is not None else None
        if queue is not None and mw.queue is not None:
            parts.append(Component("queue", queue, source=f"metrics: {mw.queue.metric} mean, n={mw.queue.count:.0f}"))
        if mw.prefill is not None and mw.prefill.mean is not None:
            parts.append(Component("prefill", mw.prefill.mean,
                                   source=f"metrics: {mw.prefill.metric} mean, n={mw.prefill.count:.0f}"))
        elif server is not None and queue is not None:
            parts.append(Component("prefill", max(server - queue, 0.0),
                                   source="metrics: server TTFT mean - queue time mean"))
        if queue is None or server is None:
            split.missing.extend(_no_server_split(mw))
    explained = sum(c.seconds or 0.0 for c in parts)
    if parts and whole - explained > 0.05 * whole:
        parts.append(Component("other", whole - explained, source=f"{split.label} - the components above"))
    split.components = _shares(parts)
    return split


def _causes(findings: list[Finding]) -> set[Cause | None]:
    return {f.cause for f in findings if f.severity.rank >= Severity.WARNING.rank}


def _stall_name(mw: MetricsWindow | None, findings: list[Finding]) -> str:
    causes = _causes(findings)
    if (mw is not None and bool(mw.preemptions)) or Cause.PREEMPTION in causes:
        return "preemption-stalls"
    return "prefill-interference" if Cause.PREFILL_INTERFERENCE in causes else "stalls"


def _decode_name(findings: list[Finding]) -> str:
    causes = _causes(findings)
    return "gpu-state" if Cause.GPU_STATE in causes else "batch-depth" if Cause.BATCH_DEPTH in causes else "decode"


def itl_split(ps: PathStats, stream: StreamEvidence | None, mw: MetricsWindow | None, findings: list[Finding]) -> Split:
    """Mean TPOT (per token) on the engine path = stalls + steady decode.

    Token bundling is not a part: TPOT counts tokens, so k tokens per chunk leave it as it is
    (the per-chunk gaps, ITL, are k times longer; the token-bundling check reports that).
    """
    split = Split()
    measured = [r for r in ps.requests
                if not r.warmup and r.tpot is not None and r.gaps and r.median_gap and r.stall_above is not None]
    if not measured:
        return server_itl_split(mw, findings)
    tpot = statistics.fmean(r.tpot or 0.0 for r in measured)
    stall = statistics.fmean(  # a stall's time beyond the median gap, spread over the request's tokens as TPOT is
        sum(g - median for g in r.gaps if g > above) / (r.tokens - 1)
        for r in measured
        if (median := r.median_gap) is not None and (above := r.stall_above) is not None  # every one is: narrows the types
    )
    split.of, split.measure, split.seconds, split.count = ps.path, "TPOT mean", tpot, len(measured)
    parts = [Component(_stall_name(mw, findings), stall,
                       source=f"stream: gaps > {STALL_FACTOR:g}x the request's median, above it")]
    steady = max(tpot - stall, 0.0)
    if stream is None or tokens_per_chunk(stream) is None:
        split.missing.append(hint.USAGE_TRAILERS)
    parts.append(Component(_decode_name(findings), steady, source="stream: steady per-token time (stalls removed)"))
    split.components = _shares(parts)
    return split


def server_itl_split(mw: MetricsWindow | None, findings: list[Finding]) -> Split:
    """The server's mean inter-token latency = stalls + steady decode, from its histogram alone.

    Stalls are the gaps in buckets wholly above ``STALL_FACTOR`` x the median's bucket bound,
    each counted at its bucket's lower bound (at least that long) minus the median: a lower bound
    of the stall time, spread over every gap as the mean is.
    """
    split = Split()
    itl = mw.itl if mw is not None else None
    if itl is None or itl.mean is None or not itl.count or itl.p50_le is None:
        return split
    above = itl.p50_le * STALL_FACTOR
    stall_s, low, previous = 0.0, 0.0, 0.0
    for le, cumulative in itl.buckets:
        if low >= above:
            stall_s += (cumulative - previous) * (low - itl.p50_le)
        low, previous = le, cumulative
    if low >= above:
        stall_s += (itl.count - previous) * (low - itl.p50_le)
    stall = min(stall_s / itl.count, itl.mean)
    split.of, split.measure, split.seconds, split.count, split.gaps = "server", "inter-token latency mean", itl.mean, itl.count, True
    parts = [Component(_stall_name(mw, findings), stall,
                       source=f"metrics: {itl.metric} gaps in buckets above {STALL_FACTOR:g}x the median's bound"),
             Component(_decode_name(findings), itl.mean - stall, source=f"metrics: {itl.metric} mean, stalls removed")]
    split.components = _shares(parts)
    return split


def slow_split(hops: RequestHopsView | None) -> tuple[list[Component], float, int]:
    """The slow requests' own hops (``request_hops.slow``: TTFT at or above the p90), each summed over
    them, largest first, with its share of their summed TTFT; that TTFT and how many they are.
    Empty without the join: the engine sent no span, or no probe request carried a trace context."""
    if hops is None:
        return [], 0.0, 0
    rows = [hops.requests[i] for i in hops.slow if hops.requests[i].ttft is not None]
    whole = sum(r.ttft or 0.0 for r in rows)
    if whole <= 0:
        return [], 0.0, 0
    return ([Component(name, seconds, seconds / whole, "request_hops: the engine's span of each slow request")
             for name, seconds in hop_totals(rows).items()], whole, len(rows))
