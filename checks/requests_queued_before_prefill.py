"""Requests wait in vLLM's queue before their prefill starts.

What it detects:
Requests queued before prefill: the server's queue time (``vllm:request_queue_time_seconds``)
is most of its time to first token, requests were waiting while the probe ran, and the batch
was full (running = ``max_num_seqs``) or the KV cache refused new sequences. A queue with the
batch below ``max_num_seqs`` and the KV cache below ``kv_headroom`` passes: neither limit held
the requests (a per-step token budget or a burst did), so neither fix would help.

Why it matters:
A request that waits in the queue shows nothing to its user; no amount of faster prefill or
decode helps it. The queue exists because the engine admits at most ``max_num_seqs`` sequences
and only as many as the KV cache can hold: which of the two limits binds decides the fix.

Evidence:
metrics_window: mean queue time and mean server TTFT over the window, ``waiting`` and
``running`` gauges (a zero, or a batch below the limit, counts only from scrapes taken during
the probe), KV usage. Startup log / run record (else vLLM V1's default): ``max_num_seqs``, KV
capacity in tokens. Without either, the gauges imply the limit: ``running`` flat at N in every
scrape where requests waited, KV usage below ``kv_headroom``, is a batch capped at N (quoted as
"inferred"). Stream: tokens per request (usage trailers, else the probe's shape).

Remediation:
KV usage stayed low (below ``kv_headroom``): the batch limit binds, raise ``max_num_seqs``;
the suggestion is the peak demand (running + waiting) seen during the probe (else the probe's
concurrency), capped by what the
KV cache can hold: KV capacity tokens x 0.9 / tokens per request (or, without the capacity,
today's ``max_num_seqs`` scaled by 0.9 / peak KV usage). Without scrapes during the probe the
batch is not seen full: the same advice, saying so.
KV usage was high: the GPU is full, add capacity (``replicas``) or lower offered concurrency.
An engine without a queue-time histogram (llama.cpp) is judged on the gauges alone: requests
waiting while running sat at the limit (its slots) fire a warning, with the same remediation in
the engine's own flag (``-np``); how long they waited is then not exposed.

Options:
queue_share: queue time / TTFT share that fires
min_queue_s: ignore queues shorter than this (an idle engine's scheduling tick)
kv_headroom: peak KV usage below which the batch limit, not memory, binds
critical_share: queue / TTFT share at which the finding is critical

Example:
TTFT mean 2.40 s on the server, 1.97 s of it (82 %) queue time; waiting up to 12, running
= max_num_seqs = 8, KV usage <= 31 % -> raise max_num_seqs from 8 to 20 (the peak in flight;
the KV cache would fit 450).
"""

from __future__ import annotations

import math

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import (
    KV_FILL_TARGET,
    Setting,
    engine_flag,
    engine_metric,
    engine_path,
    engine_setting,
    max_num_seqs_in_use,
    metric_read,
    not_in_metrics,
    queue_remediation,
    rerun,
    sequences_that_fit,
    tokens_per_request,
)
from doctor.derive.engine import UNIDENTIFIED, EngineIdentity
from doctor.derive.log_facts import LogFacts
from doctor.derive.metrics_window import GaugeWindow, MetricsWindow
from doctor.derive.stream_stats import StreamStats
from doctor.engines.names import VLLM
from doctor.evidence import RunRecord, StreamEvidence
from doctor.foundation.units import fmt_pct, fmt_seconds
from doctor.model import Cause, EvidenceValue, Remediation, Severity, SymptomClass


@check(code="LD101", name="requests-queued-before-prefill", symptom=SymptomClass.PRE_FIRST_TOKEN, cause=Cause.QUEUE,
       aliases=("queueing",))
def requests_queued_before_prefill(
    metrics_window: MetricsWindow,
    stream_stats: StreamStats | None = None,
    stream: StreamEvidence | None = None,
    log_facts: LogFacts | None = None,
    run: RunRecord | None = None,
    engine: EngineIdentity = UNIDENTIFIED,
    *,
    queue_share: float = 0.5,
    min_queue_s: float = 0.05,
    kv_headroom: float = 0.8,
    critical_share: float = 0.8,
) -> Result:
    mw = metrics_window
    engine_id = engine.id
    # A non-zero gauge shows what was there; a zero only counts from a scrape taken during the probe
    # (the scrapes before and after it see an idle engine).
    waiting_max = mw.waiting.max if mw.waiting and (_during(mw.waiting) or mw.waiting.max) else None
    evidence: list[EvidenceValue] = []
    if mw.queue is None or mw.queue.mean is None:
        if engine_id == VLLM:
            return NotApplicable("no queue-time histogram in /metrics (vllm:request_queue_time_seconds)")
        if not waiting_max:
            return NotApplicable(f"{not_in_metrics(engine_id, 'queue-time histogram')}, and no request was seen waiting")
        # An engine without one (llama.cpp): the gauges alone, requests waiting while every slot
        # was busy, still say the sequence limit held them; how long they waited is not exposed.
        parts = [not_in_metrics(engine_id, "queue-time histogram")]
        share = None
    else:
        queue_s = mw.queue.mean
        evidence.append(EvidenceValue("server queue time mean", queue_s, "s",
                                      f"metrics: {mw.queue.metric} delta, n={mw.queue.count:.0f}"))
        ttft_s, ttft_source = _ttft(mw, stream_stats)
        if ttft_s is None:
            return NotApplicable("neither the server TTFT histogram nor a measured stream gives a TTFT to compare with")
        evidence.append(EvidenceValue("TTFT mean", ttft_s, "s", ttft_source))
        share = min(queue_s / ttft_s, 1.0) if ttft_s > 0 else 0.0
        if share < queue_share or queue_s < min_queue_s:
            return Pass(f"queue time {fmt_seconds(queue_s)} is {fmt_pct(share)} of TTFT {fmt_seconds(ttft_s)}")
        if waiting_max == 0:
            return Pass(f"queue time is {fmt_pct(share)} of TTFT but no request was seen waiting")
        parts = [f"queue time {fmt_seconds(queue_s)} is {fmt_pct(share)} of TTFT {fmt_seconds(ttft_s)}"]
    if waiting_max is not None:
        evidence.append(EvidenceValue("waiting max", waiting_max, "requests", f"metrics: {metric_read(mw, 'waiting')}"))

    running_max = mw.running.max if mw.running else None
    kv_max = mw.kv_usage.max if mw.kv_usage else None
    max_seqs = max_num_seqs_in_use(log_facts, run, mw, kv_headroom=kv_headroom)
    if running_max is not None:
        evidence.append(EvidenceValue("running max", running_max, "requests", f"metrics: {metric_read(mw, 'running')}"))
    if max_seqs is not None:
        evidence.append(max_seqs.evidence("max_num_seqs"))
    if kv_max is not None:
        evidence.append(EvidenceValue("KV usage max", kv_max, "fraction", "metrics: KV cache usage gauge"))
    kv_full = kv_max is not None and kv_max >= kv_headroom
    batch_full: bool | None = None  # unknown unless a scrape saw it full, or scrapes during the probe never did
    # More running than a lower-bound default only shows that the limit in use is higher than it.
    above_bound = (max_seqs is not None and max_seqs.lower_bound and running_max is not None
                   and running_max >= float(max_seqs.value))
    if running_max is not None and max_seqs is not None and not above_bound:
        if running_max >= float(max_seqs.value):
            batch_full = True
        elif _during(mw.running):
            batch_full = False

    if waiting_max is not None:
        parts.append(f"waiting up to {waiting_max:.0f}")
    if batch_full is not None and max_seqs is not None:  # batch_full is only known beside max_seqs
        parts.append(f"running = max_num_seqs = {max_seqs.value}" if batch_full
                     else f"running up to {running_max:.0f} < max_num_seqs {max_seqs.value}")
    elif above_bound and max_seqs is not None:
        parts.append(f"running up to {running_max:.0f}, above vLLM's default lower bound of {max_seqs.value}: "
                     "the max_num_seqs in use is unknown")
    if kv_max is not None:
        parts.append(f"KV usage <= {fmt_pct(kv_max)}")
    if share is None and not batch_full:
        # without a queue time, only a full batch beside the waiting says the limit held them
        return Pass("; ".join(parts) + ": no scrape showed every slot busy while requests waited")
    if batch_full is False and not kv_full:
        # Neither limit this check remedies held the requests back (a per-step token budget or a
        # burst of arrivals did): raising max_num_seqs would change nothing.
        return Pass("; ".join(parts) + ": neither the batch limit nor the KV cache was full")

    if kv_full and kv_max is not None:
        remediation = _capacity(kv_max, running_max, waiting_max, log_facts, run, stream, engine_id)
    else:
        # Peak demand is only known from scrapes during the probe (before / after ones give a lower
        # bound); without them, the probe's own concurrency is the demand it is known to have offered.
        demand: tuple[float, str] | None = None
        if running_max is not None and waiting_max is not None and _during(mw.running) and _during(mw.waiting):
            demand = running_max + waiting_max, "the peak of {} requests in flight"
        elif stream is not None and stream.shape.concurrency > 1:
            demand = float(stream.shape.concurrency), "the probe's concurrency of {} (no scrape saw the peak)"
        unconfirmed = None if batch_full else (
            "max_num_seqs is in neither the startup log nor the run record" if max_seqs is None
            else f"max_num_seqs is in neither the startup log nor the run record, and vLLM's default for this GPU "
                 f"is only known to be at least {max_seqs.value}" if above_bound
            else "no scrape during the probe showed how many requests ran")
        remediation = _raise_max_num_seqs(max_seqs, kv_max, demand, unconfirmed, stream, log_facts, run, evidence,
                                          engine_id)
    return Fire(
        title="Requests wait in the engine's queue before prefill",
        summary="; ".join(parts),
        remediation=remediation,
        severity=Severity.CRITICAL if share is not None and share >= critical_share else Severity.WARNING,
        evidence=evidence,
    )


def _during(gauge: GaugeWindow | None) -> bool:
    """Whether a sample was taken while the probe ran (more than the scrapes before and after it)."""
    return gauge is not None and len(gauge.samples) > 2


def _ttft(mw: MetricsWindow, stats: StreamStats | None) -> tuple[float | None, str]:
    """The server's TTFT mean (same clock as the queue), else the client's on the engine path."""
    if mw.ttft is not None and mw.ttft.mean is not None:
        return mw.ttft.mean, f"metrics: {mw.ttft.metric} delta, n={mw.ttft.count:.0f}"
    path = engine_path(stats) if stats is not None else None
    if path is not None and path.ttft.mean is not None:
        return path.ttft.mean, f"stream: {path.path} TTFT mean, n={path.ttft.n}"
    return None, ""


def _capacity(kv_max: float, running_max: float | None, waiting_max: float | None, log_facts: LogFacts | None,
              run: RunRecord | None, stream: StreamEvidence | None, engine: str) -> Remediation:
    """More replicas, as ``queue_remediation`` says unless the cache holds fewer than two requests (then grow it)."""
    kv_bound = queue_remediation(f"KV usage reached {fmt_pct(kv_max)}.", "queue time to drop to a small share of TTFT",
                                 log_facts, run, stream, engine)
    if kv_bound.setting != "replicas":
        return kv_bound
    below = f" below the {running_max:.0f} requests running at the peak" if running_max else ""
    if running_max and waiting_max:
        below = f" below the {running_max + waiting_max:.0f} in flight at the peak ({running_max:.0f} running + {waiting_max:.0f} waiting)"
    return Remediation(
        setting="replicas",
        suggested=f"add a replica, or lower offered concurrency{below}",
        why=(f"KV usage reached {fmt_pct(kv_max)}: the GPU has no room for more sequences, so a larger "
             "max_num_seqs would only trade queueing for preemption"),
        verify=rerun("queue time to drop to a small share of TTFT and waiting to stay at 0"),
        where="deployment (replica count behind the gateway) or the callers' concurrency",
    )


def _raise_max_num_seqs(
    max_seqs: Setting | None,
    kv_max: float | None,
    demand: tuple[float, str] | None,
    unconfirmed: str | None,
    stream: StreamEvidence | None,
    log_facts: LogFacts | None,
    run: RunRecord | None,
    evidence: list[EvidenceValue],
    engine: str,
) -> Remediation:
    """Raise the batch limit to the peak demand, never past what the KV cache holds.

    The check fires with a known-full batch only when someone waited, so the peak demand
    (running + waiting) is above today's value whenever it is known. ``demand`` is that peak (or
    the probe's concurrency) and its description; ``unconfirmed`` says why the batch was not seen
    full, when it was not. A lower-bound default is never today's value here: any number could
    lower a limit that is in fact higher, so the advice is then the direction only.
    """
    bounded = max_seqs is not None and max_seqs.lower_bound
    current = int(max_seqs.value) if max_seqs is not None and not bounded else None
    fit: int | None = None
    basis = ""
    kv_tokens = engine_setting("kv_cache_tokens", log_facts, run)
    per_request = tokens_per_request(stream)
    if kv_tokens is not None and per_request is not None:
        evidence.append(kv_tokens.evidence("KV cache capacity", "tokens"))
        evidence.append(EvidenceValue("tokens per request", per_request[0], "tokens", per_request[1]))
        fit = sequences_that_fit(float(kv_tokens.value), per_request[0])
        basis = f"{int(kv_tokens.value)} KV tokens x {KV_FILL_TARGET} / {per_request[0]:.0f} tokens per request"
    elif current is not None and kv_max:
        # today's batch held kv_max of the cache: the same requests fill KV_FILL_TARGET of it at this many
        fit = sequences_that_fit(current, kv_max)
        basis = f"max_num_seqs {current} x {KV_FILL_TARGET} / peak KV usage {kv_max:.2f}"
    suggested: int | None = fit
    if bounded:
        suggested = None
    elif fit is not None and current is not None and fit <= current:
        suggested = None  # the arithmetic says the cache is the limit after all: give the direction only
    elif demand is not None and (fit is None or demand[0] < fit):
        # No need to go past the demand: every extra slot deepens the batch (slower tokens).
        suggested = math.ceil(demand[0])
        basis = demand[1].format(suggested) + (f"; the KV cache fits up to {fit}: {basis}" if fit is not None else "")
    if suggested is not None and current is not None and suggested <= current:
        suggested = None  # a demand at or below today's limit cannot be met by raising it
    if suggested is not None:
        text = f"{suggested} ({basis})"
    elif bounded:
        text = ("raise it above the limit in use (start the engine with --max-num-seqs set explicitly) while KV "
                "usage stays below 90 %" + (f"; the KV cache fits up to {fit}: {basis}" if fit is not None else ""))
    else:
        text = "raise it while KV usage stays below 90 %"
    kv_note = f"KV usage stayed <= {fmt_pct(kv_max)}" if kv_max is not None else "the KV cache had room"
    if unconfirmed is None:
        why = f"the batch is full while {kv_note}: the sequence limit, not GPU memory, makes requests wait"
    else:
        why = (f"requests waited while {kv_note}, so the sequence limit is the likely bound; {unconfirmed}, "
               "so running = max_num_seqs is not confirmed")
    return Remediation(
        setting="max_num_seqs",
        suggested=text,
        why=why,
        verify=rerun(f"waiting to stay near 0, queue time to shrink, and {_no_preemptions(engine)}"),
        current=max_seqs.current() if max_seqs is not None else None,
        where=engine_flag(engine, "max_num_seqs"),
    )


def _no_preemptions(engine: str) -> str:
    """"no preemptions (the engine's counter)", or without the counter where it has none."""
    counter = engine_metric("preemptions", engine)
    return f"no preemptions ({counter})" if counter else "no mid-answer stalls"
