"""The slow requests were held before the engine saw them, which the mean hides.

What it detects:
Slow requests that the gateway (or the network to the engine) held: joined with the engine's own
span of each probe request (``request_hops``), the gateway-path requests at or above the p90 of
the client's TTFT spent most of it before the engine's arrival (the send to the engine's span
start, split at the gateway's own span where it traces), while the other gateway requests spent
a small part there: a few requests waited in the gateway (a connection cap's queue, a busy
upstream connection) and a mean over every request spreads their wait over everyone. A clock
offset moves every request's arrival alike, so the slow requests' excess over the rest must only
pass ``TOLERANCE_S``; their share counts their time less the whole alignment error (that
tolerance plus the width of the offsets the requests allow). An alignment no one offset fits is
not applicable.

Why it matters:
A p90 or p99 objective is broken by exactly these requests, and the engine's histograms never see
their wait: the engine was not slow, it had not been given the request yet. Scaling or tuning the
engine does not help; the gateway's hold is the queue.

Evidence:
request_hops: each slow gateway request's time before the engine and client TTFT, that time's
share of the slow requests' TTFT against its share over the other gateway requests, the gateway's
span (to the gateway, in the gateway) where one came, and the clock alignment's bounds. The
gateway view: which gateway, for its setting. Stream stats: the probe's concurrency.

Remediation:
The gateway's own limit on streams to the engine, in its terms (``cap_remediation``: HAProxy
`maxconn` on the server line, Envoy's `circuit_breakers`; a gateway whose cap refuses rather
than queues, or one no header names, gets the generic sentence of the same table). Where the
gateway sent no span, how to turn its tracing on, so the next run says whether the time was in
the gateway or on the network before it.

Options:
held_share: the time before the engine's share of the slow requests' TTFT at or above which it fires
hidden_factor: how many times that share over the other gateway requests the slow requests' share must be
min_held_s: ignore slow requests held less than this on average

Example:
The 2 slowest of 20 gateway requests (TTFT 1.40 s, 1.31 s) were held 1.11 s on average before the
engine saw them (82 % of their TTFT), all of it in HAProxy's own span; over the other 18 it was
under 1 % -> maxconn: at least 4 on the HAProxy server line.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import cap_remediation, gateway_identity, rerun
from doctor.derive.gateway import GatewayView
from doctor.derive.request_hops import (
    IN_GATEWAY,
    TOLERANCE_S,
    TURN_ON_GATEWAY,
    ClockAlignment,
    RequestHops,
    RequestHopsView,
    hops_seconds,
)
from doctor.derive.stream_stats import StreamStats
from doctor.evidence import ProbePath
from doctor.foundation.units import fmt_pct, fmt_seconds
from doctor.model import Cause, EvidenceValue, Remediation, Severity, SymptomClass


@dataclass(frozen=True)
class Held:
    """The slowest gateway requests against the rest: how long they were held before the engine saw
    them on average, both groups' share of TTFT held so, the clock alignment's error, the slow
    requests with a gateway span and their time inside it, and the hop that took the most."""

    timed: int
    slow: tuple[RequestHops, ...]
    rest: int
    mean_held: float
    slow_share: float
    rest_share: float
    error: float
    alignment: ClockAlignment
    slow_hop: str | None
    spanned: tuple[RequestHops, ...]
    inside: float
    concurrency: int


@check(code="LD315", name="slow-requests-held-before-the-engine", symptom=SymptomClass.PROXY_ONLY,
       cause=Cause.GATEWAY_CAP)
def slow_requests_held_before_the_engine(
    request_hops: RequestHopsView,
    stream_stats: StreamStats,
    gateway: GatewayView | None = None,
    *,
    held_share: float = 0.5,
    hidden_factor: float = 2.0,
    min_held_s: float = 0.05,
) -> Result:
    view = request_hops
    align = view.alignment
    if not align.consistent:
        raise NotApplicable(_inconsistent(align))
    timed = [r for r in view.requests if r.path == ProbePath.GATEWAY and r.ttft]
    if not timed:
        raise NotApplicable("needs the gateway path (--gateway) joined with the engine's spans: directly, the "
                            "time before the engine is the network's alone")
    slow_all = [view.requests[i] for i in view.slow if view.requests[i].ttft]
    slow = [r for r in slow_all if r.path == ProbePath.GATEWAY]
    rest = [r for r in timed if r not in slow]
    if len(timed) < 3:
        raise NotApplicable(_too_few(len(timed)))
    if not rest:
        raise NotApplicable(_all_slow(len(timed)))
    if not slow:
        return Pass(_went_direct(len(slow_all)))
    width = align.high - align.low if align.low is not None and align.high is not None else 0.0
    error = TOLERANCE_S + width
    slow_held = sum(hops_seconds(r) for r in slow)
    slow_ttft = sum(r.ttft or 0.0 for r in slow)
    rest_held = sum(hops_seconds(r) for r in rest)
    spanned = [r for r in slow if r.gateway_span]
    held = Held(
        timed=len(timed), slow=tuple(slow), rest=len(rest), mean_held=slow_held / len(slow),
        slow_share=slow_held / slow_ttft, rest_share=rest_held / sum(r.ttft or 0.0 for r in rest), error=error,
        alignment=align, slow_hop=view.slow_hop, spanned=tuple(spanned),
        inside=sum(hops_seconds(r, (IN_GATEWAY,)) for r in spanned), concurrency=stream_stats.concurrency,
    )
    if held.mean_held < min_held_s:
        return Pass(_went_elsewhere(held))
    # a clock offset moves every request's arrival alike: the slow requests' excess over the rest is free of it
    if (held.mean_held - rest_held / len(rest) <= max(TOLERANCE_S, min_held_s)
            or held.slow_share < hidden_factor * held.rest_share):
        return Pass(_paid_alike(held))
    if (slow_held - error * len(slow)) / slow_ttft < held_share:
        return Pass(_within_error(held, held_share))
    return Fire(
        title="The slow requests were held before the engine saw them",
        summary=_summary(held),
        remediation=_remediation(held, gateway),
        severity=Severity.WARNING,
        evidence=_evidence(held, gateway),
    )


def _inconsistent(align: ClockAlignment) -> str:
    return (f"no one clock offset fits every request's spans (bounds {align.low:+.3f} s to "
            f"{align.high:+.3f} s: spans of another run, or a clock stepped during it): the time "
            "before the engine cannot be told from the clocks' difference")


def _too_few(timed: int) -> str:
    return f"{timed} gateway request(s) with the engine's span: too few to tell slow ones from the rest"


def _all_slow(timed: int) -> str:
    return f"all {timed} gateway requests are at the p90 of TTFT: no slow ones to tell from the rest"


def _went_direct(slow: int) -> str:
    return f"the {slow} slowest request(s) went direct, not through the gateway"


def _numbers(held: Held) -> str:
    return (f"the {len(held.slow)} slowest of {held.timed} gateway requests were held {fmt_seconds(held.mean_held)} "
            f"on average before the engine saw them ({fmt_pct(held.slow_share)} of their TTFT); over the other "
            f"{held.rest} it was {fmt_pct(held.rest_share)}")


def _went_elsewhere(held: Held) -> str:
    return (f"{_numbers(held)}: the slow requests' time went elsewhere ({held.slow_hop or 'no hop'} the largest; "
            "slow-requests-queued, LD110, reads the engine's queue)")


def _paid_alike(held: Held) -> str:
    return (f"{_numbers(held)}: every gateway request paid it alike (the network, or the gateway's own overhead "
            "that gateway-overhead, LD304, measures), not a few held")


def _within_error(held: Held, held_share: float) -> str:
    return (f"{_numbers(held)}: less than {fmt_pct(held_share)} of their TTFT once the clock alignment's error "
            f"({fmt_seconds(held.error)}) is taken off; {held.slow_hop or 'no hop'} took the most of it")


def _where(held: Held) -> str:
    if held.spanned:
        return (f"{fmt_seconds(held.inside / len(held.spanned))} of it on average in the gateway's own span "
                f"({held.spanned[0].gateway_span})")
    return ("between the client's send and the engine's arrival: in the gateway or the network "
            "before the engine (the gateway sent no span)")


def _slowest(held: Held) -> str:
    return ", ".join(f"#{r.index} {fmt_seconds(hops_seconds(r))} of {fmt_seconds(r.ttft or 0.0)}" for r in held.slow[:3])


def _summary(held: Held) -> str:
    return f"{_numbers(held)}; {_where(held)} (before the engine of TTFT: {_slowest(held)})"


def _evidence(held: Held, gateway: GatewayView | None) -> list[EvidenceValue]:
    align = held.alignment
    evidence = [EvidenceValue(f"request {r.index} (gateway) before the engine", round(hops_seconds(r), 6), "s",
                              f"request_hops: span {r.request_id or r.trace_id}, TTFT {fmt_seconds(r.ttft or 0.0)}")
                for r in held.slow[:3]]
    evidence += [
        EvidenceValue("slow requests' share before the engine", held.slow_share, "fraction",
                      f"request_hops: n={len(held.slow)}"),
        EvidenceValue("other gateway requests' share before the engine", held.rest_share, "fraction",
                      f"request_hops: n={held.rest}"),
        EvidenceValue("clock alignment error", round(held.error, 6), "s",
                      f"request_hops: tolerance {fmt_seconds(TOLERANCE_S)} + the offsets' width, offset "
                      f"{align.offset_s:+.3f} s over {align.requests} request(s)"),
        EvidenceValue("probe concurrency", held.concurrency, "", "stream: probe shape"),
        *gateway_identity(gateway),
    ]
    if held.spanned:
        evidence.append(EvidenceValue("slow requests' time in the gateway's span (sum)", round(held.inside, 6), "s",
                                      f"request_hops: the span of {held.spanned[0].gateway_span}, "
                                      f"n={len(held.spanned)}"))
    return evidence


def _remediation(held: Held, gateway: GatewayView | None) -> Remediation:
    rem = cap_remediation(gateway, None, held.concurrency, rerun(
        "the slow requests' time before the engine in the per-request join (--otlp-listen) to fall to the other "
        "requests'"), held=True)
    rem.why = (f"The engine's own span of each slow request starts late: {_slowest(held)} passed before the engine "
               f"saw them, {_where(held)}. The engine's histograms never see this wait. " + rem.why
               + ("" if held.spanned else f" To tell the gateway from the network next time: {TURN_ON_GATEWAY}."))
    return rem
