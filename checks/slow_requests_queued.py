"""The slow requests waited in the engine's queue, which the mean hides.

What it detects:
Slow requests that queued: joined with the engine's own span of each probe request
(``request_hops``), the requests at or above the p90 of the client's TTFT spent most of it in
vLLM's queue (``gen_ai.latency.time_in_queue``), while over all requests the queue was a small
part: a few requests waited behind others (a burst, other users' long prefills) and the mean of
the server's histograms spreads their wait over everyone.

Why it matters:
A p90 or p99 objective is broken by exactly these requests, and a mean split (queue 5 %, prefill
80 %) points at prefill, whose speed-up would not help them. Their own spans say where their
time went, request by request.

Evidence:
request_hops: each slow request's queue time and client TTFT, the queue's share of the slow
requests' TTFT against its share over every request, and the engine's spans of other users'
requests in the window (their queue time p90). Startup log / run record: ``max_num_seqs``.

Remediation:
Let the engine admit the burst: raise ``max_num_seqs`` (its current value when known), so a
request that arrives while the batch is full does not wait for a slot; where the KV cache is
what is full, the engine needs more capacity instead (``requests-queued-before-prefill`` says which).

Options:
queue_share: the queue's share of the slow requests' TTFT at or above which it fires
hidden_factor: how many times the queue's share over all requests the slow requests' share must be
min_queue_s: ignore slow requests' queues shorter than this (an idle engine's scheduling tick)

Example:
The 2 slowest of 20 requests (TTFT 1.40 s, 1.31 s) waited 1.12 s and 1.05 s in the engine's
queue (80 % of their TTFT); over all 20 requests the queue was 9 % -> raise max_num_seqs from 8.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import Setting, engine_flag, max_num_seqs_in_use, rerun
from doctor.derive.engine import UNIDENTIFIED, EngineIdentity
from doctor.derive.log_facts import LogFacts
from doctor.derive.request_hops import RequestHops, RequestHopsView
from doctor.evidence import RunRecord
from doctor.foundation.units import fmt_pct, fmt_seconds
from doctor.model import Cause, EvidenceValue, Remediation, Severity, SymptomClass


@dataclass(frozen=True)
class Found:
    """The slowest requests' time in the engine's queue (mean, and share of their TTFT) against every
    timed request's share, other users' queue p90 (over ``others`` requests), and the batch limit."""

    engine: str
    slow: tuple[RequestHops, ...]
    timed: int
    mean_queue: float
    slow_share: float
    all_share: float
    others_p90: float | None
    others: int
    max_seqs: Setting | None


@check(code="LD110", name="slow-requests-queued", symptom=SymptomClass.PRE_FIRST_TOKEN, cause=Cause.QUEUE)
def slow_requests_queued(
    request_hops: RequestHopsView,
    log_facts: LogFacts | None = None,
    run: RunRecord | None = None,
    engine: EngineIdentity = UNIDENTIFIED,
    *,
    queue_share: float = 0.5,
    hidden_factor: float = 2.0,
    min_queue_s: float = 0.05,
) -> Result:
    view = request_hops
    slow = [view.requests[i] for i in view.slow if view.requests[i].queue is not None and view.requests[i].ttft]
    timed = [r for r in view.requests if r.queue is not None and r.ttft]
    if not slow or len(timed) < 3:
        raise NotApplicable(_too_few(len(timed)))
    slow_queue = sum(r.queue or 0.0 for r in slow)
    found = Found(
        engine=engine.id, slow=tuple(slow), timed=len(timed), mean_queue=slow_queue / len(slow),
        slow_share=slow_queue / sum(r.ttft or 0.0 for r in slow),
        all_share=sum(r.queue or 0.0 for r in timed) / sum(r.ttft or 0.0 for r in timed),
        others_p90=view.others_queue.p90, others=view.others, max_seqs=max_num_seqs_in_use(log_facts, run, None),
    )
    if found.slow_share < queue_share or found.mean_queue < min_queue_s:
        return Pass(_numbers(found))
    if found.slow_share < hidden_factor * found.all_share:
        return Pass(_queued_alike(found))
    return Fire(
        title="The slow requests waited in the engine's queue",
        summary=_summary(found),
        remediation=_remediation(found),
        severity=Severity.WARNING,
        evidence=_evidence(found),
    )


def _too_few(timed: int) -> str:
    return f"{timed} request(s) with the engine's queue time: too few to tell slow ones from the rest"


def _numbers(found: Found) -> str:
    return (f"the {len(found.slow)} slowest of {found.timed} requests waited {fmt_seconds(found.mean_queue)} on average "
            f"in the engine's queue ({fmt_pct(found.slow_share)} of their TTFT); over all requests the queue was "
            f"{fmt_pct(found.all_share)}")


def _queued_alike(found: Found) -> str:
    return f"{_numbers(found)}: every request queued alike, nothing the mean hides"


def _slowest(found: Found) -> str:
    return ", ".join(f"#{r.index} {fmt_seconds(r.queue or 0.0)} of {fmt_seconds(r.ttft or 0.0)}" for r in found.slow[:3])


def _summary(found: Found) -> str:
    return f"{_numbers(found)} (queue of TTFT: {_slowest(found)})"


def _evidence(found: Found) -> list[EvidenceValue]:
    evidence = [EvidenceValue(f"request {r.index} ({r.path}) queue", r.queue or 0.0, "s",
                              f"request_hops: span {r.request_id or r.trace_id}, TTFT {fmt_seconds(r.ttft or 0.0)}")
                for r in found.slow[:3]]
    evidence += [EvidenceValue("slow requests' queue share", found.slow_share, "fraction",
                               f"request_hops: n={len(found.slow)}"),
                 EvidenceValue("all requests' queue share", found.all_share, "fraction", f"request_hops: n={found.timed}")]
    if found.others_p90 is not None:
        evidence.append(EvidenceValue("other users' queue p90", found.others_p90, "s",
                                      f"request_hops: the engine's spans of {found.others} other request(s)"))
    if found.max_seqs is not None:
        evidence.append(found.max_seqs.evidence("max_num_seqs"))
    return evidence


def _remediation(found: Found) -> Remediation:
    return Remediation(
        setting="max_num_seqs",
        suggested="higher, so a request arriving while the batch is full does not wait for a slot",
        current=found.max_seqs.current() if found.max_seqs is not None else None,
        where=engine_flag(found.engine, "max_num_seqs"),
        why=(f"The engine's own span of each slow request says it waited in the queue: {_slowest(found)}. The mean "
             "of every request hides it, so the server's histograms point elsewhere."),
        verify=rerun("the slow requests' queue time in the per-request join (--otlp-listen) to fall"),
    )
