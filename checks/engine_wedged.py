"""The engine is wedged: requests are accepted and never get a first token while its counters stand still.

What it detects:
Requests that waited without a first token (stopped by the probe's watchdog, its stall timeout or
its deadline) while every progress counter of the engine in /metrics stood still: generated and
prompt tokens, finished requests, the observation counts of its histograms. The engine core is
deadlocked or stopped (vllm#39863, #52319) while its API server still answers /health,
/v1/models and /metrics with 200.

Why it matters:
A health check that asks the API server (`GET /health`, `GET /v1/models`) stays green, so a load
balancer keeps sending users to a replica that answers none of them (one stayed in rotation for
85 minutes). It is not queueing (the engine's tokens keep flowing to someone), not a slow prefill
(the prefill and TTFT histograms move when it ends) and not a dead engine (refused connections,
HTTP 5xx, which the error-rate check names).

Evidence:
stream: each request's send, first token and end on the probe's clock; the watchdog's record
(`StreamEvidence.wedge`: when it stopped, how long the counters stood still, how many requests it
stopped). metrics: the raw scrapes taken during the probe, on the same clock: the counters compared
(`doctor.engine_metrics.standstill`) and the running / waiting gauges. endpoints: /health's status.
An engine whose /metrics has no token or request counter does not expose it: the check says so.

Remediation:
Restart the engine, and make its health check generate one token (vLLM: a 1-token
`POST /v1/completions`; SGLang: `GET /health_generate`; llama.cpp: `POST /completion` with
`n_predict` 1; TGI: `POST /generate` with `max_new_tokens` 1), with a timeout, so the load balancer
takes a wedged replica out of rotation. Verify: the 1-token request answers within its timeout and
the generation counter moves; the same probe then passes this check.

Options:
min_still_s: seconds the requests must have waited with every engine counter still

Example:
LD105 engine-wedged: 2 request(s) waited 16.0 s without a first token while none of 7 engine
counters moved over 17 scrapes (running 1, /health 200) -> restart the engine; health check = a
1-token completion.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import not_in_metrics, rerun
from doctor.derive.engine import UNIDENTIFIED, EngineIdentity
from doctor.engine_metrics.standstill import Standstill, standstill
from doctor.engines import RECORDS
from doctor.engines.names import display, engine_part
from doctor.evidence import EndpointsEvidence, MetricsEvidence, StreamEvidence
from doctor.evidence.stream import WEDGED, WedgeStop
from doctor.foundation.units import fmt_seconds
from doctor.model import Cause, EvidenceValue, Remediation, Severity, SymptomClass

#: Outcomes of a request still waiting when the probe stopped waiting for it.
WAITED = ("stall", "deadline", WEDGED)

#: The health check that generates one token, per engine (its record's ``generating_check``;
#: vLLM's OpenAI route for the others).
GENERATING_CHECK: dict[str, str] = {r.id: r.generating_check for r in RECORDS if r.generating_check}
OPENAI_CHECK = 'POST /v1/completions {"model": MODEL, "prompt": "ping", "max_tokens": 1}'


@dataclass(frozen=True)
class Found:
    """The requests that waited without a first token (sent from ``first``, given up by ``last``),
    the engine's counters standing still over ``span`` of that wait, the tokens that reached the
    client meanwhile, the health check's status, and the probe watchdog's stop, if it stopped."""

    engine: str
    waited: int
    first: float
    last: float
    still: Standstill
    span: float
    tokens_meanwhile: int
    health: int | None
    stop: WedgeStop | None


@check(code="LD105", name="engine-wedged", symptom=SymptomClass.PRE_FIRST_TOKEN, cause=Cause.WEDGE)
def engine_wedged(
    stream: StreamEvidence,
    metrics: MetricsEvidence | None = None,
    endpoints: EndpointsEvidence | None = None,
    engine: EngineIdentity = UNIDENTIFIED,
    *,
    min_still_s: float = 10.0,
) -> Result:
    waited = [r for r in stream.requests if r.outcome in WAITED and not r.tokens and r.t_sent is not None]
    if not waited:
        return Pass("no request waited without a first token: the engine answered, or refused outright")
    if metrics is None or not metrics.scrapes:
        raise NotApplicable("no /metrics scrape during the probe: the engine's counters cannot say whether it moved")
    first = min(r.t_sent for r in waited if r.t_sent is not None)
    last = max(r.t_failed or r.t_end or first for r in waited)
    still = standstill(metrics.scrapes, until=last)  # up to the end of the wait: what came after is not it
    if still is None:
        raise NotApplicable(not_in_metrics(engine.id, "token or request counter"))
    start = max(first, still.since)
    found = Found(
        engine=engine.id, waited=len(waited), first=first, last=last, still=still, span=still.until - start,
        tokens_meanwhile=sum(1 for r in stream.requests for ev in r.tokens if start <= ev.t <= still.until),
        health=_health(endpoints), stop=stream.wedge,
    )
    if found.span < min_still_s or found.tokens_meanwhile:
        return Pass(_not_a_wedge(found))
    return Fire(
        title="The engine is wedged: requests get no first token while its counters stand still",
        summary=_summary(found),
        remediation=_remediation(found),
        severity=Severity.CRITICAL,
        evidence=_evidence(found),
    )


def _health(endpoints: EndpointsEvidence | None) -> int | None:
    """The engine endpoint's health-check status, when it answered one: the green light that misleads."""
    for ep in endpoints.endpoints if endpoints is not None else ():
        if ep.role == "engine" and ep.health_status is not None:
            return ep.health_status
    return None


def _not_a_wedge(found: Found) -> str:
    still, first = found.still, found.first
    moved = (f"last moved {fmt_seconds(still.since - first)} into a {fmt_seconds(found.last - first)} wait"
             if still.since > first else f"stood still only {fmt_seconds(max(found.span, 0.0))}")
    flowing = f", and {found.tokens_meanwhile} token(s) reached the client meanwhile" if found.tokens_meanwhile else ""
    return (f"{found.waited} request(s) waited without a first token, but the engine's counters {moved}"
            f"{flowing}: queueing or a slow prefill, not a wedge")


def _summary(found: Found) -> str:
    still = found.still
    gauges = ", ".join(f"{name} {value:g}" for name, value in (("running", still.running), ("waiting", still.waiting))
                       if value is not None)
    if gauges and not (still.running or still.waiting):
        # vLLM v1's gauges are the engine core's last report to its API server: a stopped core's is stale
        gauges += ": the engine's last report, older than the requests in flight"
    health = f"/health {found.health}" if found.health is not None else ""
    extra = "; ".join(x for x in (gauges, health) if x)
    summary = (f"{found.waited} request(s) waited {fmt_seconds(found.span)} without a first token while none of "
               f"{still.counters} engine counters moved over {still.scrapes} scrapes" + (f" ({extra})" if extra else ""))
    if (stop := found.stop) is not None:
        summary += (f"; the probe's watchdog stopped after {fmt_seconds(stop.t_detected - stop.t_first_waiting)} "
                    f"and {stop.sent} request(s)")
    return summary


def _evidence(found: Found) -> list[EvidenceValue]:
    still = found.still
    values = [
        EvidenceValue("requests without a first token", found.waited, "", "stream: outcomes " + ", ".join(WAITED)),
        EvidenceValue("counters still", round(found.span, 1), "s",
                      f"metrics: {still.counters} counters equal over {still.scrapes} scrapes"),
    ]
    if (stop := found.stop) is not None:
        values.append(EvidenceValue("seen after", round(stop.t_detected - stop.t_first_waiting, 1), "s",
                                    "stream: watchdog stop - send of the first request without a token"))
    if still.running is not None:
        values.append(EvidenceValue("running", still.running, "requests", "metrics: running gauge at the last scrape"))
    return values


def _remediation(found: Found) -> Remediation:
    engine_id = found.engine
    probe = GENERATING_CHECK.get(engine_id, OPENAI_CHECK)
    return Remediation(
        setting="restart_and_health_check",
        suggested=f"restart {engine_part(engine_id, 'server')} now; make its liveness/readiness check {probe} with a timeout, "
                  "not GET /health or /v1/models",
        why=(f"{display(engine_id)}'s API server accepts requests and answers its health check while the engine behind "
             "it generates nothing: only a check that asks for a token takes the replica out of rotation"),
        verify=rerun(f"after the restart, {probe} to answer within seconds and the generation counter to move, "
                     "and this check to pass"),
        where=f"{engine_part(engine_id, 'server')} (restart) and the orchestrator's / load balancer's health check for it",
    )
