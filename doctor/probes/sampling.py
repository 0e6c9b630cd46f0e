"""When the probe has seen enough: a sequential stopping rule over the requests so far.

A fixed 8 requests is a coin toss during an incident: the few that run may be the lucky ones,
and 8 samples cannot say that a p90 is within budget anyway (with none of 8 over, a true
exceedance of 10 % is still likely: 0.9^8 = 43 %). So by default the probe keeps sending until
every path is *clearly* within or clearly over budget, or its time budget (``--duration``) runs
out.

The rule, per path and per budget (TTFT, and TPOT when answers have more than one token): of
the ``n`` requests finished, ``k`` exceeded the budget (a request still waiting at the stall
timeout, or failed by a timeout, counts as over: it is a TTFT at least that long). Under the
hypothesis that the p90 sits exactly at the budget, ``k`` is Binomial(n, 0.1).

- *Clearly over*: P(X >= k) < ``ALPHA``: that many slow requests are improbable if 90 % were fast.
- *Clearly within*: P(X <= k) < ``ALPHA``: that few slow requests are improbable if 10 % were slow.

It is the one-sided binomial test MLPerf's early-stopping estimate rests on, applied at each
look. Looking repeatedly inflates its error a little; ``MIN_REQUESTS`` per path and the time
budget bound that, and the verdict is computed afterwards from every witness anyway: the rule
decides only when to stop sending.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from doctor.evidence import ProbePath, RequestTrace
from doctor.evidence.stream import HEAD_TIMEOUT, NOT_THE_TARGETS, awake_span

#: One-sided significance of "clearly within" / "clearly over".
ALPHA = 0.05

#: The percentile the budgets are held to (the verdict compares p90s).
PERCENTILE = 0.9

#: Requests per path before any look: below it the rule never stops.
MIN_REQUESTS = 8

#: Outcomes that say "slow" rather than "broken": counted as over the first-token budget.
SLOW_OUTCOMES = ("stall", "timeout", "deadline")

#: A path whose first this many measured requests all failed is not sent more: a refused port, a
#: 502 or a hung gateway says the same on the fourth try, and a hung one costs a stall timeout each.
FAIL_FAST = 3

#: Failures that say the same on every try: once one measured request of a path failed so and no
#: request of it ever succeeded (warm-ups included), the path is sent no more. A handshake that
#: fails (the wrong scheme, an untrusted certificate), and a response head that never came within
#: its deadline: a gateway silent past the bound its direct path sets costs that bound per try.
DECISIVE = ("tls", HEAD_TIMEOUT)


def decisive(trace: RequestTrace) -> bool:
    """Whether ``trace`` failed in a way that says the same on every try: a ``DECISIVE`` outcome, or a
    gateway whose head came but whose first token did not within the bound its direct path sets
    (``first_token_deadline_s``), which costs that bound per try as a silent head does."""
    return trace.outcome in DECISIVE or trace.first_token_deadline_s is not None


def binomial_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p), summed in log space (n may be in the hundreds)."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    log_p, log_q = math.log(p), math.log1p(-p)
    log_n = math.lgamma(n + 1)
    return min(1.0, sum(math.exp(log_n - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * log_p + (n - i) * log_q)
                        for i in range(k + 1)))


def decided(over: int, n: int, alpha: float = ALPHA, q: float = 1 - PERCENTILE) -> str | None:
    """``"over"``, ``"within"`` or None (not yet) for ``over`` exceedances in ``n`` requests."""
    if n <= 0:
        return None
    if 1.0 - binomial_cdf(over - 1, n, q) < alpha:
        return "over"
    if binomial_cdf(over, n, q) < alpha:
        return "within"
    return None


#: The client's freezes: of its one process, or by client worker (``RequestTrace.shard``) when it was sharded.
Freezes = Sequence[Sequence[float]] | Mapping[int | None, Sequence[Sequence[float]]]


def _exceedances(traces: Iterable[RequestTrace], ttft_s: float, tpot_s: float,
                 freezes: Freezes) -> tuple[int, int, int, int]:
    """(n, TTFT over, n with a TPOT, TPOT over) over finished, measured requests, less the
    client's own ``freezes`` (as ``doctor.derive.stream_stats`` counts them): a worker's freezes
    out of its own requests only."""
    n = ttft_over = n_tpot = tpot_over = 0
    for t in traces:
        if t.warmup or t.outcome in NOT_THE_TARGETS or t.t_end is None:  # in flight: not finished yet
            continue
        first = t.tokens[0].t if t.tokens else None
        if first is None:
            if t.outcome in SLOW_OUTCOMES and t.t_sent is not None:
                n, ttft_over = n + 1, ttft_over + 1
            continue
        if not t.ok:
            continue
        n += 1
        own = freezes.get(t.shard, ()) if isinstance(freezes, Mapping) else freezes
        ttft_over += awake_span(own, t.t_scheduled, first) > ttft_s
        tokens = max(t.completion_tokens or len(t.tokens), len(t.tokens))
        if tokens > 1:
            n_tpot += 1
            tpot_over += awake_span(own, first, t.tokens[-1].t) / (tokens - 1) > tpot_s
    return n, ttft_over, n_tpot, tpot_over


def conclusive(traces: list[RequestTrace], paths: Iterable[ProbePath], ttft_s: float, tpot_s: float,
               min_requests: int = MIN_REQUESTS, freezes: Freezes = ()) -> bool:
    """Whether every path is decided: clearly over one budget, or clearly within every budget it
    has (TPOT only once enough answers had more than one token). See the module docstring."""
    for path in paths:
        n, ttft_over, n_tpot, tpot_over = _exceedances((t for t in traces if t.path == path), ttft_s, tpot_s, freezes)
        if n < min_requests:
            return False
        states = [decided(ttft_over, n)] + ([decided(tpot_over, n_tpot)] if n_tpot >= min_requests else [])
        if "over" not in states and any(state is None for state in states):
            return False
    return True


def within_needed(over: int, alpha: float = ALPHA, q: float = 1 - PERCENTILE) -> int:
    """How many answers show a p90 clearly within budget when ``over`` of them exceed it (29 for none)."""
    n = max(over, 0) + 1
    while binomial_cdf(over, n, q) >= alpha:
        n += 1
    return n


def within_so_far(traces: list[RequestTrace], paths: Iterable[ProbePath], ttft_s: float, tpot_s: float,
                  freezes: Freezes = ()) -> tuple[ProbePath, int, int] | None:
    """The first path neither clearly over a budget nor yet clearly within every budget it has,
    with its fast answers so far and the fast answers "clearly within" needs; None when every path
    is decided. What a healthy verdict says when the run ended first ("23 of the 29 needed")."""
    for path in paths:
        n, ttft_over, n_tpot, tpot_over = _exceedances((t for t in traces if t.path == path), ttft_s, tpot_s, freezes)
        counts = [(n, ttft_over)] + ([(n_tpot, tpot_over)] if n_tpot >= MIN_REQUESTS else [])
        states = [decided(over, m) for m, over in counts]
        if "over" in states:
            continue
        for (m, over), state in zip(counts, states, strict=True):
            if state is None:
                return path, m - over, within_needed(over) - over
    return None


def failing_fast(traces: list[RequestTrace], path: ProbePath, n: int = FAIL_FAST) -> str | None:
    """The commonest outcome when the path's finished measured requests are ``n`` or more and none
    succeeded, or a ``DECISIVE`` one as soon as one measured request failed so and no request of
    the path ever succeeded; None while any succeeded or fewer finished."""
    finished = [t for t in traces if t.path == path and t.outcome not in NOT_THE_TARGETS and t.t_end is not None]
    done = [t for t in finished if not t.warmup]
    if any(t.ok for t in done):
        return None
    first = next((t.outcome for t in done if decisive(t)), None)
    if first is not None and not any(t.ok for t in finished):
        return first
    if len(done) < n:
        return None
    outcomes = [t.outcome for t in done]
    return max(set(outcomes), key=outcomes.count)
