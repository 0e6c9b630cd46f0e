"""The gateway's own limit on streams to the engine queues or refuses them.

What it detects:
A gateway with a per-upstream connection or request limit lets fewer streams through to the
engine than were sent: either it refuses the rest itself (HTTP 429 / 502 / 503 in its own words:
an HTML error page where the engine answers JSON, Envoy's `x-envoy-overloaded: true`, LiteLLM's
parallel-request message) while the direct path answers, or it queues them (HAProxy `maxconn` on
a server line, Envoy's pending queue): the gateway's TTFT grows in steps of whole answers with
concurrency while the engine has no request waiting and the direct path is fast at the same
concurrency. Where no header names the gateway (stock HAProxy adds none) and no /metrics shows the
engine's queue, the probe's own timings say it: through the gateway at most k >= 2 streams ran at
once (first token to last token), each later one starting as one ended, while directly more ran
together (one at a time is a serialising edge: gateway-serialisation, LD303).

Why it matters:
A stream holds its slot for its whole answer, so a limit sized for short calls binds at a few
concurrent users. Adding replicas or engine capacity changes nothing: the gateway is the queue,
and its refusals never reach the engine.

Evidence:
Stream probe: each failed gateway request's status, headers and body excerpt (who answered it),
the direct path's answers; at concurrency >= 2, each path's wait (TTFT p90 minus min) in answers
(the direct end-to-end p50), as gateway-serialisation (LD303) measures it. Metrics window: the
engine's waiting gauge (about 0: the queue is not the engine's), its running gauge against the
probe's own streams open on each path at each scrape (the gateway streams the engine ran against
those the probe had open), and the requests the engine took in against those the probe sent
(refused requests never reach it). The stream probe's first and last token of every request: the
most streams each path ran at once (``checklib.stream_cap``). The gateway view: which gateway, for its
setting.

Remediation:
Raise the gateway's own limit to what the engine batches, in its terms: HAProxy `maxconn` on the
backend's `server` line; nginx `max_conns` on the upstream `server` (502) or `limit_conn` /
`limit_req` (503); Envoy's cluster `circuit_breakers` (`max_requests`, `max_pending_requests`);
LiteLLM `max_parallel_requests`; Traefik's `inFlightReq`.

Options:
wait_answers: the gateway's p90 request waited at least this many answers more than its fastest
spread_factor: gateway wait / direct wait
ttft_factor: gateway TTFT p90 / direct p90
max_waiting: the engine's waiting gauge at most this for the queue to be the gateway's
min_refused: gateway requests refused by the gateway itself that fire

Example:
LD309 gateway-connection-cap: at concurrency 4 the gateway's p90 request waited 3.0 answers (TTFT
p90 1.14 s, min 56 ms, n=8) vs 0.0 direct; the engine had no request waiting and ran at most 1
gateway stream while the probe had 4 open -> maxconn: at least 4 on the HAProxy server line.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import (
    QUEUEING_CAPS,
    PathPair,
    StreamCap,
    cap_remediation,
    engine_intake,
    gateway_identity,
    gateway_refusal,
    gateway_wait,
    measured_pair,
    probe_sent,
    rerun,
    stream_cap,
    who_answered,
)
from doctor.derive.gateway import GatewayView
from doctor.derive.metrics_window import MetricsWindow
from doctor.derive.stream_stats import StreamStats
from doctor.evidence import Bundle, ProbePath, RequestTrace
from doctor.foundation.units import fmt_seconds
from doctor.model import Cause, EvidenceValue, Remediation, Severity, SymptomClass


def open_at(requests: list[RequestTrace], t: float) -> int:
    """The probe's streams open at ``t``: sent and not yet over."""
    return sum(1 for r in requests if r.t_sent is not None and r.t_sent <= t < (r.t_end or r.t_failed or float("inf")))


def admitted(mw: MetricsWindow, sent: dict[ProbePath, list[RequestTrace]]) -> tuple[int, int] | None:
    """``(most gateway streams the engine ran, gateway streams the probe had open then)`` over the scrapes
    taken while gateway streams were open: the engine's running gauge less the direct streams open."""
    if mw.running is None:
        return None
    seen = [(max(round(v) - open_at(sent[ProbePath.DIRECT], t), 0), g)
            for t, v in mw.running.samples if (g := open_at(sent[ProbePath.GATEWAY], t))]
    return max(seen) if seen else None


@dataclass(frozen=True)
class Refused:
    """The gateway answered some of the probe's requests itself: how many of those measured, with
    which statuses (most common first) and tell, beside the direct requests answered; and how many
    requests the engine took in of those sent (``never_reached``: no more than the unrefused)."""

    gateway: str
    refused: int
    measured: int
    statuses: tuple[tuple[int | None, int], ...]
    tell: str
    first_body: str
    concurrency: int
    direct_answered: int
    intake: float | None
    sent: int
    never_reached: bool


@dataclass(frozen=True)
class Queued:
    """The gateway's requests waited on a cap: the waits of both paths in answers, the most streams
    that ran at once each way (when seen), the engine's waiting peak, and the gateway streams the
    engine ran against those the probe had open (``ran``)."""

    concurrency: int
    pair: PathPair
    gateway_wait: float
    direct_wait: float
    answer_s: float
    cap: StreamCap | None
    waiting_max: float | None
    ran: tuple[int, int] | None


@check(code="LD309", name="gateway-connection-cap", symptom=SymptomClass.PROXY_ONLY, cause=Cause.GATEWAY_CAP)
def gateway_connection_cap(
    bundle: Bundle, stream_stats: StreamStats, gateway: GatewayView | None = None,
    metrics_window: MetricsWindow | None = None,
    *,
    wait_answers: float = 1.0,
    spread_factor: float = 3.0,
    ttft_factor: float = 2.0,
    max_waiting: float = 0.5,
    min_refused: int = 1,
) -> Result:
    if stream_stats.path(ProbePath.GATEWAY) is None or bundle.stream is None:
        return NotApplicable("needs the gateway path (--gateway)")
    direct = stream_stats.path(ProbePath.DIRECT)
    c = stream_stats.concurrency
    sent = probe_sent(bundle.stream.requests)
    measured = [r for r in sent[ProbePath.GATEWAY] if not r.warmup]
    refused = [(r, tell) for r in measured if (tell := gateway_refusal(r)) is not None]
    family, name = who_answered(gateway)
    if len(refused) >= min_refused and direct is not None and direct.ttft.n:
        intake = engine_intake(metrics_window) if metrics_window is not None else None
        total = sum(len(v) for v in sent.values())
        found = Refused(
            gateway=name, refused=len(refused), measured=len(measured),
            statuses=tuple(Counter(r.status for r, _ in refused).most_common()), tell=refused[0][1],
            first_body=(refused[0][0].body_excerpt or "")[:200], concurrency=c, direct_answered=direct.ttft.n,
            intake=intake.requests if intake is not None else None, sent=total,
            never_reached=intake is not None and intake.requests <= total - len(refused) + 0.5,
        )
        return Fire(
            title="The gateway's own limit refuses streams",
            summary=_refused_summary(found),
            remediation=_refused_remediation(found, gateway),
            severity=Severity.CRITICAL if len(refused) >= 0.5 * len(measured) else Severity.WARNING,
            evidence=gateway_identity(gateway) + _refused_evidence(found),
        )
    if c < 2:
        return NotApplicable("no request refused by the gateway, and a queue at the gateway shows only under "
                             "concurrent requests (probe concurrency was 1)")
    pair = measured_pair(stream_stats)  # raises NotApplicable unless both paths were measured
    waits = gateway_wait(pair)
    if waits is None:
        return NotApplicable("fewer than two successful gateway requests, or no direct answer time")
    if not waits.queued(wait_answers, spread_factor, ttft_factor):
        return Pass(_no_cap(waits.gateway, waits.direct, c))
    cap = stream_cap(bundle.stream.requests, c) if family is None or family in QUEUEING_CAPS else None
    if family not in QUEUEING_CAPS and cap is None:
        return Pass(_not_a_cap(waits.gateway, name))
    waiting = metrics_window.waiting if metrics_window is not None else None
    if waiting is not None and waiting.max is not None and waiting.max > max_waiting:
        return Pass(_engine_queue(waiting.max))
    queued = Queued(c, pair, waits.gateway, waits.direct, waits.answer_s, cap, waiting.max if waiting is not None else None,
                    admitted(metrics_window, sent) if metrics_window is not None else None)
    return Fire(
        title="The gateway queues streams on its own connection cap",
        summary=_queued_summary(queued),
        remediation=_queued_remediation(queued, gateway),
        severity=Severity.CRITICAL,
        evidence=gateway_identity(gateway) + _queued_evidence(queued),
    )


def _refused_summary(found: Refused) -> str:
    statuses = ", ".join(f"HTTP {s} x{n}" for s, n in found.statuses)
    summary = (f"{found.gateway} refused {found.refused} of {found.measured} gateway requests itself "
               f"({statuses}: {found.tell}) at concurrency {found.concurrency}, while {found.direct_answered} direct "
               "requests were answered")
    if found.never_reached:
        summary += (f"; the engine took in {found.intake:.0f} requests of the {found.sent} sent: the refused "
                    "never reached it")
    return summary


def _refused_evidence(found: Refused) -> list[EvidenceValue]:
    evidence = [
        EvidenceValue("refused by the gateway", found.refused, "requests", f"stream: gateway, n={found.measured} measured"),
        EvidenceValue("how the gateway answered", found.tell, "", "stream: gateway response headers and body"),
        EvidenceValue("first refusal", found.first_body, "", "stream: gateway body excerpt"),
        EvidenceValue("direct requests answered", found.direct_answered, "requests", "stream: direct"),
        EvidenceValue("probe concurrency", found.concurrency, "", "stream: probe shape"),
    ]
    if found.intake is not None:
        evidence.append(EvidenceValue("requests the engine took in", found.intake, "requests",
                                      f"metrics: finished + rise of running and waiting; the probe sent {found.sent}"))
    return evidence


def _refused_remediation(found: Refused, gateway: GatewayView | None) -> Remediation:
    status = found.statuses[0][0]
    return cap_remediation(gateway, status, found.concurrency, rerun(
        f"no HTTP {status} from the gateway at concurrency {found.concurrency}"))


def _no_cap(gateway_wait: float, direct_wait: float, concurrency: int) -> str:
    return (f"no refusal by the gateway, and its p90 request waited {gateway_wait:.1f} answers vs "
            f"{direct_wait:.1f} direct: no cap binds at concurrency {concurrency}")


def _not_a_cap(gateway_wait: float, gateway: str) -> str:
    return (f"the gateway's requests queue ({gateway_wait:.1f} answers), but {gateway} is not known to queue on "
            "a connection cap of its own, and no more than one stream ran through it at once: see "
            "gateway-serialisation (LD303)")


def _engine_queue(waiting_max: float) -> str:
    return (f"the engine itself had up to {waiting_max:.0f} requests waiting: the queue is the engine's "
            "(see requests-queued-before-prefill, LD101, and queue-pressure, LD504)")


def _queued_summary(found: Queued) -> str:
    g = found.pair.gateway
    summary = (f"at concurrency {found.concurrency} the gateway's p90 request waited {found.gateway_wait:.1f} answers "
               f"(TTFT p90 {fmt_seconds(g.ttft.p90 or 0.0)}, min {fmt_seconds(g.ttft.min or 0.0)}, n={g.ttft.n}) vs "
               f"{found.direct_wait:.1f} direct (answer {fmt_seconds(found.answer_s)})")
    if found.cap is not None:
        summary += (f"; through the gateway at most {found.cap.gateway} streams ran at once (first token to last "
                    f"token), each later one starting as one ended, while {found.cap.direct} ran together direct")
    if found.waiting_max is not None:
        summary += "; the engine had " + (f"at most {found.waiting_max:.0f} request(s)" if found.waiting_max
                                          else "no request") + " waiting"
    if found.ran is not None:
        summary += f" and ran at most {found.ran[0]} gateway stream(s) while the probe had {found.ran[1]} open"
    return summary


def _queued_evidence(found: Queued) -> list[EvidenceValue]:
    g, d = found.pair.gateway, found.pair.direct
    evidence = [
        EvidenceValue("gateway wait (TTFT p90 - min) in answers", round(found.gateway_wait, 3), "answers",
                      f"stream: gateway, n={g.ttft.n}"),
        EvidenceValue("direct wait (TTFT p90 - min) in answers", round(found.direct_wait, 3), "answers",
                      f"stream: direct, n={d.ttft.n}"),
        EvidenceValue("gateway TTFT p90", g.ttft.p90, "s", f"stream: gateway, n={g.ttft.n}"),
        EvidenceValue("direct TTFT p90", d.ttft.p90, "s", f"stream: direct, n={d.ttft.n}"),
        EvidenceValue("probe concurrency", found.concurrency, "", "stream: probe shape"),
    ]
    if found.cap is not None:
        evidence += [
            EvidenceValue("gateway streams at once (most)", found.cap.gateway, "streams",
                          "stream: gateway, first token to last token overlapping"),
            EvidenceValue("direct streams at once (most)", found.cap.direct, "streams",
                          "stream: direct, first token to last token overlapping"),
        ]
    if found.waiting_max is not None:
        evidence.append(EvidenceValue("engine waiting max", found.waiting_max, "requests", "metrics: waiting gauge"))
    if found.ran is not None:
        evidence.append(EvidenceValue("gateway streams the engine ran", found.ran[0], "streams",
                                      f"metrics: running gauge less the direct streams open; the probe had "
                                      f"{found.ran[1]} gateway streams open then"))
    return evidence


def _queued_remediation(found: Queued, gateway: GatewayView | None) -> Remediation:
    return cap_remediation(gateway, None, found.concurrency, rerun(
        f"the gateway's wait close to the direct one ({found.direct_wait:.1f} answers) at concurrency "
        f"{found.concurrency}"), found.cap.gateway if found.cap is not None else None)
