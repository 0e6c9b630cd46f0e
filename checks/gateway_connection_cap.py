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

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import (
    QUEUEING_CAPS,
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
from doctor.model import Cause, EvidenceValue, Severity, SymptomClass


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
    evidence = gateway_identity(gateway)
    if len(refused) >= min_refused and direct is not None and direct.ttft.n:
        statuses = Counter(r.status for r, _ in refused)
        status = statuses.most_common(1)[0][0]
        summary = (f"{name} refused {len(refused)} of {len(measured)} gateway requests itself "
                   f"({', '.join(f'HTTP {s} x{n}' for s, n in statuses.most_common())}: {refused[0][1]}) at concurrency "
                   f"{c}, while {direct.ttft.n} direct requests were answered")
        evidence += [
            EvidenceValue("refused by the gateway", len(refused), "requests", f"stream: gateway, n={len(measured)} measured"),
            EvidenceValue("how the gateway answered", refused[0][1], "", "stream: gateway response headers and body"),
            EvidenceValue("first refusal", (refused[0][0].body_excerpt or "")[:200], "", "stream: gateway body excerpt"),
            EvidenceValue("direct requests answered", direct.ttft.n, "requests", "stream: direct"),
            EvidenceValue("probe concurrency", c, "", "stream: probe shape"),
        ]
        intake = engine_intake(metrics_window) if metrics_window is not None else None
        if intake is not None:
            total = sum(len(v) for v in sent.values())
            summary += (f"; the engine took in {intake.requests:.0f} requests of the {total} sent: the refused "
                        "never reached it" if intake.requests <= total - len(refused) + 0.5 else "")
            evidence.append(EvidenceValue("requests the engine took in", intake.requests, "requests",
                                          f"metrics: finished + rise of running and waiting; the probe sent {total}"))
        return Fire(
            title="The gateway's own limit refuses streams",
            summary=summary,
            remediation=cap_remediation(gateway, status, c, rerun(
                f"no HTTP {status} from the gateway at concurrency {c}")),
            severity=Severity.CRITICAL if len(refused) >= 0.5 * len(measured) else Severity.WARNING,
            evidence=evidence,
        )
    if c < 2:
        return NotApplicable("no request refused by the gateway, and a queue at the gateway shows only under "
                             "concurrent requests (probe concurrency was 1)")
    pair = measured_pair(stream_stats)  # raises NotApplicable unless both paths were measured
    waits = gateway_wait(pair)
    if waits is None:
        return NotApplicable("fewer than two successful gateway requests, or no direct answer time")
    if not waits.queued(wait_answers, spread_factor, ttft_factor):
        return Pass(f"no refusal by the gateway, and its p90 request waited {waits.gateway:.1f} answers vs "
                    f"{waits.direct:.1f} direct: no cap binds at concurrency {c}")
    cap = stream_cap(bundle.stream.requests, c) if family is None or family in QUEUEING_CAPS else None
    if family not in QUEUEING_CAPS and cap is None:
        return Pass(f"the gateway's requests queue ({waits.gateway:.1f} answers), but {name} is not known to queue on "
                    "a connection cap of its own, and no more than one stream ran through it at once: see "
                    "gateway-serialisation (LD303)")
    waiting = metrics_window.waiting if metrics_window is not None else None
    if waiting is not None and waiting.max is not None and waiting.max > max_waiting:
        return Pass(f"the engine itself had up to {waiting.max:.0f} requests waiting: the queue is the engine's "
                    "(see requests-queued-before-prefill, LD101, and queue-pressure, LD504)")
    g = pair.gateway
    summary = (f"at concurrency {c} the gateway's p90 request waited {waits.gateway:.1f} answers (TTFT p90 "
               f"{fmt_seconds(g.ttft.p90 or 0.0)}, min {fmt_seconds(g.ttft.min or 0.0)}, n={g.ttft.n}) vs "
               f"{waits.direct:.1f} direct (answer {fmt_seconds(waits.answer_s)})")
    evidence += [
        EvidenceValue("gateway wait (TTFT p90 - min) in answers", round(waits.gateway, 3), "answers",
                      f"stream: gateway, n={g.ttft.n}"),
        EvidenceValue("direct wait (TTFT p90 - min) in answers", round(waits.direct, 3), "answers",
                      f"stream: direct, n={pair.direct.ttft.n}"),
        EvidenceValue("gateway TTFT p90", g.ttft.p90, "s", f"stream: gateway, n={g.ttft.n}"),
        EvidenceValue("direct TTFT p90", pair.direct.ttft.p90, "s", f"stream: direct, n={pair.direct.ttft.n}"),
        EvidenceValue("probe concurrency", c, "", "stream: probe shape"),
    ]
    if cap is not None:
        summary += (f"; through the gateway at most {cap.gateway} streams ran at once (first token to last token), "
                    f"each later one starting as one ended, while {cap.direct} ran together direct")
        evidence += [
            EvidenceValue("gateway streams at once (most)", cap.gateway, "streams",
                          "stream: gateway, first token to last token overlapping"),
            EvidenceValue("direct streams at once (most)", cap.direct, "streams",
                          "stream: direct, first token to last token overlapping"),
        ]
    if waiting is not None and waiting.max is not None:
        summary += "; the engine had " + (f"at most {waiting.max:.0f} request(s)" if waiting.max else "no request") + " waiting"
        evidence.append(EvidenceValue("engine waiting max", waiting.max, "requests", "metrics: waiting gauge"))
    ran = admitted(metrics_window, sent) if metrics_window is not None else None
    if ran is not None:
        summary += f" and ran at most {ran[0]} gateway stream(s) while the probe had {ran[1]} open"
        evidence.append(EvidenceValue("gateway streams the engine ran", ran[0], "streams",
                                      f"metrics: running gauge less the direct streams open; the probe had {ran[1]} "
                                      "gateway streams open then"))
    return Fire(
        title="The gateway queues streams on its own connection cap",
        summary=summary,
        remediation=cap_remediation(gateway, None, c, rerun(
            f"the gateway's wait close to the direct one ({waits.direct:.1f} answers) at concurrency {c}"),
            cap.gateway if cap is not None else None),
        severity=Severity.CRITICAL,
        evidence=evidence,
    )
