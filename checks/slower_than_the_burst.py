"""The autoscaler cannot add a replica before the burst is over.

What it detects:
The queue grew for less time than the scaler takes to bring a replica: its reaction (the
scaler's polling, the HPA controller's 15 s sync, the scale-up stabilisation window) plus a
replica's start-up (the startup log's engine initialisation, a lower bound, else a stated
default of minutes), against how long the engine's waiting gauge rose over the window (from the
first sample with a queue to its peak: scrapes during the probe, or Prometheus history).

Why it matters:
A burst shorter than the scaler's reaction plus a start-up is over before the replica serves:
the users of the burst wait whatever the scaler's signal, and lowering thresholds only adds
replicas that arrive too late (field notes S3: p95 TTFT 2 s to 14 s for 20 minutes while new
replicas loaded).

Evidence:
scalers: each engine scaler's polling, scale-up window and floor; log_facts: the start-up;
metrics_window: the waiting gauge's samples (a burst that rose and fell back within the window;
one still growing when the window closed is not judged).

Remediation:
A warm floor one replica higher (the burst's replica already running), or a faster start-up
(weights cached on the node, a smaller image); not a lower threshold.

Example:
ScaledObject serving/vllm: the queue grew for 40 s; a replica comes after 45 s of reaction and
at least 62 s of start-up -> spec.minReplicaCount: 2.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.checking.contract import NotApplicable, Pass, Result, check
from doctor.checklib import ScalerFault, scaler_fire, scalers_of, startup_s
from doctor.derive.log_facts import LogFacts
from doctor.derive.metrics_window import MetricsWindow
from doctor.model import Cause, EvidenceValue, SymptomClass
from doctor.scalers.model import Knob, Scaler, ScalingView


def queue_growth_s(metrics_window: MetricsWindow) -> tuple[float, float] | None:
    """(seconds the waiting gauge rose, its peak): from the first sample with a queue to the peak, for
    a burst that ended inside the window (a later sample at half the peak or less); None otherwise: a
    queue still growing when the window closed says nothing of how long the burst lasts."""
    samples = metrics_window.waiting.samples if metrics_window.waiting is not None else []
    queued = [(t, v) for t, v in samples if v > 0]
    if not queued:
        return None
    start = queued[0][0]
    peak_t, peak = max(queued, key=lambda s: (s[1], -s[0]))
    if not any(t > peak_t and v <= peak / 2 for t, v in samples):
        return None
    return peak_t - start, peak


def reaction_s(scaler: Scaler) -> float:
    """The scaler's own delay before it asks for a replica: its polling and the scale-up window."""
    polling = scaler.polling_s.seconds() if scaler.polling_s is not None else None
    window = scaler.scale_up_s.seconds() if scaler.scale_up_s is not None else None
    return (polling or 0.0) + (window or 0.0)


@dataclass(frozen=True)
class TooSlow:
    """A scaler whose reaction (``react`` seconds) plus a replica's start-up outlasts the burst, and its floor."""

    scaler: Scaler
    floor: Knob
    replicas: int
    react: float


@dataclass(frozen=True)
class Burst:
    """How long the queue grew, its peak, and a replica's start-up (and where that was read)."""

    grew: float
    peak: float
    start: float
    said: str


@check(code="LD611", name="slower-than-the-burst", symptom=SymptomClass.SCALING, cause=Cause.SCALING)
def slower_than_the_burst(scalers: ScalingView, metrics_window: MetricsWindow, log_facts: LogFacts | None = None) -> Result:
    judged = scalers_of(scalers)
    growth = queue_growth_s(metrics_window)
    if growth is None:
        raise NotApplicable("no burst began and ended in the window (nothing waited, or the queue had not fallen back)")
    burst = Burst(*growth, *startup_s(log_facts))
    slow = []
    for scaler in judged:
        react = reaction_s(scaler)
        if react + burst.start <= burst.grew or scaler.floor is None or scaler.floor.number() is None:
            continue
        slow.append(TooSlow(scaler, scaler.floor, int(scaler.floor.number() or 0), react))
    if not slow:
        return Pass(_outlasted(burst))
    return scaler_fire("The burst is over before a new replica serves", [_said(s, burst) for s in slow],
                       "the burst's requests answered by the warm replicas, its first tokens at the steady TTFT",
                       evidence=_evidence(burst))


def _outlasted(burst: Burst) -> str:
    return f"the queue grew for {burst.grew:.0f} s, longer than each scaler's reaction plus a start-up"


def _said(slow: TooSlow, burst: Burst) -> ScalerFault:
    return ScalerFault(slow.scaler, slow.floor.path, str(slow.replicas), str(slow.replicas + 1),
                       f"the queue grew for {burst.grew:.0f} s (to {burst.peak:.0f} waiting); a replica comes after "
                       f"{slow.react:.0f} s of reaction and {burst.said} of start-up: the burst is over before it serves")


def _evidence(burst: Burst) -> list[EvidenceValue]:
    return [EvidenceValue("queue growth", round(burst.grew, 1), "s", "metrics window: waiting gauge"),
            EvidenceValue("replica start-up", round(burst.start, 1), "s", burst.said)]
