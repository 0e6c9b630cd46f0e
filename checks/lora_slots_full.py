"""Requests wait for a LoRA adapter slot: every GPU slot holds another adapter.

What it detects:
LoRA slots full: in the scrapes of the probe window, requests for an adapter were waiting while
all ``max_lora`` GPU adapter slots held other adapters (``vllm:lora_requests_info``), in at
least ``min_scrapes`` scrapes. vLLM v1 lists no adapter as waiting (its two label lists are the
same adapters, those being served: ``doctor.engine_readers.vllm_lora``), so there the check reads the
turns instead: more adapters served over the window than ``max_lora`` slots, while requests
waited with batch seats free (running below ``max_num_seqs``).

Why it matters:
vLLM batches requests of at most ``--max-loras`` distinct adapters at once; a request for
another adapter waits until a slot frees, then its adapter is loaded (from CPU memory when it
is among the ``--max-cpu-loras`` cached, else from disk) before its prefill. With more adapters
in use than slots, adapters are swapped in and out and TTFT grows with the churn (sglang
PR#13349: median TTFT 40 ms with 8 adapters on 8 slots, 6.3 s with 16), while the engine's
``waiting`` looks like ordinary queueing and ``max_num_seqs`` is not the limit.

Evidence:
metrics (the raw scrapes): ``vllm:lora_requests_info``, the latest series of each scrape
(``max_lora``, ``running_lora_adapters``, ``waiting_lora_adapters``); an adapter both running
and waiting is already loaded and does not count. metrics_window: the waiting and running peaks
and the engine's TTFT histogram; log_facts: ``max_num_seqs`` (the batch seats, for the v1 form); stream_stats: the client's TTFT p90, which decides whether users felt
the wait (over ``ttft_target_s``) or it is a risk (requests waited for a slot, TTFT within budget).
Not exposed by SGLang in this form (its ``sglang:lora_pool_*`` metrics count the pool, not which
adapters wait): on SGLang the check names the pool size its startup log gives
(``max_loras_per_batch``) and says so; nor by llama.cpp.

Remediation:
Raise ``--max-loras`` to the number of adapters in use at once (each slot costs GPU memory:
the KV cache shrinks), and keep ``--max-cpu-loras`` at least as large so a swapped-out adapter
reloads from CPU memory, not disk; or route each adapter to a subset of replicas so each
replica's adapters fit its slots.

Options:
min_scrapes: scrapes with an adapter shut out of the slots at which it fires
ttft_target_s: the first-token target (defaults to --ttft-budget): a slot wait that keeps TTFT within
    it is a risk, not felt latency

Example:
3 of 5 scrapes: requests for adapter sql-lora waited while the 2 slots held chat-lora and
code-lora; 3 adapters in use -> --max-loras 3.
2 adapters (alpha, beta) took turns in 1 slot while up to 4 requests waited with 4 of 128 batch
seats taken -> --max-loras 2 (a real vLLM 0.32, fixtures/bundles/realvllm-users-lora.json.gz).
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import Setting, engine_flag, engine_path, engine_setting, max_num_seqs_stated, metric_read, rerun
from doctor.derive.engine import UNIDENTIFIED, EngineIdentity
from doctor.derive.log_facts import LogFacts
from doctor.derive.metrics_window import MetricsWindow
from doctor.derive.stream_stats import StreamStats
from doctor.engine_readers.vllm_lora import FAMILY, LoraSlots, lora_slots, served
from doctor.engines.names import SGLANG
from doctor.evidence import MetricsEvidence, RunRecord
from doctor.foundation.units import fmt_seconds
from doctor.model import Cause, EvidenceValue, Remediation, SymptomClass


@dataclass(frozen=True)
class Turns:
    """vLLM v1's form (no adapter ever listed as waiting): the adapters served over the window against
    the slots, the waiting and running peaks, the stated batch seats, and how it reads: ``slot-wait``
    (more adapters than slots, requests waiting beside free seats), else why not: ``within`` the
    slots, ``no-wait``, ``no-seats`` (max_num_seqs unknown) or ``seats-full``."""

    served: tuple[str, ...]
    slots: int | None
    waiting_max: float | None
    running_max: float | None
    seats: Setting | None
    reading: str


@dataclass(frozen=True)
class Ttft:
    """The TTFT users got: the client's p90 on stream path ``where``, else (not ``client``) the
    engine histogram ``where``'s mean, over ``n``."""

    value: float
    client: bool
    where: str | None
    n: float


@dataclass(frozen=True)
class Found:
    """The LoRA slots over the scrapes: how many scrapes had an adapter shut out (the worst one's
    shut-out and running adapters), the adapters in use, the slots, the engine's waiting gauge
    (``waiting_gauge``: it exists), vLLM v1's turns when nothing was shut out, and the TTFT."""

    scrapes: int
    shut: int
    shut_out: tuple[str, ...]
    running: tuple[str, ...]
    in_use: tuple[str, ...]
    slots: int | None
    waiting_gauge: bool
    waiting_max: float | None
    waiting_metric: str
    running_metric: str
    turns: Turns | None
    ttft: Ttft | None


@check(code="LD109", name="lora-slots-full", symptom=SymptomClass.PRE_FIRST_TOKEN, cause=Cause.QUEUE)
def lora_slots_full(
    metrics: MetricsEvidence,
    metrics_window: MetricsWindow | None = None,
    log_facts: LogFacts | None = None,
    stream_stats: StreamStats | None = None,
    run: RunRecord | None = None,
    engine: EngineIdentity = UNIDENTIFIED,
    *,
    min_scrapes: int = 2,
    ttft_target_s: float = 0.5,
) -> Result:
    states = lora_slots(metrics.scrapes)
    if not states:
        pool = engine_setting("max_loras", log_facts)
        if engine.id == SGLANG and pool is not None:
            return NotApplicable(_sglang_pool(pool))
        return NotApplicable(_no_lora())
    shut = [s for s in states if s.shut_out]
    worst = max(shut, key=lambda s: len(s.shut_out)) if len(shut) >= min_scrapes else None
    slots = max((s.max_lora for s in states if s.max_lora is not None), default=None)
    waiting = metrics_window.waiting if metrics_window is not None else None
    found = Found(
        scrapes=len(states),
        shut=len(shut),
        shut_out=tuple(worst.shut_out) if worst is not None else (),
        running=tuple(worst.running) if worst is not None else (),
        in_use=tuple(sorted({a for s in states for a in (*s.running, *s.waiting)})),
        slots=slots,
        waiting_gauge=waiting is not None,
        waiting_max=waiting.max if waiting is not None else None,
        waiting_metric=metric_read(metrics_window, "waiting"),
        running_metric=metric_read(metrics_window, "running"),
        turns=None if worst is not None else _turns(states, slots, metrics_window, log_facts, run),
        ttft=_ttft(stream_stats, metrics_window),
    )
    if found.turns is not None and found.turns.reading != "slot-wait":
        return Pass(_quiet(found, found.turns))
    return Fire(
        title="Requests wait for a LoRA adapter slot",
        summary=_summary(found, ttft_target_s),
        remediation=_remediation(found, engine.id),
        # a slot wait is felt only past the first-token budget (docs/verdict.md); unmeasured, a risk
        felt=found.ttft is not None and found.ttft.value > ttft_target_s,
        evidence=_evidence(found),
    )


def _turns(states: list[LoraSlots], slots: int | None, metrics_window: MetricsWindow | None,
           log_facts: LogFacts | None, run: RunRecord | None) -> Turns:
    """vLLM v1's form (no adapter ever listed as waiting): more adapters served over the window than
    slots while requests waited with batch seats free, else why it does not hold.

    Free seats are what tell a slot wait from plain queueing: with every seat taken, requests wait
    for a seat whatever their adapter (LD101's case). The seats are those stated
    (``max_num_seqs_stated``), never inferred from a flat ``running`` gauge."""
    turned = tuple(served(states))
    waiting = metrics_window.waiting if metrics_window is not None else None
    running = metrics_window.running if metrics_window is not None else None
    waiting_max = waiting.max if waiting is not None else None
    running_max = running.max if running is not None else None
    seats = max_num_seqs_stated(log_facts, run)
    if slots is None or len(turned) <= slots:
        reading = "within"
    elif not waiting_max:
        reading = "no-wait"
    elif seats is None or running_max is None:
        reading = "no-seats"
    elif running_max >= float(seats.value):
        reading = "seats-full"
    else:
        reading = "slot-wait"
    return Turns(turned, slots, waiting_max, running_max, seats, reading)


def _ttft(stream_stats: StreamStats | None, metrics_window: MetricsWindow | None) -> Ttft | None:
    """The TTFT users got over the window: the client's p90, else the engine's TTFT histogram mean;
    ``None`` when neither was measured."""
    path = engine_path(stream_stats) if stream_stats is not None else None
    if path is not None and path.ttft.p90 is not None:
        return Ttft(path.ttft.p90, True, path.path, path.ttft.n)
    hist = metrics_window.ttft if metrics_window is not None else None
    if hist is not None and hist.mean is not None and hist.count:
        return Ttft(hist.mean, False, hist.metric, hist.count)
    return None


def _sglang_pool(pool: Setting) -> str:
    return (f"SGLang's LoRA pool holds {pool.value} adapters per batch (max_loras_per_batch, "
            f"{pool.source}); which adapters wait for a slot is not exposed by SGLang "
            "(its sglang:lora_pool_slots_used / _total count the pool, not the waiting adapters)")


def _no_lora() -> str:
    return (f"no {FAMILY} in the scrapes: LoRA is off, or the engine does not expose it "
            "(SGLang's lora_pool metrics are not read)")


def _turns_read(turns: Turns) -> str:
    """Why the turns are not a slot wait."""
    n, slots = len(turns.served), turns.slots
    if turns.reading == "within":
        return f"{n} adapter(s) served over the window, within the {slots} slot(s)"
    if turns.reading == "no-wait":
        return f"{n} adapters took turns in {slots} slot(s), but no request waited"
    if turns.reading == "no-seats" or turns.seats is None:
        return (f"{n} adapters took turns in {slots} slot(s) while requests waited, but without "
                "max_num_seqs (--log) a wait for a slot cannot be told from a full batch")
    return (f"{n} adapters took turns in {slots} slot(s), but every batch seat was taken "
            f"(running up to {turns.running_max:g} of max_num_seqs {turns.seats.value}): queueing for a seat")


def _quiet(found: Found, turns: Turns) -> str:
    return (f"{found.shut} of {found.scrapes} scrapes with a request waiting for an adapter slot "
            f"({len(found.in_use)} adapter(s) in use, max_lora {found.slots}); {_turns_read(turns)}")


def _ttft_name(ttft: Ttft) -> str:
    return "TTFT p90" if ttft.client else "engine TTFT mean"


def _summary(found: Found, ttft_target_s: float) -> str:
    if (turns := found.turns) is None:
        summary = (f"{found.shut} of {found.scrapes} scrapes: requests for {', '.join(found.shut_out)} waited while "
                   f"the {found.slots} slot(s) held {', '.join(found.running)}; {len(found.in_use)} adapters in use")
    else:
        seats = turns.seats.value if turns.seats is not None else None
        summary = (f"{len(turns.served)} adapters ({', '.join(turns.served)}) took turns in {turns.slots} slot(s) "
                   f"while up to {turns.waiting_max:g} requests waited with {turns.running_max:g} of {seats} batch "
                   "seats taken: they waited for a slot (vLLM v1 lists no adapter as waiting)")
    if found.ttft is not None:
        summary += (f"; {_ttft_name(found.ttft)} {fmt_seconds(found.ttft.value)} against the "
                    f"{fmt_seconds(ttft_target_s)} budget")
    return summary


def _evidence(found: Found) -> list[EvidenceValue]:
    evidence = [EvidenceValue("max_lora", found.slots, "slots", f"metrics: {FAMILY} label max_lora"),
                EvidenceValue("adapters in use", len(found.in_use), "adapters",
                              f"metrics: {FAMILY}: {', '.join(found.in_use)}")]
    if (turns := found.turns) is None:
        evidence.insert(0, EvidenceValue("scrapes with an adapter shut out", found.shut, "scrapes",
                                         f"metrics: {FAMILY}, of {found.scrapes}"))
        if found.waiting_gauge:
            evidence.append(EvidenceValue("waiting max", found.waiting_max, "requests",
                                          f"metrics: {found.waiting_metric}"))
    else:
        evidence += [
            EvidenceValue("adapters served", len(turns.served), "adapters",
                          f"metrics: {FAMILY} running_lora_adapters, every scrape"),
            EvidenceValue("waiting max", turns.waiting_max, "requests", f"metrics: {found.waiting_metric}"),
            EvidenceValue("running max", turns.running_max, "requests", f"metrics: {found.running_metric}"),
        ]
        if turns.seats is not None:
            evidence.append(EvidenceValue("max_num_seqs", turns.seats.value, "seats", turns.seats.source))
    if (ttft := found.ttft) is not None:
        source = (f"stream: {ttft.where}, n={ttft.n}" if ttft.client
                  else f"metrics: {ttft.where} mean, n={ttft.n:.0f}")
        evidence.append(EvidenceValue(_ttft_name(ttft), ttft.value, "s", source))
    return evidence


def _remediation(found: Found, engine: str) -> Remediation:
    return Remediation(
        setting="max_loras",
        suggested=(f"{len(found.in_use)} (the adapters in use at once here), with --max-cpu-loras at least as many so "
                   "a swapped-out adapter reloads from CPU memory; or route each adapter to fewer replicas"),
        why=("waiting requests were for adapters outside the full GPU slots: they wait for a slot and an adapter "
             "load, which more batch seats (max_num_seqs) or replicas sharing every adapter would not cure"),
        verify=rerun("TTFT p90 down for the adapters that waited, and no request left waiting while batch seats "
                     "are free; the KV cache shrinks by the slots' memory"),
        current=str(found.slots) if found.slots is not None else None,
        where=engine_flag(engine, "max_loras"),
    )
