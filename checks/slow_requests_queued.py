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

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import engine_flag, max_num_seqs_in_use, rerun
from doctor.derive.engine import UNIDENTIFIED, EngineIdentity
from doctor.derive.log_facts import LogFacts
from doctor.derive.request_hops import RequestHopsView
from doctor.evidence import RunRecord
from doctor.foundation.units import fmt_pct, fmt_seconds
from doctor.model import Cause, EvidenceValue, Remediation, Severity, SymptomClass


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
        raise NotApplicable(f"{len(timed)} request(s) with the engine's queue time: too few to tell slow ones from the rest")
    slow_queue = sum(r.queue or 0.0 for r in slow)
    slow_share = slow_queue / sum(r.ttft or 0.0 for r in slow)
    all_share = sum(r.queue or 0.0 for r in timed) / sum(r.ttft or 0.0 for r in timed)
    mean_queue = slow_queue / len(slow)
    numbers = (f"the {len(slow)} slowest of {len(timed)} requests waited {fmt_seconds(mean_queue)} on average in the "
               f"engine's queue ({fmt_pct(slow_share)} of their TTFT); over all requests the queue was {fmt_pct(all_share)}")
    if slow_share < queue_share or mean_queue < min_queue_s:
        return Pass(numbers)
    if slow_share < hidden_factor * all_share:
        return Pass(f"{numbers}: every request queued alike, nothing the mean hides")
    evidence = [EvidenceValue(f"request {r.index} ({r.path}) queue", r.queue or 0.0, "s",
                              f"request_hops: span {r.request_id or r.trace_id}, TTFT {fmt_seconds(r.ttft or 0.0)}")
                for r in slow[:3]]
    evidence += [EvidenceValue("slow requests' queue share", slow_share, "fraction", f"request_hops: n={len(slow)}"),
                 EvidenceValue("all requests' queue share", all_share, "fraction", f"request_hops: n={len(timed)}")]
    if view.others_queue.p90 is not None:
        evidence.append(EvidenceValue("other users' queue p90", view.others_queue.p90, "s",
                                      f"request_hops: the engine's spans of {view.others} other request(s)"))
    max_seqs = max_num_seqs_in_use(log_facts, run, None)
    if max_seqs is not None:
        evidence.append(max_seqs.evidence("max_num_seqs"))
    slowest = ", ".join(f"#{r.index} {fmt_seconds(r.queue or 0.0)} of {fmt_seconds(r.ttft or 0.0)}" for r in slow[:3])
    return Fire(
        title="The slow requests waited in the engine's queue",
        summary=f"{numbers} (queue of TTFT: {slowest})",
        remediation=Remediation(
            setting="max_num_seqs",
            suggested="higher, so a request arriving while the batch is full does not wait for a slot",
            current=max_seqs.current() if max_seqs is not None else None,
            where=engine_flag(engine.id, "max_num_seqs"),
            why=(f"The engine's own span of each slow request says it waited in the queue: {slowest}. The mean "
                 "of every request hides it, so the server's histograms point elsewhere."),
            verify=rerun("the slow requests' queue time in the per-request join (--otlp-listen) to fall"),
        ),
        severity=Severity.WARNING,
        evidence=evidence,
    )
