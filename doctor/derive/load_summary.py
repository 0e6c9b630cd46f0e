"""A load run in MLPerf's terms: latency percentiles, throughput, goodput, offered vs achieved load.

Computed from the stream evidence of one path (``llm-doctor load`` and each level of ``sweep``
drive one), with the same per-request statistics as ``stream_stats`` (latency from the
*scheduled* send; the client's own freezes taken out). What it adds:

- throughput: successful requests and output tokens per second over the measured span (the
  first scheduled send to the last answer's end);
- goodput (DistServe's): requests that met both budgets, per second, and their fraction of the
  requests sent (a failure is never good);
- arrivals: the rate asked for (``offered_rps``, Poisson scenarios) and the rate the client
  achieved, and the *late* arrivals, sent more than ``LATE_AFTER_S`` after their scheduled time
  (``doctor.evidence.stream.late_arrival``).
  A late arrival's latency still counts from its schedule (no coordinated omission), but a run
  with many is a client that could not offer the load, and the report says so;
- the cost per million output tokens at that throughput, given the price of a GPU hour.

Not a ``DERIVED`` view: it needs the budgets and the price, which a check never sees.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from doctor.derive.missing import Missing
from doctor.derive.stream_stats import Dist, derive_stream_stats
from doctor.evidence import Bundle, ProbePath
from doctor.evidence.stream import late_arrival
from doctor.model import Budgets


@dataclass(frozen=True)
class Price:
    """What a GPU hour costs (``--gpu-hour-price``) and how many GPUs serve (``--gpus``)."""

    gpu_hour: float
    gpus: int = 1


@dataclass
class LoadSummary:
    """One load run's numbers (the JSON ``summary``); every latency in seconds, ``None`` when unmeasured."""

    scenario: str | None
    path: str
    n: int = 0  # measured requests sent
    n_ok: int = 0
    n_failed: int = 0
    ttft_p50_s: float | None = None
    ttft_p90_s: float | None = None
    ttft_p99_s: float | None = None
    ttft_p90_early_s: float | None = None  # MLPerf's early-stopping bound; None below n = 64
    tpot_p50_s: float | None = None
    tpot_p90_s: float | None = None
    tpot_p99_s: float | None = None
    tpot_p90_early_s: float | None = None
    itl_p50_s: float | None = None
    itl_p90_s: float | None = None
    e2e_p50_s: float | None = None
    e2e_p90_s: float | None = None
    p90_note: str | None = None  # why a p90 early-stopping bound is missing
    span_s: float | None = None
    requests_per_s: float | None = None
    output_tokens_per_s: float | None = None
    good: int = 0
    goodput_rps: float | None = None
    good_fraction: float | None = None
    ttft_budget_s: float | None = None
    tpot_budget_s: float | None = None
    offered_rps: float | None = None  # the Poisson rate asked for; None in a closed loop
    achieved_rps: float | None = None  # sends per second the client managed
    late: int = 0
    late_fraction: float | None = None
    late_max_s: float | None = None
    client_suspect: bool = False
    client_reasons: list[str] | None = None
    cost_per_million_output_tokens: float | None = None
    over_budgets: list[str] | None = None  # the budgets the judged p90s exceed (``over``), by name; [] within both

    @property
    def ttft_judged_s(self) -> float | None:
        """The TTFT p90 a budget is held to: the early-stopping bound once n allows one, else the p90."""
        return self.ttft_p90_early_s if self.ttft_p90_early_s is not None else self.ttft_p90_s

    @property
    def tpot_judged_s(self) -> float | None:
        return self.tpot_p90_early_s if self.tpot_p90_early_s is not None else self.tpot_p90_s

    def over(self, budgets: Budgets) -> dict[str, float]:
        """Budget name -> judged p90 / budget, for each budget the run exceeds (no answer: TTFT over).

        The one rule of "within budget": a sweep level's (``doctor.runs.sweep_knee.Level``), a load run's
        JSON ``summary.over``, and so an ``analyze`` of a level's kept bundle, all read it."""
        ttft, tpot = self.ttft_judged_s, self.tpot_judged_s
        out: dict[str, float] = {}
        if ttft is None:
            out["ttft"] = math.inf
        elif ttft > budgets.ttft_s:
            out["ttft"] = ttft / budgets.ttft_s
        if tpot is not None and tpot > budgets.tpot_s:
            out["tpot"] = tpot / budgets.tpot_s
        return out


def _rate(count: float, span: float | None) -> float | None:
    return count / span if span and span > 0 else None


def load_summary(bundle: Bundle, budgets: Budgets, price: Price | None = None) -> LoadSummary:
    """The summary of the bundle's one probed path (the gateway when both were probed)."""
    stats = derive_stream_stats(bundle)  # raises Missing without requests
    stream = bundle.stream
    assert stream is not None  # derive_stream_stats raised otherwise
    path = ProbePath.GATEWAY if ProbePath.GATEWAY in stats.paths else next(iter(stats.paths))
    ps = stats.paths[path]
    traces = [t for t in stream.requests if t.path == path and not t.warmup]
    if not traces:
        raise Missing(f"no measured request on the {path} path")
    out = LoadSummary(scenario=stream.shape.scenario, path=path, ttft_budget_s=budgets.ttft_s, tpot_budget_s=budgets.tpot_s)
    _latencies(out, ps.ttft_felt, ps.tpot, ps.itl, ps.e2e)
    out.n, out.n_ok, out.n_failed = len(traces), ps.n_ok, ps.n_failed
    start = min(t.t_scheduled for t in traces)
    end = max((t.t_end for t in traces if t.t_end is not None), default=None)
    out.span_s = end - start if end is not None else None
    measured = [r for r in ps.requests if not r.warmup]
    ok = [r for r in measured if r.outcome == "ok"]
    good = [r for r in ok if r.ttft is not None and r.ttft <= budgets.ttft_s and (r.tpot is None or r.tpot <= budgets.tpot_s)]
    out.good = len(good)
    out.requests_per_s = _rate(len(ok), out.span_s)
    out.output_tokens_per_s = _rate(sum(r.tokens for r in ok), out.span_s)
    out.goodput_rps = _rate(len(good), out.span_s)
    counted = out.n_ok + out.n_failed
    out.good_fraction = len(good) / counted if counted else None
    out.offered_rps = stream.shape.rate
    sends = sorted(t.t_sent for t in traces if t.t_sent is not None)
    if len(sends) >= 2:
        out.achieved_rps = _rate(len(sends) - 1, sends[-1] - start)  # n arrivals span n - 1 gaps
    if stream.shape.rate:  # a closed loop's schedule is its send: never late
        delays = [t.t_sent - t.t_scheduled for t in traces if t.t_sent is not None]
        out.late = sum(1 for t in traces if late_arrival(t))
        out.late_fraction = out.late / len(delays) if delays else None
        out.late_max_s = max(delays, default=None)
    out.client_suspect, out.client_reasons = stream.client.suspect, list(stream.client.reasons)
    out.over_budgets = sorted(out.over(budgets))
    if price is not None and out.output_tokens_per_s:
        out.cost_per_million_output_tokens = price.gpu_hour * price.gpus / 3600 / out.output_tokens_per_s * 1e6
    return out


def _latencies(out: LoadSummary, ttft: Dist, tpot: Dist, itl: Dist, e2e: Dist) -> None:
    out.ttft_p50_s, out.ttft_p90_s, out.ttft_p99_s, out.ttft_p90_early_s = ttft.p50, ttft.p90, ttft.p99, ttft.p90_early
    out.tpot_p50_s, out.tpot_p90_s, out.tpot_p99_s, out.tpot_p90_early_s = tpot.p50, tpot.p90, tpot.p99, tpot.p90_early
    out.itl_p50_s, out.itl_p90_s = itl.p50, itl.p90
    out.e2e_p50_s, out.e2e_p90_s = e2e.p50, e2e.p90
    if ttft.n and ttft.p90_early is None:
        out.p90_note = f"p90 not established (n = {ttft.n} < 64): the early-stopping bound needs 64 requests"
