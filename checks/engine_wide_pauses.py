"""Every running stream freezes at the same instant, with no prompt arriving and no preemption.

What it detects:
Engine-wide pauses: large gaps (several times each stream's median gap) that every stream
running at that moment shows together, on the same wall-clock interval, at least ``min_pauses``
times, while no request was sent (no prompt of the probe's to prefill), the engine's prompt-token
counter did not move between the scrapes around the freeze (no other user's prompt either) and
the engine preempted nothing over the window. Garbage-collection pauses do this (sglang PR#9241,
#28067; vLLM PR#44363): a full collection stops the process that steps or serves every stream.

Why it matters:
Users see answers stop mid-sentence, all at once, periodically; the pause grows with the heap
(with uptime). It is not prefill interference (no prompt arrived, so a smaller step budget
changes nothing) and not preemption (no KV shortage, so a bigger cache changes nothing).

Evidence:
stream (token times of every request, and the client's own freezes, taken out: a client that
froze stamps every stream late together) and stream_stats (median gaps). metrics: the prompt-token
counter at the scrapes that bracket each freeze; `python_gc_collections_total{generation="2"}`
and `process_start_time_seconds` of the serving process (`doctor.engine_metrics.runtime`): a pause
that grows with the heap grows with uptime, and within the run (said when three or more rise and
the last is a quarter longer than the first).
metrics_window: preemptions over the window. Under vLLM v1 the GC counters are the API server's:
the engine core's collections are not exposed by vLLM (`VLLM_GC_DEBUG=1` logs them).
CPU starvation stops every stream at once too, collection or not, so the check weighs what shows
it. Over the window, `process_cpu_seconds_total` of the serving process: at ``starved_cores`` or
more the freezes coincide with a process at its last core and the check passes, saying so (a
saturated front end is LD211's), rather than claim an engine-wide pause. host (psutil) is a
snapshot taken before the probe, not over the window: a host saturated then (``host_percent`` CPU
or more, or a load average at or over its CPUs: checklib's ``host_saturated``, LD507's rule too) is
a caveat in the finding (the freezes may be starvation), not a reason to withdraw it.

Remediation:
Freeze the long-lived heap after start-up so a full collection no longer walks it: a vLLM release
that does it (vllm PR#44363) with `VLLM_GC_DEBUG=1` to time each collection meanwhile; SGLang's
`freeze_gc`; TensorRT-LLM's `TRTLLM_SERVER_FREEZE_GC=1`. Verify: the same probe with concurrent
streams shows no simultaneous freeze.

Options:
gap_factor: a gap this many times its stream's median is a freeze
min_pause_s: and at least this long
min_pauses: simultaneous freezes with no prompt arriving that fire
min_streams: streams that must freeze together
ttft_target_s: the first-token target (defaults to --ttft-budget), which a freeze inside an answer is
    held to: shorter pauses are a risk, not felt latency
starved_cores: the serving process's CPU over the window, in cores, with which the freezes count as
    CPU starvation, not an engine-wide pause (LD211's ``min_cores``)
host_percent: the host's CPU percent, before the probe, at which the finding warns of starvation
    (a load average at or over the host's CPUs warns too)

Example:
LD210 engine-wide-pauses: direct: 4 times all 4 running streams froze at once (median 300 ms,
every 1.5 s), no prompt arriving, no preemption; gen-2 GC collections +4 in the window -> freeze
the heap after start-up (vllm PR#44363).
"""

from __future__ import annotations

import itertools
import statistics
from dataclasses import dataclass

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import host_saturated, host_values, not_in_metrics, process_cores, prompt_tokens_around, rerun, unidentified_setting
from doctor.derive.engine import UNIDENTIFIED, EngineIdentity
from doctor.derive.metrics_window import MetricsWindow
from doctor.engine_metrics.runtime import Reading, readings
from doctor.engines import RECORDS
from doctor.engines.names import UNKNOWN, display
from doctor.evidence import HostEvidence, MetricsEvidence, RequestTrace, StreamEvidence
from doctor.evidence.stream import frozen_overlap
from doctor.foundation.units import fmt_seconds
from doctor.model import Cause, EvidenceValue, Remediation, Severity, SymptomClass

#: The last simultaneous freeze this many times the first (and a rising fit) grew within the run.
GROWN = 1.25

#: The lever per engine: what freezes the heap after start-up (its record's ``gc_freeze``).
FREEZE: dict[str, tuple[str, str]] = {r.id: r.gc_freeze for r in RECORDS if r.gc_freeze}


@dataclass(frozen=True)
class Pause:
    """One freeze every running stream shared, on the probe's clock, with whether a prompt may have
    arrived in it (``sent_at``: the probe sent a request then; ``foreign``: prompt tokens the engine
    prefilled around it beyond the probe's own): only pauses with neither count (a prompt makes it
    prefill interference).
    """

    start: float
    end: float
    streams: int  # streams frozen together
    sent_at: float | None = None
    foreign: float | None = None

    @property
    def prompted(self) -> bool:
        return self.sent_at is not None or bool(self.foreign)


@dataclass(frozen=True)
class Runtime:
    """The serving process over the window, from its scrapes (``scraped``: any): its full (gen-2) GC
    collections (``None``: fewer than two scrapes had the counter) and its uptime at the last one."""

    scraped: bool
    gc_grew: float | None
    uptime: float | None


@dataclass(frozen=True)
class Found:
    """The quiet simultaneous freezes (no prompt arriving), their period, whether they grew over the
    run, the serving process's GC and uptime, and why the host counted as saturated (with its
    readings) when it did."""

    engine: str
    quiet: tuple[Pause, ...]
    period: float | None
    grew: bool
    runtime: Runtime
    saturated: str
    host: HostEvidence | None


@check(code="LD210", name="engine-wide-pauses", symptom=SymptomClass.INTER_TOKEN, cause=Cause.ENGINE_PAUSE)
def engine_wide_pauses(
    stream: StreamEvidence,
    metrics: MetricsEvidence | None = None,
    metrics_window: MetricsWindow | None = None,
    host: HostEvidence | None = None,
    engine: EngineIdentity = UNIDENTIFIED,
    *,
    gap_factor: float = 3.0,
    min_pause_s: float = 0.1,
    min_pauses: int = 2,
    min_streams: int = 2,
    ttft_target_s: float = 0.5,
    starved_cores: float = 0.8,
    host_percent: float = 90.0,
) -> Result:
    series = readings(metrics.scrapes) if metrics is not None else []
    pauses: list[Pause] = []
    for path in dict.fromkeys(r.path for r in stream.requests):
        traces = [r for r in stream.requests if r.path == path and r.ok and len(r.tokens) >= 3]
        pauses += _simultaneous(traces, stream, series, gap_factor, min_pause_s, min_streams)
    if not pauses:
        if not _overlapping(stream):
            raise NotApplicable("no two streams ran at once: a pause of the whole engine cannot be told from one "
                                "stream's (run with --concurrency 4)")
        return Pass(_no_shared_freeze(min_streams))
    if metrics_window is not None and metrics_window.preemptions:
        return Pass(_preempted(len(pauses), metrics_window.preemptions))
    quiet = [p for p in pauses if not p.prompted]
    if len(quiet) < min_pauses:
        return Pass(_prompted(pauses, len(quiet)))
    cpu = process_cores(series)
    if cpu is not None and cpu[0] >= starved_cores:
        return Pass(_starved(len(quiet), cpu))
    lengths = [p.end - p.start for p in quiet]
    starts = [p.start for p in quiet]
    saturated = host_saturated(host, host_percent)
    found = Found(
        engine=engine.id,
        quiet=tuple(quiet),
        period=statistics.median(b - a for a, b in itertools.pairwise(starts)) if len(starts) > 1 else None,
        grew=(len(quiet) >= 3 and statistics.linear_regression(starts, lengths).slope > 0
              and lengths[-1] >= GROWN * lengths[0]),
        runtime=_runtime(series),
        saturated=saturated,
        host=host if host is not None and saturated else None,
    )
    lever, where = _lever(engine.id)
    return Fire(
        title="Every running stream freezes at once, with no prompt arriving: an engine-wide pause (GC)",
        summary=_summary(found),
        remediation=Remediation(
            setting="gc_freeze",
            suggested=lever,
            why=("the freezes hit every stream at the same instant with no prompt to prefill and no preemption: the "
                 "process stopped as a whole, as a full garbage collection does; a smaller step budget or a bigger KV "
                 "cache would change nothing"),
            verify=rerun("no simultaneous freeze across the concurrent streams, and this check to pass"),
            where=where,
        ),
        severity=Severity.WARNING,
        felt=max(lengths) > ttft_target_s,  # freezes are held to the first-token budget (docs/verdict.md)
        evidence=_evidence(found),
    )


def _simultaneous(traces: list[RequestTrace], stream: StreamEvidence, series: list[Reading], gap_factor: float,
                  min_pause_s: float, min_streams: int) -> list[Pause]:
    """The intervals in which every stream running across them froze, ``min_streams`` or more."""
    client = stream.client.freezes
    large: dict[int, list[tuple[float, float]]] = {}
    for i, r in enumerate(traces):
        times = [ev.t for ev in r.tokens]
        gaps = [b - a for a, b in itertools.pairwise(times)]
        median = statistics.median(gaps)
        large[i] = [(a, b) for a, b in itertools.pairwise(times)
                    if b - a > gap_factor * median and b - a - frozen_overlap(client, a, b) >= min_pause_s]
    pauses: list[Pause] = []
    for i, spans in large.items():
        for a, b in spans:
            running = [j for j, r in enumerate(traces) if j != i and r.tokens[0].t <= a and r.tokens[-1].t >= b]
            hits = [next(((c, d) for c, d in large[j] if min(b, d) - max(a, c) > 0.5 * min(b - a, d - c)), None)
                    for j in running]
            shared = [h for h in hits if h is not None]
            if len(running) + 1 < min_streams or len(shared) < len(running):
                continue  # a stream ran on through it: not the whole engine
            start, end = max([a, *(c for c, _ in shared)]), min([b, *(d for _, d in shared)])
            if any(p.start < end and start < p.end for p in pauses):
                continue  # the same pause, seen from another stream
            pauses.append(_pause(stream, series, start, end, len(running) + 1))
    return sorted(pauses, key=lambda p: p.start)


def _pause(stream: StreamEvidence, series: list[Reading], start: float, end: float, streams: int) -> Pause:
    """The freeze ``[start, end]``, with whether a prompt may have arrived in it: the probe sent one,
    else the engine's prompt-token counter moved beyond the probe's own (no two scrapes bracketing
    it leave it quiet: a freeze is held quiet without the counter)."""
    sent = [r for r in stream.requests if r.t_sent is not None and start - (end - start) <= r.t_sent <= end]
    if sent:
        return Pause(start, end, streams, sent_at=sent[0].t_sent)
    return Pause(start, end, streams, foreign=prompt_tokens_around(series, stream, start, end))


def _runtime(series: list[Reading]) -> Runtime:
    """The serving process's full collections over the window and its uptime."""
    gc = [r.gc_full for r in series if r.gc_full is not None]
    if len(gc) < 2:
        return Runtime(bool(series), None, None)
    started = next((r for r in reversed(series) if r.started is not None), None)
    uptime = started.wall - started.started if started is not None and started.started is not None else None
    return Runtime(True, gc[-1] - gc[0], uptime)


def _lever(engine: str) -> tuple[str, str]:
    """What freezes the heap on ``engine``, and where: its own lever, the neutral wording with every
    known engine's on an unidentified one, else "not exposed"."""
    if engine == UNKNOWN:
        return ("freeze the long-lived heap after start-up so a full collection no longer walks it",
                unidentified_setting("freezing the heap after start-up",
                                     (f"{display(e)}: {lever.split(';')[0]}" for e, (lever, _) in FREEZE.items())))
    return FREEZE.get(engine, ((f"not exposed by {display(engine)}: no setting freezes its heap; "
                                        "report it upstream with the freeze times"), f"the {display(engine)} server"))


def _overlapping(stream: StreamEvidence) -> bool:
    """Two streams were answered at the same time (first to last token overlap)."""
    spans = sorted((r.tokens[0].t, r.tokens[-1].t) for r in stream.requests if r.ok and r.tokens)
    return any(b[0] < a[1] for a, b in itertools.pairwise(spans))


def _no_shared_freeze(min_streams: int) -> str:
    return f"no freeze stopped {min_streams} or more running streams at once"


def _preempted(pauses: int, preemptions: float) -> str:
    return (f"{pauses} simultaneous freeze(s), but {preemptions:.0f} preemption(s) in the "
            "window explain freezes (LD201)")


def _why_prompted(pause: Pause) -> str:
    """Why a prompt may have arrived during the pause."""
    if pause.sent_at is not None:
        return f"the probe sent a request at t={pause.sent_at:.2f} s"
    return f"{pause.foreign:.0f} prompt tokens prefilled around it"


def _prompted(pauses: list[Pause], quiet: int) -> str:
    why = next((_why_prompted(p) for p in pauses if p.prompted), "")
    return (f"{len(pauses)} simultaneous freeze(s), {quiet} with no prompt arriving ({why}): prefill "
            "interference is LD202's")


def _starved(quiet: int, cpu: tuple[float, float]) -> str:
    return (f"{quiet} simultaneous freeze(s) with no prompt arriving, but they coincide with CPU starvation: "
            f"the serving process used {cpu[0]:.2f} cores over {fmt_seconds(cpu[1])} "
            "(process_cpu_seconds_total); a process at its last core stops every stream at once, collection "
            "or not, so no engine-wide pause is claimed (a saturated front end is LD211's)")


def _lengths(found: Found) -> list[float]:
    return [p.end - p.start for p in found.quiet]


def _summary(found: Found) -> str:
    lengths = _lengths(found)
    summary = (f"{len(found.quiet)} times every running stream ({max(p.streams for p in found.quiet)} at most) froze "
               f"at once (median {fmt_seconds(statistics.median(lengths))}, longest {fmt_seconds(max(lengths))}"
               + (f", every {fmt_seconds(found.period)}" if found.period else "") + "), no prompt arriving, no preemption")
    if found.grew:
        summary += f"; they grew from {fmt_seconds(lengths[0])} to {fmt_seconds(lengths[-1])} over the run"
    runtime = found.runtime
    if not runtime.scraped:
        summary += "; no /metrics scrape to read GC collections from"
    elif runtime.gc_grew is None:
        summary += "; " + not_in_metrics(found.engine, "python_gc_collections_total")
    else:
        summary += f"; full (gen-2) GC collections +{runtime.gc_grew:.0f} in the window"
        if runtime.uptime is not None:
            summary += f", uptime {fmt_seconds(runtime.uptime)} (pauses grow with the heap)"
    if found.host is not None:
        # psutil's snapshot is taken before the probe: it cannot say the freezes coincide with
        # starvation, only that they may
        summary += (f"; the host was CPU-saturated when the run began ({found.saturated}, psutil, before the "
                    "probe): CPU starvation also stops every stream at once, so these may be that rather than a "
                    "collection")
    return summary


def _evidence(found: Found) -> list[EvidenceValue]:
    lengths = _lengths(found)
    values = [
        EvidenceValue("simultaneous freezes", len(found.quiet), "", "stream: gaps every running stream shares, none at a send"),
        EvidenceValue("freeze median", round(statistics.median(lengths), 3), "s", "stream: the shared interval"),
        EvidenceValue("freeze longest", round(max(lengths), 3), "s", "stream: the shared interval"),
    ]
    if found.runtime.gc_grew is not None:
        values.append(EvidenceValue("gen-2 GC collections", found.runtime.gc_grew, "",
                                    'metrics: python_gc_collections_total{generation="2"} delta (the serving process)'))
        if found.runtime.uptime is not None:
            values.append(EvidenceValue("uptime", round(found.runtime.uptime), "s",
                                        "metrics: scrape time - process_start_time_seconds"))
    if found.host is not None:
        values += [v for v in host_values(found.host) if v.value is not None]
    return values
