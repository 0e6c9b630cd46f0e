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
from dataclasses import dataclass

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


@dataclass(frozen=True)
class Mean:
    """A mean and where it was read: a histogram's ``metric`` delta over ``n`` observations, or (not
    ``metric``) the client's measure on stream path ``name``."""

    value: float
    name: str | None
    n: float
    metric: bool = True


@dataclass(frozen=True)
class Found:
    """What the window showed: queue time against TTFT (none without a queue-time histogram), the
    gauges' peaks and the batch limit, and whether the batch was seen full (``None``: unknown)."""

    engine: str
    queue: Mean | None
    ttft: Mean | None
    share: float | None
    waiting_max: float | None
    waiting_metric: str
    running_max: float | None
    running_metric: str
    max_seqs: Setting | None
    kv_max: float | None
    batch_full: bool | None
    above_bound: bool


@dataclass(frozen=True)
class Raising:
    """A higher ``max_num_seqs``: today's value (``None`` when unknown or a lower bound), what the KV
    cache fits (from its capacity and the tokens per request, else today's value over the KV peak),
    and the number suggested, if any (``by_demand``: the peak demand, ``seen`` in scrapes or else the
    probe's concurrency, rather than the fit)."""

    current: int | None
    fit: int | None
    kv_tokens: Setting | None
    per_request: tuple[float, str] | None
    seen: bool
    suggested: int | None
    by_demand: bool


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
    queue = ttft = share = None
    if mw.queue is None or mw.queue.mean is None:
        if engine_id == VLLM:
            return NotApplicable("no queue-time histogram in /metrics (vllm:request_queue_time_seconds)")
        if not waiting_max:
            return NotApplicable(_nothing_waited(engine_id))
        # An engine without one (llama.cpp): the gauges alone, requests waiting while every slot
        # was busy, still say the sequence limit held them; how long they waited is not exposed.
    else:
        queue = Mean(mw.queue.mean, mw.queue.metric, mw.queue.count)
        ttft = _ttft(mw, stream_stats)
        if ttft is None:
            return NotApplicable("neither the server TTFT histogram nor a measured stream gives a TTFT to compare with")
        share = min(queue.value / ttft.value, 1.0) if ttft.value > 0 else 0.0
        if share < queue_share or queue.value < min_queue_s:
            return Pass(_queue_share(queue, ttft, share))
        if waiting_max == 0:
            return Pass(_nobody_waited(share))

    running_max = mw.running.max if mw.running else None
    kv_max = mw.kv_usage.max if mw.kv_usage else None
    max_seqs = max_num_seqs_in_use(log_facts, run, mw, kv_headroom=kv_headroom)
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
    found = Found(engine_id, queue, ttft, share, waiting_max, metric_read(mw, "waiting"), running_max,
                  metric_read(mw, "running"), max_seqs, kv_max, batch_full, above_bound)

    if share is None and not batch_full:
        # without a queue time, only a full batch beside the waiting says the limit held them
        return Pass(_no_full_batch(found))
    if batch_full is False and not kv_full:
        # Neither limit this check remedies held the requests back (a per-step token budget or a
        # burst of arrivals did): raising max_num_seqs would change nothing.
        return Pass(_neither_limit(found))

    raising = None
    if not (kv_full and kv_max is not None):
        # Peak demand is only known from scrapes during the probe (before / after ones give a lower
        # bound); without them, the probe's own concurrency is the demand it is known to have offered.
        demand, seen = None, False
        if running_max is not None and waiting_max is not None and _during(mw.running) and _during(mw.waiting):
            demand, seen = running_max + waiting_max, True
        elif stream is not None and stream.shape.concurrency > 1:
            demand = float(stream.shape.concurrency)
        raising = _raising(max_seqs, kv_max, demand, seen, stream, log_facts, run)
    return Fire(
        title="Requests wait in the engine's queue before prefill",
        summary=_summary(found),
        remediation=(_capacity(found, log_facts, run, stream) if raising is None
                     else _raise_max_num_seqs(found, raising)),
        severity=Severity.CRITICAL if share is not None and share >= critical_share else Severity.WARNING,
        evidence=_evidence(found, raising),
    )


def _during(gauge: GaugeWindow | None) -> bool:
    """Whether a sample was taken while the probe ran (more than the scrapes before and after it)."""
    return gauge is not None and len(gauge.samples) > 2


def _ttft(mw: MetricsWindow, stats: StreamStats | None) -> Mean | None:
    """The server's TTFT mean (same clock as the queue), else the client's on the engine path."""
    if mw.ttft is not None and mw.ttft.mean is not None:
        return Mean(mw.ttft.mean, mw.ttft.metric, mw.ttft.count)
    path = engine_path(stats) if stats is not None else None
    if path is not None and path.ttft.mean is not None:
        return Mean(path.ttft.mean, path.path, path.ttft.n, metric=False)
    return None


def _raising(max_seqs: Setting | None, kv_max: float | None, demand: float | None, seen: bool,
             stream: StreamEvidence | None, log_facts: LogFacts | None, run: RunRecord | None) -> Raising:
    """Raise the batch limit to the peak demand, never past what the KV cache holds.

    The check fires with a known-full batch only when someone waited, so the peak demand
    (running + waiting) is above today's value whenever it is known. ``demand`` is that peak (or
    the probe's concurrency). A lower-bound default is never today's value here: any number could
    lower a limit that is in fact higher, so the advice is then the direction only.
    """
    bounded = max_seqs is not None and max_seqs.lower_bound
    current = int(max_seqs.value) if max_seqs is not None and not bounded else None
    fit: int | None = None
    kv_tokens = engine_setting("kv_cache_tokens", log_facts, run)
    per_request = tokens_per_request(stream)
    if kv_tokens is None or per_request is None:
        kv_tokens = per_request = None
    if kv_tokens is not None and per_request is not None:
        fit = sequences_that_fit(float(kv_tokens.value), per_request[0])
    elif current is not None and kv_max:
        # today's batch held kv_max of the cache: the same requests fill KV_FILL_TARGET of it at this many
        fit = sequences_that_fit(current, kv_max)
    suggested: int | None = fit
    by_demand = False
    if bounded:
        suggested = None
    elif fit is not None and current is not None and fit <= current:
        suggested = None  # the arithmetic says the cache is the limit after all: give the direction only
    elif demand is not None and (fit is None or demand < fit):
        # No need to go past the demand: every extra slot deepens the batch (slower tokens).
        suggested, by_demand = math.ceil(demand), True
    if suggested is not None and current is not None and suggested <= current:
        suggested = None  # a demand at or below today's limit cannot be met by raising it
    return Raising(current, fit, kv_tokens, per_request, seen, suggested, by_demand)


def _nothing_waited(engine: str) -> str:
    return f"{not_in_metrics(engine, 'queue-time histogram')}, and no request was seen waiting"


def _queue_share(queue: Mean, ttft: Mean, share: float) -> str:
    return f"queue time {fmt_seconds(queue.value)} is {fmt_pct(share)} of TTFT {fmt_seconds(ttft.value)}"


def _nobody_waited(share: float) -> str:
    return f"queue time is {fmt_pct(share)} of TTFT but no request was seen waiting"


def _no_full_batch(found: Found) -> str:
    return _summary(found) + ": no scrape showed every slot busy while requests waited"


def _neither_limit(found: Found) -> str:
    return _summary(found) + ": neither the batch limit nor the KV cache was full"


def _summary(found: Found) -> str:
    if found.queue is None or found.ttft is None or found.share is None:
        parts = [not_in_metrics(found.engine, "queue-time histogram")]
    else:
        parts = [_queue_share(found.queue, found.ttft, found.share)]
    if found.waiting_max is not None:
        parts.append(f"waiting up to {found.waiting_max:.0f}")
    max_seqs = found.max_seqs
    if found.batch_full is not None and max_seqs is not None:  # batch_full is only known beside max_seqs
        parts.append(f"running = max_num_seqs = {max_seqs.value}" if found.batch_full
                     else f"running up to {found.running_max:.0f} < max_num_seqs {max_seqs.value}")
    elif found.above_bound and max_seqs is not None:
        parts.append(f"running up to {found.running_max:.0f}, above vLLM's default lower bound of {max_seqs.value}: "
                     "the max_num_seqs in use is unknown")
    if found.kv_max is not None:
        parts.append(f"KV usage <= {fmt_pct(found.kv_max)}")
    return "; ".join(parts)


def _mean_source(mean: Mean, what: str) -> str:
    if mean.metric:
        return f"metrics: {mean.name} delta, n={mean.n:.0f}"
    return f"stream: {mean.name} {what} mean, n={mean.n}"


def _evidence(found: Found, raising: Raising | None) -> list[EvidenceValue]:
    evidence: list[EvidenceValue] = []
    if found.queue is not None:
        evidence.append(EvidenceValue("server queue time mean", found.queue.value, "s", _mean_source(found.queue, "")))
    if found.ttft is not None:
        evidence.append(EvidenceValue("TTFT mean", found.ttft.value, "s", _mean_source(found.ttft, "TTFT")))
    if found.waiting_max is not None:
        evidence.append(EvidenceValue("waiting max", found.waiting_max, "requests", f"metrics: {found.waiting_metric}"))
    if found.running_max is not None:
        evidence.append(EvidenceValue("running max", found.running_max, "requests", f"metrics: {found.running_metric}"))
    if found.max_seqs is not None:
        evidence.append(found.max_seqs.evidence("max_num_seqs"))
    if found.kv_max is not None:
        evidence.append(EvidenceValue("KV usage max", found.kv_max, "fraction", "metrics: KV cache usage gauge"))
    if raising is not None and raising.kv_tokens is not None and raising.per_request is not None:
        evidence.append(raising.kv_tokens.evidence("KV cache capacity", "tokens"))
        evidence.append(EvidenceValue("tokens per request", raising.per_request[0], "tokens", raising.per_request[1]))
    return evidence


def _capacity(found: Found, log_facts: LogFacts | None, run: RunRecord | None,
              stream: StreamEvidence | None) -> Remediation:
    """More replicas, as ``queue_remediation`` says unless the cache holds fewer than two requests (then grow it)."""
    kv_max, running_max, waiting_max = found.kv_max or 0.0, found.running_max, found.waiting_max
    kv_bound = queue_remediation(f"KV usage reached {fmt_pct(kv_max)}.", "queue time to drop to a small share of TTFT",
                                 log_facts, run, stream, found.engine)
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


def _fit_basis(raising: Raising, kv_max: float | None) -> str:
    """How the fit was worked out: from the KV capacity, else from today's value and the KV peak."""
    if raising.kv_tokens is not None and raising.per_request is not None:
        return (f"{int(raising.kv_tokens.value)} KV tokens x {KV_FILL_TARGET} / {raising.per_request[0]:.0f} tokens "
                "per request")
    return f"max_num_seqs {raising.current} x {KV_FILL_TARGET} / peak KV usage {kv_max:.2f}"


def _fits_up_to(raising: Raising, kv_max: float | None) -> str:
    return f"; the KV cache fits up to {raising.fit}: {_fit_basis(raising, kv_max)}" if raising.fit is not None else ""


def _unconfirmed(found: Found) -> str | None:
    """Why the batch was not seen full, when it was not."""
    if found.batch_full:
        return None
    if found.max_seqs is None:
        return "max_num_seqs is in neither the startup log nor the run record"
    if found.above_bound:
        return (f"max_num_seqs is in neither the startup log nor the run record, and vLLM's default for this GPU "
                f"is only known to be at least {found.max_seqs.value}")
    return "no scrape during the probe showed how many requests ran"


def _raise_max_num_seqs(found: Found, raising: Raising) -> Remediation:
    max_seqs, kv_max = found.max_seqs, found.kv_max
    if raising.suggested is not None and raising.by_demand:
        demand = (f"the peak of {raising.suggested} requests in flight" if raising.seen
                  else f"the probe's concurrency of {raising.suggested} (no scrape saw the peak)")
        text = f"{raising.suggested} ({demand}{_fits_up_to(raising, kv_max)})"
    elif raising.suggested is not None:
        text = f"{raising.suggested} ({_fit_basis(raising, kv_max)})"
    elif max_seqs is not None and max_seqs.lower_bound:
        text = ("raise it above the limit in use (start the engine with --max-num-seqs set explicitly) while KV "
                "usage stays below 90 %" + _fits_up_to(raising, kv_max))
    else:
        text = "raise it while KV usage stays below 90 %"
    kv_note = f"KV usage stayed <= {fmt_pct(kv_max)}" if kv_max is not None else "the KV cache had room"
    unconfirmed = _unconfirmed(found)
    if unconfirmed is None:
        why = f"the batch is full while {kv_note}: the sequence limit, not GPU memory, makes requests wait"
    else:
        why = (f"requests waited while {kv_note}, so the sequence limit is the likely bound; {unconfirmed}, "
               "so running = max_num_seqs is not confirmed")
    return Remediation(
        setting="max_num_seqs",
        suggested=text,
        why=why,
        verify=rerun(f"waiting to stay near 0, queue time to shrink, and {_no_preemptions(found.engine)}"),
        current=max_seqs.current() if max_seqs is not None else None,
        where=engine_flag(found.engine, "max_num_seqs"),
    )


def _no_preemptions(engine: str) -> str:
    """"no preemptions (the engine's counter)", or without the counter where it has none."""
    counter = engine_metric("preemptions", engine)
    return f"no preemptions ({counter})" if counter else "no mid-answer stalls"
