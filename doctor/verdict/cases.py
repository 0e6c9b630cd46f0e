"""What the decision hands to its wording: why a symptom was chosen, the trade-off of a compound
incident, why no latency was measured. Types only.

This is the seam ruff draws between a rule's logic and its ``Violation::message()``: the decision
(``doctor.verdict.decide``, ``doctor.verdict.remedy``) fills these in and never builds a
sentence; the wording (``doctor.verdict.wording``, ``doctor.verdict.headline``) reads them and
never decides.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from doctor.model import Finding, Symptom
from doctor.verdict.felt import Felt


class Why(Enum):
    """Why the symptom is what it is (``decide.symptom_of``)."""

    BURSTS = "the gateway bursts and its TTFT is a multiple of the direct one's"
    GATEWAY_ALONE = "the engine is within budget and the gateway path is not"
    GATEWAY_MAJORITY = "the gateway holds most of the first-token time"
    ONLY_GATEWAY_CHECKS = "only the gateway was measured and only gateway checks fired"
    ONLY_GATEWAY_UNEXPLAINED = "only the gateway was measured and no check explains it"
    ONLY_GATEWAY_BOTH = "only the gateway was measured and gateway and engine checks fired"
    KV_PREEMPTION = "the KV cache ran out: preemption both freezes answers and queues requests"
    FIRST_TOKEN = "the excess lies before the first token"
    BETWEEN_TOKENS = "the excess lies between tokens"


@dataclass
class Decision:
    """The symptom, the witness that decided it, why, and the finding the reason names (``KV_PREEMPTION``)."""

    symptom: Symptom
    decider: Felt
    why: Why
    finding: Finding | None = None


class TradeKind(Enum):
    """How one knob (``remedy.TRADE_KNOB``) trades a first-token symptom against answers' freezes."""

    FREEZES = "inter-token verdict: lowering it shortens the freezes, at the long prompts' TTFT"
    RAISE = "a prefill, queue or transport finding stays the change; raising it would lengthen the freezes"
    LOWER = "the knob is the change: lowering it starts waiting requests sooner and ends the freezes"


@dataclass
class Trade:
    """A compound incident: the prefill-interference finding naming the knob, beside ``primary``."""

    kind: TradeKind
    interference: Finding
    primary: Finding | None


class NoLatency(Enum):
    """Why no request's latency was measured while the stream probe ran."""

    INTERRUPTED = "the run was interrupted before any request completed"
    DEADLINE = "the user's --deadline cut every request"
    FAILING = "the paths failed"
    ALL_FAILED = "every probe request failed"
