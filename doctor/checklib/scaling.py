"""What the scaling checks share: the scalers a check judges, the engine metric a signal reads, the
start-up time a replica needs, the queue-depth signal to recommend in each product's words, and
the one way a scaling finding names its object, field and change.

A scaling check decides on ``Scaler``s (``doctor.scalers.model``) and says what it found through
``scaler_fire``: every object at fault is named (kind, namespace, name, where it was read), the
field by its path in that object, and the remediation is the first fault's, with a value.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from doctor.checking.contract import Fire, NotApplicable, Pass
from doctor.derive.log_facts import LogFacts
from doctor.engines import RECORDS as ENGINES
from doctor.engines.record import Retired
from doctor.model import EvidenceValue, Remediation, Severity
from doctor.scalers import BY_ID
from doctor.scalers.history import ScalerHistory
from doctor.scalers.model import Knob, Scaler, ScalingView, Signal

#: A replica's start-up time when no startup log tells it: weights loaded, KV cache profiled,
#: CUDA graphs captured. Minutes for a 7-70B model on a GPU (field notes: 49 s of loading and
#: 28 s of warm-up for a tiny model on the real vLLM CPU build here).
DEFAULT_STARTUP_S = 180.0

#: Words in a scaled object's or target's name that say it is a router or gateway, not an engine.
ROUTER_WORDS = ("router", "gateway", "proxy", "epp", "picker", "ingress", "lb")

#: The queue depth per replica to aim at when nothing measured says otherwise: the vLLM
#: production-stack's KEDA example (``vllm:num_requests_waiting``, threshold 5).
QUEUE_TARGET = 5


@dataclass(frozen=True)
class ScalerFault:
    """One object at fault: the scaler, the field (``where``: its path) and what it holds, the
    change (``suggested``) and the sentence of numbers that says why."""

    scaler: Scaler
    where: str
    current: str
    suggested: str
    why: str


def scalers_of(scaling: ScalingView, *, engines_only: bool = True, history: bool = False) -> list[Scaler]:
    """The scalers to judge: with ``engines_only``, not those of a router or gateway in front of the
    engines (their CPU is their load); ``NotApplicable`` when none is left, unless ``history`` (a
    check that judges ``scaling.history`` too) and the Prometheus history holds HPAs."""
    found = [s for s in scaling.scalers if not (engines_only and serves_router(s))]
    if not found and not (history and scaling.history):
        raise NotApplicable("no autoscaler of an engine was read" if scaling.scalers else "no autoscaler was read")
    return found


def history_scaler(history: ScalerHistory) -> Scaler:
    """An HPA known only from its kube-state-metrics series, as a finding names it (its bounds, no spec)."""
    ceiling = None if history.ceiling is None else int(history.ceiling)
    return Scaler(kind="HorizontalPodAutoscaler", name=history.name, namespace=history.namespace, product="hpa",
                  source=f"Prometheus history ({history.metric}_*)", floor=Knob("spec.minReplicas", history.floor),
                  ceiling=Knob("spec.maxReplicas", ceiling))


def tried(scaling: ScalingView) -> str:
    """What each HPA of the Prometheus history did over the window ("" without history): a quiet
    result still answers "did the scaler try"."""
    return "".join(f"; {h.said()}" for h in scaling.history)


def signals_of(scaling: ScalingView) -> list[tuple[Scaler, Signal]]:
    """Every (scaler, signal) pair to judge, a router's too (a counter or a lost signal misleads any
    scaler); ``NotApplicable`` when no scaler has a signal."""
    pairs = [(s, sig) for s in scalers_of(scaling, engines_only=False) for sig in s.signals]
    if not pairs:
        raise NotApplicable("no autoscaler signal was read")
    return pairs


def judge_signals(scaling: ScalingView, fault: Callable[[Scaler, Signal], ScalerFault | None], *, passed: str, title: str,
                  expect: str) -> Fire | Pass:
    """A rule of one signal at a time (``fault``) over every signal read: the finding naming each
    signal at fault, or a pass counting the signals ("3 signal(s), ``passed``")."""
    pairs = signals_of(scaling)
    faults = [f for scaler, signal in pairs if (f := fault(scaler, signal)) is not None]
    if not faults:
        return Pass(f"{len(pairs)} signal(s), {passed}")
    return scaler_fire(title, faults, expect)


def serves_router(scaler: Scaler) -> bool:
    """Whether the scaled pods are a router or gateway: the object says so, or its name or target's
    name does and nothing says they serve a model on a GPU."""
    if scaler.serves is not None:
        return scaler.serves == "router"
    words = f"{scaler.name} {scaler.target or ''}".lower().replace("_", "-").replace("/", "-").split("-")
    return any(w in ROUTER_WORDS for w in words) and not any(engine_family(s.metric or "") for s in scaler.signals)


def _same(spelled: str, name: str) -> bool:
    """Whether a scaler's spelling names the engine metric ``name``: as it is, as an adapter renames
    it (``vllm_num_requests_waiting``), or without the engine's prefix when the scaler reads the
    engine's pods itself (AIBrix's ``targetMetric: kv_cache_usage_perc``)."""
    plain, full = spelled.replace(":", "_"), name.replace(":", "_")
    return plain in (full, full + "_total") or (":" not in spelled and name.partition(":")[2] in (spelled, spelled.removesuffix("_total")))


def engine_family(metric: str) -> tuple[str, str] | None:
    """(engine id, quantity) of an engine metric (``vllm:num_requests_waiting`` -> ("vllm", "waiting")),
    under its own or an adapter's spelling; None for any other metric."""
    for record in ENGINES:
        for family, names in record.metrics.items():
            if any(_same(metric, n) for n in names):
                return record.id, family
    return None


def retired_metric(metric: str) -> tuple[str, str, Retired] | None:
    """(engine display name, metric, what became of it) for a metric its engine no longer exports."""
    for record in ENGINES:
        for name, retired in record.retired_metrics.items():
            if _same(metric, name):
                return record.display, name, retired
    return None


def waiting_metric(engine: str | None) -> str:
    """The engine's queue-depth gauge (vLLM's when the engine is not known)."""
    for record in ENGINES:
        if record.id == (engine or "vllm") and "waiting" in record.metrics:
            return record.metrics["waiting"][0]
    return "vllm:num_requests_waiting"


def startup_s(log_facts: LogFacts | None) -> tuple[float, str]:
    """How long a replica takes to serve after it starts, and what says so: the startup log's
    engine initialisation (a lower bound: the weights' download and the API server's start come
    on top), else ``DEFAULT_STARTUP_S``."""
    measured = log_facts.value("init_engine_s") if log_facts is not None else None
    if isinstance(measured, int | float) and measured > 0:
        return float(measured), f"at least {measured:.0f} s (the startup log's engine initialisation)"
    return DEFAULT_STARTUP_S, f"{DEFAULT_STARTUP_S:.0f} s assumed (no startup log: --log would measure it)"


def queue_signal(scaler: Scaler, engine: str | None = None, target: int = QUEUE_TARGET) -> str:
    """The queue-depth signal in the scaler's own product's words, with a per-replica target."""
    return BY_ID[scaler.product].queue_signal.format(metric=waiting_metric(engine), target=target)


def rescan(expect: str) -> str:
    """The verify text of a scaling remediation: the changed object read again first, then a whole
    ``diagnose`` under the incident's load. Not ``rerun``'s ``verify REPORT``: a scaling finding may
    come from ``llm-doctor scaling`` (manifests, no probe, so no report of a probe to re-run), and
    what an autoscaler does (replicas held through a lull) does not show in one short probe."""
    return ("read the changed object again first (`kubectl get ... -o yaml | llm-doctor scaling -`): this finding "
            f"should be gone; then re-run `llm-doctor diagnose` under the incident's load after changing only this; "
            f"expect {expect}")


def scaler_fire(title: str, faults: Sequence[ScalerFault], expect: str, *, severity: Severity = Severity.WARNING,
                evidence: Sequence[EvidenceValue] = (), felt: bool = False) -> Fire:
    """One finding naming every object at fault; the remediation is the first's."""
    first = faults[0]
    named = "; ".join(f"{f.scaler.label}: {f.why}" for f in faults)
    others = f" ({len(faults) - 1} more object(s) listed above)" if len(faults) > 1 else ""
    values = [EvidenceValue(f"{f.scaler.label} {f.where}", f.current, source=f.scaler.source) for f in faults]
    return Fire(
        title=title,
        summary=named,
        remediation=Remediation(setting=first.where, suggested=first.suggested, current=first.current,
                                why=first.why + others, verify=rescan(expect),
                                where=f"{first.scaler.label} ({first.scaler.source})"),
        severity=severity,
        evidence=[*values, *evidence],
        felt=felt,
    )
