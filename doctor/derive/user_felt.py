"""The ``user_felt`` view: what users felt in the window, from every witness that saw it.

The probe's few requests are one witness, not the judge: during an incident they are often the
lucky ones (sent after the burst, or the few that got a slot). So the view lists, each with its
``n``:

- **the probe, per path** (``direct`` / ``gateway``): client TTFT, TPOT and each answer's largest
  gap, censored requests included at their lower bound (``stream_stats``);
- **the server's own histograms** over the probe window (``/metrics`` scrapes): every user's
  requests, not only ours; the engine's side of the stream, without the network or a gateway;
- **Prometheus history** over ``--since``: the same histograms, for a window the probe may not
  have overlapped (the incident already over), and the only witness of a history-only run.

From histograms only bucket *bounds* are known, so a server-side p90 is an interval: the
classifier takes its lower bound as what the witness credibly says ("p90 at least 10 s"), never
the upper bound, so a coarse bucket cannot invent an incident. A freeze (a gap a reader waits
on as for a first token) is counted from the inter-token histogram: gaps beyond a bound per
request that finished. The classifier decides with these against the budgets; this view is
budget-free so the report can show every witness whatever the budgets are.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from doctor.derive.missing import Missing
from doctor.derive.stream_stats import Dist, StreamStats
from doctor.engine_metrics.readings import quantile_bounds
from doctor.engine_metrics.views import HistogramWindow, MetricsWindow
from doctor.evidence import Bundle

#: A histogram witness needs this many observations before its p90 says anything.
MIN_SERVER_N = 5

#: Answers freeze, as a p90 of each answer's largest gap would say, when at least this share of them did.
FREEZE_SHARE = 0.1


@dataclass
class Estimate:
    """One latency as one witness saw it. ``p90_low`` / ``p90_high`` bound the p90 (equal for the
    probe's exact samples; bucket bounds for a histogram, ``p90_high`` None in the +Inf bucket; for
    the probe's censored waits, the p90 were each wait unbounded, None when one could carry it anywhere)."""

    n: int
    p90_low: float
    p90_high: float | None
    mean: float | None = None
    censored: int = 0  # samples that are lower bounds (the probe gave up waiting)
    mean_only: bool = False  # a histogram without buckets: ``p90_low`` is its mean

    @property
    def exact(self) -> bool:
        return self.p90_high is not None and self.p90_high == self.p90_low


@dataclass
class Freezes:
    """Answers that froze: ``share`` of answers with a gap of at least ``gap_s`` (server side: gaps
    beyond that bound per finished request, capped at 1, since each such gap stops at least one
    answer and a long prefill stops every running one at once)."""

    gap_s: float
    share: float
    gaps: int
    requests: int


@dataclass
class Witness:
    """One source of what users felt. ``source``: ``probe`` | ``scrape`` | ``prometheus``;
    ``path``: the ``ProbePath`` for the probe, ``engine`` for the server's histograms."""

    source: str
    path: str
    label: str  # how a sentence names it
    ttft: Estimate | None = None
    tpot: Estimate | None = None  # probe: per-request TPOT; server: per-token gap (inter-token histogram)
    max_gap: Estimate | None = None  # probe only: each answer's largest gap
    freeze_buckets: list[list[float]] = field(default_factory=list)  # server: [le, gaps above le] of the ITL histogram
    requests: int = 0  # requests the witness saw finish (server) or measured (probe)

    @property
    def server(self) -> bool:
        return self.source != "probe"

    def freezes(self, budget_s: float, share: float = FREEZE_SHARE) -> Freezes | None:
        """Server side: answers that froze for longer than ``budget_s``, at the longest bucket bound
        at or above it that at least ``share`` of the answers passed (gaps beyond a bound are surely
        longer than it); the first such bound when none reaches ``share``."""
        if not self.freeze_buckets or self.requests <= 0:
            return None
        over = [Freezes(gap_s=le, share=min(gaps / self.requests, 1.0), gaps=int(gaps), requests=self.requests)
                for le, gaps in self.freeze_buckets if le >= budget_s]
        if not over:
            return None
        frequent = [f for f in over if f.share >= share]
        return frequent[-1] if frequent else over[0]


@dataclass
class UserFelt:
    """The ``user_felt`` view: every witness of what users felt (the probe, each path; the server's
    histograms, scraped or from Prometheus), and why a source gave none. The classifier judges the
    budget by the witnesses, never by one source alone."""

    witnesses: list[Witness] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # why a source gave no witness


def _probe_estimate(d: Dist, censored: int = 0, high: float | None = None) -> Estimate | None:
    """The probe's samples: exact, or with ``censored`` lower bounds whose p90 reaches at most ``high``."""
    if not d.n or d.p90 is None:
        return None
    return Estimate(n=d.n, p90_low=d.p90, p90_high=high if censored else d.p90, mean=d.mean, censored=censored)


def _server_estimate(h: HistogramWindow | None) -> Estimate | None:
    if h is None or h.count < MIN_SERVER_N:
        return None
    n = round(h.count)
    if not h.buckets and h.mean is not None:
        # An exposition without buckets (an excerpt, a summary) leaves the mean: a latency
        # distribution's p90 is rarely below its mean, so it stands in, marked as the mean.
        return Estimate(n=n, p90_low=h.mean, p90_high=None, mean=h.mean, mean_only=True)
    bounds = quantile_bounds(h.buckets, h.count, 0.9)
    if bounds is None:
        return None
    return Estimate(n=n, p90_low=bounds[0], p90_high=bounds[1], mean=h.mean)


def _above(h: HistogramWindow | None) -> list[list[float]]:
    """[le, observations above le] for each finite bound of an inter-token histogram."""
    if h is None or h.count <= 0:
        return []
    return [[le, max(h.count - cumulative, 0.0)] for le, cumulative in h.buckets]


def probe_witnesses(stats: StreamStats) -> list[Witness]:
    out = []
    for name, ps in stats.paths.items():
        ttft = _probe_estimate(ps.ttft_felt, ps.ttft_censored, ps.ttft_felt_p90_high)
        if ttft is None:
            continue
        out.append(Witness(
            source="probe", path=name, label=f"the probe's {name} requests",
            ttft=ttft, tpot=_probe_estimate(ps.tpot),
            # a gap cut short is judged at its lower bound only (its upper p90 is not worked out)
            max_gap=_probe_estimate(ps.max_gap, ps.gap_censored, ps.max_gap.p90),
            requests=ps.ttft_felt.n,
        ))
    return out


def server_witness(mw: MetricsWindow) -> Witness | None:
    """The server's histograms as a witness, or None when they saw too few requests."""
    ttft = _server_estimate(mw.ttft)
    tpot = _server_estimate(mw.itl)
    if ttft is None and tpot is None:
        return None
    finished = next((h.count for h in (mw.e2e, mw.ttft) if h is not None and h.count),
                    sum(mw.finished_by_reason.values()))
    if mw.source == "prometheus":
        span = f" over the last {_span(mw.window_s)}" if mw.window_s else ""
        label = f"Prometheus history{span} (every user's requests)"
    else:
        label = "the server's histograms over the probe window (every user's requests)"
    return Witness(
        source=mw.source, path="engine", label=label, ttft=ttft, tpot=tpot,
        freeze_buckets=_above(mw.itl), requests=round(finished),
    )


def _span(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 120 else f"{seconds:.0f} s"


def derive_user_felt(bundle: Bundle, stream_stats: StreamStats | Missing, scrape_window: MetricsWindow | Missing,
                     history_window: MetricsWindow | Missing) -> UserFelt:
    """Every witness of the window: probe paths, the window's scrapes, Prometheus history."""
    felt = UserFelt()
    if not isinstance(stream_stats, Missing):
        felt.witnesses += probe_witnesses(stream_stats)
    windows: list[MetricsWindow] = []
    for source, window, name in ((bundle.metrics, scrape_window, "/metrics scrapes"),
                                 (bundle.prometheus, history_window, "Prometheus history")):
        if source is None:
            continue
        if isinstance(window, Missing):
            felt.notes.append(f"{name}: {window}")
        else:
            windows.append(window)
    for mw in windows:
        witness = server_witness(mw)
        if witness is not None:
            felt.witnesses.append(witness)
        else:
            felt.notes.append(f"{mw.source}: fewer than {MIN_SERVER_N} requests in the server's histograms")
    if not felt.witnesses:
        raise Missing("no witness of what users felt: no measured request and no server histogram"
                      + (f" ({'; '.join(felt.notes)})" if felt.notes else ""))
    return felt
