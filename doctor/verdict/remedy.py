"""The one remediation: which finding explains the symptom, and the trade-off of a compound incident.

The finding whose ``cause`` explains the largest component of the symptom's decomposition (felt
before risk, then the most severe; ``FALLBACK_CAUSES`` when no direct cause fired); else the most
severe finding of the symptom's class. The renderers list the other findings.
"""

from __future__ import annotations

from doctor.model import Cause, Component, Finding, Severity, Symptom, SymptomClass
from doctor.verdict.cases import Trade, TradeKind

#: Decomposition component -> the finding causes that explain it.
COMPONENT_CAUSES: dict[str, tuple[Cause, ...]] = {
    "gateway": (Cause.BUFFERING, Cause.COMPRESSION, Cause.GATEWAY_SERIALISATION, Cause.GATEWAY_OVERHEAD,
                Cause.PROXY_TIMEOUT, Cause.GATEWAY_CAP, Cause.GATEWAY_RETRIES, Cause.ROUTING),
    "transport": (Cause.TRANSPORT,),
    # vLLM V1 keeps a request whose grammar is compiling in its waiting queue: a schema's compile is queue time
    "queue": (Cause.QUEUE, Cause.STRUCTURED_OUTPUT, Cause.ROUTING),
    "prefill": (Cause.PREFILL,),
    # a wedged engine's wait is in none of its histograms (they observe nothing): the time left over
    "other": (Cause.WEDGE, Cause.ROUTING),
    "preemption-stalls": (Cause.PREEMPTION,),
    "prefill-interference": (Cause.PREFILL_INTERFERENCE,),
    "stalls": (Cause.PREEMPTION, Cause.PREFILL_INTERFERENCE, Cause.ENGINE_PAUSE, Cause.STRUCTURED_OUTPUT),
    "batch-depth": (Cause.BATCH_DEPTH,),
    "token-bundling": (Cause.TOKEN_BUNDLING,),
    "gpu-state": (Cause.GPU_STATE,),
    "decode": (Cause.BATCH_DEPTH, Cause.GPU_STATE, Cause.DECODE, Cause.FRONTEND, Cause.STRUCTURED_OUTPUT),
}

#: Causes that explain a component only when none of ``COMPONENT_CAUSES`` fired, tried in order: a
#: queue that builds under load alone (LD504, LD505) says to add capacity, while a batch limit
#: (LD101) names the engine setting, which is the more specific change. Before more replicas
#: comes the autoscaler that did not add them (its signal, its bounds, its state: LD601-LD610,
#: risks or felt): a replica at its knee needed another, and the scaler's field is what would have
#: brought it (docs/scaling.md).
FALLBACK_CAUSES: dict[str, tuple[tuple[Cause, ...], ...]] = {
    "queue": ((Cause.SCALING,), (Cause.QUEUE_LOAD,)),
}

#: The latency symptoms and the finding class of each.
SYMPTOM_CLASS = {
    Symptom.PRE_FIRST_TOKEN: SymptomClass.PRE_FIRST_TOKEN,
    Symptom.INTER_TOKEN: SymptomClass.INTER_TOKEN,
    Symptom.PROXY_ONLY: SymptomClass.PROXY_ONLY,
}
CLASS_SYMPTOM = {cls: symptom for symptom, cls in SYMPTOM_CLASS.items()}

#: The knob of a compound incident: one step budget trades long prompts' own first token against
#: every running stream's freezes (LD202), and a request queued behind those long steps.
TRADE_KNOB = "max_num_batched_tokens"


def rank(f: Finding) -> tuple[bool, int, str]:
    """Felt findings first, then the most severe: a risk explains a component only when nothing felt does."""
    return (not f.felt, -f.severity.rank, f.code)


def severe(findings: list[Finding], cls: SymptomClass) -> list[Finding]:
    """The felt findings of ``cls`` at warning or above."""
    return [f for f in findings if f.felt and f.symptom is cls and f.severity.rank >= Severity.WARNING.rank]


def most_severe(findings: list[Finding], cls: SymptomClass) -> Finding | None:
    return min(severe(findings, cls), key=rank, default=None)


def by_cause(findings: list[Finding], causes: tuple[Cause, ...]) -> Finding | None:
    return min((f for f in findings if f.cause in causes), key=rank, default=None)


def primary(findings: list[Finding], dominant: Component | None, cls: SymptomClass) -> Finding | None:
    """The finding explaining the dominant component (its fallback causes next); else the most
    severe of the symptom's class."""
    if dominant is not None:
        for causes in (COMPONENT_CAUSES.get(dominant.name, ()), *FALLBACK_CAUSES.get(dominant.name, ())):
            explaining = by_cause(findings, causes)
            if explaining is not None:
                return explaining
    return min((f for f in findings if f.symptom is cls), key=rank, default=None)


def scaler_context(symptom: Symptom, primary: Finding | None, findings: list[Finding]) -> list[Finding]:
    """On a first-token verdict whose change is not the autoscaler's, the autoscaler findings (cause
    ``scaling``, warning or above, two at most) that say why no replica came either: context beside
    the engine's own knob (a replica below its knee gets ``max_num_seqs``), not the remediation."""
    if symptom is not Symptom.PRE_FIRST_TOKEN or (primary is not None and primary.cause == Cause.SCALING):
        return []
    return sorted((f for f in findings if f.cause == Cause.SCALING and f.severity.rank >= Severity.WARNING.rank), key=rank)[:2]


def trade_off(symptom: Symptom, primary: Finding | None, severe: list[Finding],
              ttft_over: bool) -> tuple[Finding | None, Trade | None]:
    """The remediation and the trade of a compound incident: a felt prefill-interference finding
    naming ``TRADE_KNOB`` beside a first-token symptom (the verdict's, or a witness's TTFT over budget
    on an inter-token verdict whose change it already is); never on a proxy-only verdict.

    Other users' long prefills both freeze running streams and hold new requests behind their long
    steps. On a first-token verdict that no queue, prefill or transport finding explains (only a
    fallback: load alone, a cold start), the knob is the change: lowering it lets queued requests
    start sooner and ends the freezes, at the cost of the long prompts' own TTFT. When the first
    token is the long prompts' own prefill (a prefill finding), the knob would serve it the other
    way, raised, at the cost of everyone's freezes: the trade says so and the remediation stays.
    """
    interference = next((f for f in severe if f.cause == Cause.PREFILL_INTERFERENCE
                         and f.remediation.setting == TRADE_KNOB), None)
    if interference is None or not (ttft_over or symptom is Symptom.PRE_FIRST_TOKEN) \
            or symptom not in (Symptom.PRE_FIRST_TOKEN, Symptom.INTER_TOKEN) \
            or (symptom is Symptom.INTER_TOKEN and primary is not interference):
        return primary, None
    if symptom is Symptom.INTER_TOKEN:
        return primary, Trade(TradeKind.FREEZES, interference, primary)
    if primary is not None and primary.cause in (Cause.PREFILL, Cause.QUEUE, Cause.TRANSPORT):
        return primary, Trade(TradeKind.RAISE, interference, primary)
    return interference, Trade(TradeKind.LOWER, interference, primary)
