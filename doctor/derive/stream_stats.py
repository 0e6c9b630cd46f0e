"""Statistics of what the client felt, per request and per path (direct / gateway).

Warm-up requests are excluded from every distribution but kept as ``warmup_ttft`` (an answer cut
after its first token too) so a cold start stays visible. Failed requests count in ``failures`` and never in a latency before their
first token, so an error is never mistaken for a fast answer, with one exception that is the
opposite mistake: a request still waiting for its first token when the probe gave up on it
(``--stall-timeout``, the deadline) has a TTFT of *at least* that wait. It is right-censored,
not missing: leaving it out would report the lucky requests of an incident as what users felt.
Such a request counts in ``ttft_felt`` at its lower bound (``ttft_censored`` says how many),
warm-up or not, since a warm-up that never got an answer is no cold start but the incident
itself. ``ttft`` keeps the requests whose first token came only, which is what compares with the
server's own TTFT histogram (the server has not counted a request that is still waiting either).

Measured time is never thrown away: an answer cut after its first token (the user's
``--deadline`` shorter than one answer, Ctrl-C, a stall, a connection cut), whatever its outcome
says, measured its TTFT exactly and every gap it saw. Read from the trace's token timestamps
alone, it counts in ``ttft``, ``ttft_felt``, ``tpot``, ``itl`` and ``max_gap`` (``partial`` says
how many), and still in ``failures`` when it was one.

The client's own freezes (``ClientHealth.freezes``: its event loop could not read) are taken
out of every wait and gap they overlap: a token that arrived while the client was frozen is
stamped when it woke up, so the gap to it is at least the time before the freeze, not the time
after. Each latency is then a lower bound of what the server did, the way a histogram's p90
counts at its bucket's lower bound: a client that stalls beside a busy engine (34 s, seen on a
2-core host) cannot invent an incident. ``client_frozen`` says how much was taken out. A client
sharded over worker processes froze per process: each request loses only the freezes of the
worker that read it (``ClientHealth.freezes_of``).
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from doctor.derive.missing import Missing
from doctor.evidence import Bundle, ProbePath, RequestTrace, StreamEvidence
from doctor.evidence.stream import NOT_THE_TARGETS, WEDGED, awake_span, frozen_overlap, send_lag
from doctor.foundation.stats import quantile
from doctor.foundation.wire import MAX_NUMBER, number

#: A gap larger than this multiple of its request's median gap is a stall.
STALL_FACTOR = 5.0

#: Outcomes of a request that was sent and was still waiting when the probe stopped waiting.
CENSORING_OUTCOMES = ("stall", "deadline", WEDGED)

#: MLPerf's early-stopping confidence (Single-stream rule).
EARLY_STOP_CONFIDENCE = 0.99


@dataclass
class Dist:
    """A distribution summary; ``n`` is always shown next to any percentile."""

    n: int = 0
    min: float | None = None
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    max: float | None = None
    mean: float | None = None
    p95: float | None = None  # what autoscalers scale on (KEDA, HPA examples): exported, not judged
    # MLPerf early-stopping estimates: an upper bound the true percentile stays under with
    # 99 % confidence, None with ``note`` saying why when n is too small for one.
    p90_early: float | None = None
    p99_early: float | None = None
    note: str | None = None


def early_stopping_rank(n: int, percentile: float, confidence: float = EARLY_STOP_CONFIDENCE) -> int | None:
    """MLPerf's Single-stream early-stopping rule: the rank (1 = the largest) of the estimate.

    With n samples, the largest t >= 1 with n >= h(t) + t, where h(t) is the smallest h with
    I_percentile(h, t + 1) < 1 - confidence. As I_x(h, t + 1) = P(Binomial(h + t, 1 - x) <= t)
    falls as h grows, that is the largest t with P(Binomial(n, 1 - percentile) <= t) < 1 -
    confidence, found by summing the binomial terms upward (log space: n may be large).
    None when even t = 1 does not hold (n < 64 for p90, n < 662 for p99 at 99 %).
    """
    if n <= 1:
        return None
    over = 1.0 - percentile
    log_over, log_under = math.log(over), math.log(percentile)
    log_n_fact = math.lgamma(n + 1)
    cdf, best = 0.0, None
    for t in range(n):
        cdf += math.exp(log_n_fact - math.lgamma(t + 1) - math.lgamma(n - t + 1) + t * log_over + (n - t) * log_under)
        if cdf >= 1.0 - confidence:
            break
        if t >= 1:
            best = t
    return best


def _early(sorted_values: list[float], percentile: float) -> float | None:
    rank = early_stopping_rank(len(sorted_values), percentile)
    return None if rank is None else sorted_values[-rank]


def p90_censored_above(measured: list[float], censored: int) -> float | None:
    """The p90 of ``measured`` and ``censored`` more values of which only a lower bound is known,
    at its highest: each censored value unbounded. None when one of them could carry the p90
    anywhere (it then says nothing about a budget above its lower bound), or with no value at all."""
    n = len(measured) + censored
    pos = (n - 1) * 0.9
    lo = int(pos)
    if lo >= len(measured) or (pos > lo and lo + 1 >= len(measured)):
        return None
    # the censored values sort last and weigh nothing here: any finite stand-in gives the same p90
    vals = sorted(measured)
    return quantile(vals + [vals[-1]] * censored, 0.9)


def dist(values: list[float]) -> Dist:
    """Summarise values (``None`` ignored) into a ``Dist``; an empty one when there are none."""
    vals = sorted(v for v in values if v is not None)
    if not vals:
        return Dist()
    out = Dist(
        n=len(vals),
        min=vals[0],
        p50=quantile(vals, 0.5),
        p90=quantile(vals, 0.9),
        p99=quantile(vals, 0.99),
        p95=quantile(vals, 0.95),
        max=vals[-1],
        mean=statistics.fmean(vals),
        p90_early=_early(vals, 0.9),
        p99_early=_early(vals, 0.99),
    )
    if out.p90_early is None:
        out.note = f"insufficient n for the p90 early-stopping estimate ({out.n} < 64)"
    elif out.p99_early is None:
        out.note = f"insufficient n for the p99 early-stopping estimate ({out.n} < 662)"
    return out


@dataclass
class RequestStats:
    """One probe request's timings as the client felt them (the client's own freezes taken out):
    TTFT from the scheduled send, per-token TPOT, every gap between token-bearing events and the
    stalls among them, and how the stream was read. The gap chart and the per-request checks read it."""

    index: int
    path: ProbePath
    warmup: bool
    outcome: str
    ttft: float | None = None  # from the scheduled send
    tpot: float | None = None  # (E2E - TTFT) / (tokens - 1): per token, not per event
    e2e: float | None = None  # scheduled send -> last token (the usage trailer does not extend it)
    client_queue: float | None = None  # actual send - scheduled send
    tokens: int = 0  # tokens generated (see ``token_count``)
    events: int = 0  # token-bearing events; several tokens per event when the server bundles them
    gaps: list[float] = field(default_factory=list)  # between token-bearing events (ITL)
    median_gap: float | None = None
    max_gap: float | None = None
    stall_above: float | None = None  # STALL_FACTOR x the typical gap (``stall_base``): a longer gap is a stall
    stalls: int = 0  # gaps > stall_above
    events_per_read: float | None = None
    bytes_per_read: float | None = None
    headers_to_first_token: float | None = None
    first_to_last_token: float | None = None
    # ``ttft`` (no token came) or ``max_gap`` (the stream froze) is a lower bound: the probe
    # stopped waiting (``CENSORING_OUTCOMES``).
    censored: bool = False
    client_frozen: float = 0.0  # seconds of the client's own freezes taken out of this request's timings


@dataclass
class PathStats:
    """What the client felt on one path (direct to the engine, or through the gateway): counts of
    measured, failed and warm-up requests, a ``Dist`` per latency, how the stream was framed and
    read, and every request's ``RequestStats``. Comparing two of them is how a gateway's share of
    the latency is told from the engine's."""

    path: ProbePath
    url: str | None = None
    n_ok: int = 0
    n_failed: int = 0
    n_warmup: int = 0
    n_void: int = 0  # measured requests that neither measured the target nor failed it (``NOT_THE_TARGETS``)
    failures: dict[str, int] = field(default_factory=dict)  # outcome -> count, ``NOT_THE_TARGETS`` included
    client_frozen: Dist = field(default_factory=Dist)  # per request (warm-ups too) the client froze in, seconds
    ttft: Dist = field(default_factory=Dist)
    tpot: Dist = field(default_factory=Dist)
    itl: Dist = field(default_factory=Dist)  # every gap of every request, pooled
    e2e: Dist = field(default_factory=Dist)
    max_gap: Dist = field(default_factory=Dist)  # per-request largest gap
    client_queue: Dist = field(default_factory=Dist)
    events_per_read: Dist = field(default_factory=Dist)  # over reads that completed >= 1 event
    bytes_per_read: Dist = field(default_factory=Dist)
    headers_to_first_token: Dist = field(default_factory=Dist)
    first_to_last_token: Dist = field(default_factory=Dist)
    warmup_ttft: Dist = field(default_factory=Dist)
    ttft_felt: Dist = field(default_factory=Dist)  # ``ttft`` and the censored waits: what users felt
    ttft_censored: int = 0  # values of ``ttft_felt`` that are lower bounds (still waiting when the probe gave up)
    # ``ttft_felt``'s p90 were every censored wait unbounded: None when one could carry it anywhere,
    # so that a wait cut below a budget (a tight --deadline) is not read as within it
    ttft_felt_p90_high: float | None = None
    gap_censored: int = 0  # values of ``max_gap`` that are lower bounds (frozen when the probe gave up)
    partial: int = 0  # answers cut after their first token, whose measured TTFT and gaps count
    stalls: int = 0
    headers: dict[str, str] = field(default_factory=dict)  # from the first successful request
    http_version: str | None = None
    framing: str | None = None  # the stream framing of the first successful request (``RequestTrace.framing``)
    tokens_estimated: bool = False  # token counts (TPOT, tokens) estimated from text length
    requests: list[RequestStats] = field(default_factory=list)


@dataclass
class StreamStats:
    """The ``stream_stats`` view: per path, what the client felt (see the module docstring for what
    counts where), with the route, the concurrency it was measured at, and what the user said of the
    gateway. What most latency checks and the per-path table read."""

    route: str | None = None
    concurrency: int = 1
    paths: dict[ProbePath, PathStats] = field(default_factory=dict)
    gateway_route: str | None = None  # the application's own route on the gateway path, when given
    gateway_kind: str | None = None  # what the user said the gateway is (--gateway-kind)

    def path(self, name: ProbePath) -> PathStats | None:
        return self.paths.get(name)


def token_count(req: RequestTrace) -> int:
    """Tokens the request generated: what TPOT divides by.

    The usage trailer's ``completion_tokens`` when the server sent one, else the per-event counts
    (continuous usage stats, ``TokenEvent.tokens``), which are 1 each when the server said nothing.
    Never fewer than the token-bearing events: each carried at least one token. A count beyond
    any real one (a bundle may hold ``10**400``, which no float holds) is bounded like every
    number from outside: a trailer's is ignored, an event's counts as ``MAX_NUMBER``.
    """
    events = [t for t in req.tokens if math.isfinite(t.t)]
    counted = sum(min(max(t.tokens, 1), MAX_NUMBER) for t in events)
    claimed = number(req.completion_tokens, int)
    return max(claimed if claimed is not None else counted, len(events))


def _bounded(count: int) -> float:
    """A read's count of events or bytes as a float, at most ``MAX_NUMBER`` (a bundle may hold
    ``10**400``, which no float holds)."""
    return float(min(count, MAX_NUMBER))


def stall_base(gaps: list[float]) -> float | None:
    """The gap a stall is measured against: the median gap, or the median of the non-zero gaps.

    Behind a proxy that buffers, most events arrive in the same read as the one before and share
    its stamp, so most gaps are 0 and so is their median; "5x the median" would then call no gap
    a stall (or every one). The non-zero gaps are the gaps between bursts, the pace at which that
    client actually gets text, and a stall is a gap far beyond that pace.
    """
    base = statistics.median(gaps) if gaps else 0.0
    if base > 0:
        return base
    moving = [g for g in gaps if g > 0]
    return statistics.median(moving) if moving else None


def request_stats(req: RequestTrace, freezes: Sequence[Sequence[float]] = (), closed_loop: bool = False) -> RequestStats:
    """What one request felt, from its client timestamps (latencies count from the scheduled send,
    less the client's own send lag, ``send_lag``: ``closed_loop`` says whether the schedule was the
    slot), less the client's own ``freezes`` (sorted, disjoint intervals; see the module docstring).
    A request whose reads the kernel stamped keeps its freezes: the kernel stamped what arrived
    during one at its arrival, not at the freeze's end."""
    rs = RequestStats(index=req.index, path=req.path, warmup=req.warmup, outcome=req.outcome)
    if req.stamp_clock == "kernel":
        freezes = ()
    origin = req.t_scheduled + (send_lag(req, closed_loop) or 0.0)

    def span(start: float, end: float) -> float:
        return awake_span(freezes, start, end)

    if req.t_sent is not None:
        rs.client_queue = req.t_sent - req.t_scheduled
    times = [t.t for t in req.tokens if math.isfinite(t.t)]  # a hand-edited null time is skipped, not a NaN gap
    rs.events = len(times)
    rs.tokens = token_count(req)
    if req.reads:
        with_events = [r for r in req.reads if r.events > 0]
        if with_events:
            rs.events_per_read = statistics.fmean(_bounded(r.events) for r in with_events)
            rs.bytes_per_read = statistics.fmean(_bounded(r.nbytes) for r in with_events)
    waited_until = req.t_failed if req.t_failed is not None else req.t_end
    censored = req.outcome in CENSORING_OUTCOMES and req.t_sent is not None and waited_until is not None
    last = waited_until if waited_until is not None else (times[-1] if times else req.t_scheduled)
    if freezes:
        rs.client_frozen = frozen_overlap(freezes, req.t_scheduled, max(last, times[-1] if times else last))
    if not times:
        if censored and waited_until is not None:
            rs.ttft, rs.censored = span(origin, waited_until), True
        return rs
    rs.ttft = span(origin, times[0])
    rs.e2e = span(origin, times[-1])
    rs.first_to_last_token = span(times[0], times[-1])
    if req.t_headers is not None:
        rs.headers_to_first_token = span(req.t_headers, times[0])
    rs.gaps = [span(a, b) for a, b in itertools.pairwise(times)]
    if rs.gaps:
        # per token: an event that carries k tokens stands for k tokens, not one (vLLM's
        # --stream-interval, its API server merging tokens when it falls behind); the per-event
        # gaps stay what the client saw, as ITL
        rs.tpot = (rs.e2e - rs.ttft) / (rs.tokens - 1)
        rs.median_gap = statistics.median(rs.gaps)
        rs.max_gap = max(rs.gaps)
        base = stall_base(rs.gaps)
        if base is not None:
            rs.stall_above = STALL_FACTOR * base
            rs.stalls = sum(1 for g in rs.gaps if g > rs.stall_above)
    if censored and waited_until is not None and span(times[-1], waited_until) > (rs.max_gap or 0.0):
        rs.max_gap, rs.censored = span(times[-1], waited_until), True
    return rs


def path_stats(name: ProbePath, url: str | None, reqs: list[RequestTrace],
               freezes: Mapping[int | None, Sequence[Sequence[float]]] | None = None, closed_loop: bool = False) -> PathStats:
    """Distributions over one path's measured, successful requests; failures counted apart.
    ``freezes``: the client's freezes by ``RequestTrace.shard`` (the process that read it);
    ``closed_loop``: the schedule was the slot (``request_stats``)."""
    ps = PathStats(path=name, url=url)
    measured: list[RequestStats] = []
    warm: list[RequestStats] = []
    censored: list[RequestStats] = []  # failed, but their wait is a latency (see the module docstring)
    for req in reqs:
        rs = request_stats(req, freezes.get(req.shard, ()) if freezes else (), closed_loop)
        ps.requests.append(rs)
        if rs.censored:
            censored.append(rs)
        if req.warmup:
            ps.n_warmup += 1
            if req.ok or rs.events:  # a warm-up cut after its first token measured it too
                warm.append(rs)
            continue
        if req.ok:
            ps.n_ok += 1
            measured.append(rs)
            if not ps.headers:
                ps.headers = dict(req.headers)
                ps.http_version = req.http_version
                ps.framing, ps.tokens_estimated = req.framing, req.tokens_estimated
        else:
            if req.outcome in NOT_THE_TARGETS:
                ps.n_void += 1
            else:
                ps.n_failed += 1
            ps.failures[req.outcome] = ps.failures.get(req.outcome, 0) + 1
    ok_reads = [r for req in reqs if req.ok and not req.warmup for r in req.reads if r.events > 0]
    waited = [r for r in censored if r.tokens == 0]
    partial = [r for r in ps.requests if r.outcome != "ok" and not r.warmup and r.events]  # cut after a first token
    seen = measured + partial  # every answer whose first token came: its TTFT and gaps are measured
    ps.ttft = dist([r.ttft for r in seen if r.ttft is not None])
    ps.ttft_felt = dist([r.ttft for r in seen + waited if r.ttft is not None])
    ps.ttft_censored = len(waited)
    ps.ttft_felt_p90_high = p90_censored_above([r.ttft for r in seen if r.ttft is not None], len(waited))
    ps.partial = len(partial)
    ps.tpot = dist([r.tpot for r in seen if r.tpot is not None])
    ps.itl = dist([g for r in seen for g in r.gaps])
    ps.e2e = dist([r.e2e for r in measured if r.e2e is not None])
    ps.max_gap = dist([r.max_gap for r in seen if r.max_gap is not None])
    ps.gap_censored = sum(1 for r in partial if r.censored)
    ps.client_queue = dist([r.client_queue for r in measured if r.client_queue is not None])
    ps.events_per_read = dist([_bounded(r.events) for r in ok_reads])
    ps.bytes_per_read = dist([_bounded(r.nbytes) for r in ok_reads])
    ps.headers_to_first_token = dist(
        [r.headers_to_first_token for r in seen if r.headers_to_first_token is not None]
    )
    ps.first_to_last_token = dist(
        [r.first_to_last_token for r in measured if r.first_to_last_token is not None]
    )
    ps.warmup_ttft = dist([r.ttft for r in warm if r.ttft is not None])
    ps.stalls = sum(r.stalls for r in measured)
    ps.client_frozen = dist([r.client_frozen for r in ps.requests if r.client_frozen > 0])
    return ps


def derive_stream_stats(bundle: Bundle) -> StreamStats:
    """The ``stream_stats`` view, per path in the order the probe first used them."""
    stream = bundle.stream
    if stream is None:
        raise Missing("no stream probe ran (pass --engine and/or --gateway)")
    if not stream.requests:
        raise Missing("the stream probe sent no request")
    stats = StreamStats(route=stream.shape.route, concurrency=stream.shape.concurrency,
                        gateway_route=stream.shape.gateway_route, gateway_kind=stream.shape.gateway_kind)
    freezes = {shard: _freezes(stream.client.freezes_of(shard)) for shard in {r.shard for r in stream.requests}}
    for name in dict.fromkeys(r.path for r in stream.requests):
        reqs = [r for r in stream.requests if r.path == name]
        stats.paths[name] = path_stats(name, stream.shape.paths.get(name), reqs, freezes, stream.shape.rate is None)
    return stats


def _freezes(freezes: Sequence[Sequence[float]]) -> list[tuple[float, float]]:
    """A process's freezes as ``frozen_overlap`` needs them: sorted, disjoint, each a real interval
    (a hand-edited bundle may hold anything)."""
    intervals = sorted((a, b) for a, b in (f for f in freezes if len(f) == 2)
                       if math.isfinite(a) and math.isfinite(b) and a < b)
    merged: list[tuple[float, float]] = []
    for a, b in intervals:
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(b, merged[-1][1]))
        else:
            merged.append((a, b))
    return merged


def measured_prompt_tokens(stream: StreamEvidence) -> list[int]:
    """Prompt lengths the server counted (usage trailers) for measured, successful requests.

    One definition for every consumer (run record, prefill checks): warm-ups and failures are
    excluded, as they are from every latency statistic.
    """
    return [r.prompt_tokens for r in stream.requests if r.ok and not r.warmup and r.prompt_tokens is not None]
