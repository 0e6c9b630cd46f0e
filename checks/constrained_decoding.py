"""Every constrained request is slower per token than the same prompt unconstrained, or a
tool-call stream falls silent while the engine keeps generating.

What it detects:
Constrained decoding: with a constrained ``--payload`` (a JSON-schema ``response_format``,
``tools``, ``guided_json``), the constrained requests' time per output token against the
payload's unconstrained twins on the same engine; and, in a tool-call stream, a silence that
ends with one event carrying many tokens: the engine generated them while the tool-call parser
held the argument back.

Why it matters:
Structured output masks the vocabulary at every decode step; the mask is built on the CPU, and
a slow backend, a complex schema or a CPU-starved scheduler makes every constrained token
slower (steady, unlike a schema's one-time compile, LD108). Tool-call parsers that wait for a
whole argument before sending it turn a steady stream into one long silence and a burst
(vllm PR#50627: longest silence 32 s, one delta), which users read as a hang.

Evidence:
stream: time per output token (after the first event) of the measured constrained requests
against ``controls``, the payload's unconstrained twins the probe sent first; the tool-call
stream's longest gap and the tokens its next event carried (continuous usage stats, so the
engine's generation counted them). metrics (the raw scrapes): the engine's generation-token
counter between scrapes inside that gap, for a server that reports no per-chunk usage;
metrics_window: preemptions (a preempted stream is silent on its own: LD201).

Remediation:
Steady: choose the structured-output backend with the cheapest per-token mask, xgrammar
(vLLM's ``--structured-outputs-config '{"backend": "xgrammar"}'``; ``guidance`` for schemas it
cannot take), with ``disable_any_whitespace`` for JSON. Held-back tool arguments: the
``--tool-call-parser`` for the model that streams arguments as they are generated (or a newer
vLLM's).

Options:
tpot_target_s: the inter-token target (defaults to --tpot-budget)
slowdown: constrained over unconstrained time per token at which it fires
held_tokens: tokens one event must carry after a tool-call silence to count as held back
ttft_target_s: the first-token target (defaults to --ttft-budget), which a tool-call silence is held
    to, as any freeze inside an answer: a shorter one is a risk, not felt latency

Example:
constrained 84 ms per token (n=8) against 31 ms unconstrained (n=1): 2.7x slower while
decoding to the schema.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import ConstrainedRun, constrained_run, engine_flag, generated_within, per_token, rerun
from doctor.derive.engine import UNIDENTIFIED, EngineIdentity
from doctor.derive.metrics_window import MetricsWindow
from doctor.engines.names import VLLM
from doctor.evidence import MetricsEvidence, RequestTrace, StreamEvidence
from doctor.foundation.units import fmt_seconds
from doctor.model import Cause, EvidenceValue, Remediation, SymptomClass


@dataclass(frozen=True)
class HeldBack:
    """The tool-call stream's longest silence (``gap``) in which the engine generated: the event after
    it ``carried`` that many tokens, else the generation counter rose ``generated`` inside it; against
    the unconstrained twins' time per token (over ``controls`` twins)."""

    gap: float
    carried: int | None
    generated: float | None
    trace: RequestTrace
    twin_s: float
    controls: int


@dataclass(frozen=True)
class Slower:
    """Constrained time per token against the unconstrained twins' (medians over ``n`` and ``twins``)."""

    constrained_s: float
    n: int
    twin_s: float
    twins: int
    constraints: tuple[str, ...]

    @property
    def ratio(self) -> float:
        return self.constrained_s / self.twin_s if self.twin_s > 0 else 0.0


@check(code="LD212", name="constrained-decoding", symptom=SymptomClass.INTER_TOKEN, cause=Cause.STRUCTURED_OUTPUT)
def constrained_decoding(
    stream: StreamEvidence,
    metrics_window: MetricsWindow | None = None,
    metrics: MetricsEvidence | None = None,
    engine: EngineIdentity = UNIDENTIFIED,
    *,
    tpot_target_s: float = 0.05,
    slowdown: float = 1.5,
    held_tokens: int = 8,
    ttft_target_s: float = 0.5,
) -> Result:
    run = constrained_run(stream)
    preempted = bool(metrics_window is not None and metrics_window.preemptions)
    held = _held_back(run, held_tokens, metrics, preempted)
    if held is not None:
        return Fire(
            title="The tool-call parser holds arguments back while the engine generates them",
            summary=_held_summary(held),
            remediation=_held_remediation(engine.id),
            felt=held.gap > ttft_target_s,  # a silence inside an answer is held to the first-token budget
            evidence=_held_evidence(held),
        )
    measured = [t for r in run.constrained if not r.warmup and (t := per_token(r)) is not None]
    twins = [t for r in run.controls if (t := per_token(r)) is not None]
    if not measured or not twins:
        return NotApplicable("too few tokens per request to time constrained against unconstrained decoding")
    found = Slower(statistics.median(measured), len(measured), statistics.median(twins), len(twins),
                   tuple(run.constraints))
    if found.ratio < slowdown:
        return Pass(_compared(found))
    if found.constrained_s <= tpot_target_s:
        return Pass(_within_target(found, tpot_target_s))
    return Fire(
        title="Constrained decoding is slower per token than the same prompt unconstrained",
        summary=_summary(found),
        remediation=_remediation(engine.id),
        evidence=_evidence(found),
    )


def _held_back(run: ConstrainedRun, held_tokens: int, metrics: MetricsEvidence | None,
               preempted: bool) -> HeldBack | None:
    """The tool-call stream's longest silence, longer than ``held_tokens`` of the twin's tokens, in which
    the engine generated: the event after it carried ``held_tokens`` or more (its usage counted them), or
    the engine's generation counter rose that much between scrapes inside it (not with preemptions,
    which silence a stream on their own: LD201)."""
    if not run.tools:
        return None
    twins = [t for t in (per_token(r) for r in run.controls) if t is not None]
    if not twins:
        return None
    twin_s = statistics.median(twins)
    worst: HeldBack | None = None
    for r in run.constrained:
        for before, after in zip(r.tokens, r.tokens[1:], strict=False):
            gap = after.t - before.t
            if gap < held_tokens * twin_s or (worst is not None and gap <= worst.gap):
                continue
            generated = None if preempted else generated_within(metrics, before.t, after.t)
            if after.tokens >= held_tokens:
                worst = HeldBack(gap, after.tokens, None, r, twin_s, len(run.controls))
            elif generated is not None and generated >= held_tokens:
                worst = HeldBack(gap, None, generated, r, twin_s, len(run.controls))
    return worst


def _held_summary(held: HeldBack) -> str:
    how = (f"then one event carrying {held.carried} tokens" if held.carried is not None
           else f"while the engine's generation counter rose {held.generated:.0f} tokens")
    return (f"{held.trace.path} request {held.trace.index}: silent {fmt_seconds(held.gap)}, {how} (unconstrained twin "
            f"{fmt_seconds(held.twin_s)} per token): the argument was generated during the silence and sent at once")


def _held_remediation(engine: str) -> Remediation:
    return Remediation(
        setting="tool_call_parser",
        suggested="the model's parser that streams arguments as they are generated (or a vLLM whose parser does)",
        why=("the engine generated during the silence (its usage or its generation counter says so); only the "
             "tool-call parser stood between those tokens and the stream"),
        verify=rerun("the tool-call stream's longest gap near the unconstrained time per token"),
        where=engine_flag(engine, "tool_call_parser"),
    )


def _held_evidence(held: HeldBack) -> list[EvidenceValue]:
    return [
        EvidenceValue("longest tool-call silence", held.gap, "s", f"stream: {held.trace.path} request {held.trace.index}"),
        EvidenceValue("unconstrained time per token", held.twin_s, "s", f"stream: controls, n={held.controls}"),
    ]


def _compared(found: Slower) -> str:
    return (f"constrained {fmt_seconds(found.constrained_s)} per token (n={found.n}) against "
            f"{fmt_seconds(found.twin_s)} unconstrained (n={found.twins}): {found.ratio:.1f}x")


def _within_target(found: Slower, tpot_target_s: float) -> str:
    return _compared(found) + f"; within the {fmt_seconds(tpot_target_s)} target"


def _summary(found: Slower) -> str:
    return _compared(found) + f" slower while decoding to the schema ({', '.join(found.constraints)})"


def _remediation(engine: str) -> Remediation:
    return Remediation(
        setting="structured_outputs_config",
        suggested=('the grammar backend "xgrammar" without free whitespace in JSON'
                   + (' (--structured-outputs-config \'{"backend": "xgrammar", "disable_any_whitespace": true}\')'
                      if engine == VLLM else "") + '; "guidance" for schemas xgrammar cannot take'),
        why=("every constrained token cost more than the same prompt's free tokens on the same engine: the "
             "per-step vocabulary mask, not the prompt, the batch or the gateway"),
        verify=rerun("constrained time per token near the unconstrained twin's"),
        where=engine_flag(engine, "structured_outputs_config"),
    )


def _evidence(found: Slower) -> list[EvidenceValue]:
    return [
        EvidenceValue("constrained time per token", found.constrained_s, "s", f"stream: median, n={found.n}"),
        EvidenceValue("unconstrained time per token", found.twin_s, "s", f"stream: controls, n={found.twins}"),
        EvidenceValue("constraints", ", ".join(found.constraints), "", "run: the --payload body"),
    ]
