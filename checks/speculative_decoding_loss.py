"""Speculative decoding accepts too few draft tokens to pay for itself while TPOT is over budget.

What it detects:
Speculative decoding is on (the startup log's `speculative_config`, `speculative_model` or
`num_speculative_tokens`, or vLLM's spec-decode counters in /metrics), the share of draft tokens
the target model accepted over the metrics window
(`vllm:spec_decode_num_accepted_tokens_total` / `vllm:spec_decode_num_draft_tokens_total`
deltas) is below `min_acceptance`, and what users felt between tokens (the worst TPOT p90 of
the probe or the server's inter-token histogram) is over `tpot_target_s`.

Why it matters:
Every step, the draft proposes `num_speculative_tokens` tokens and the target model verifies them
all in one forward pass: a wider, slower step, plus the draft's own passes. It pays only when
enough drafts are accepted to emit several tokens per step. With a low acceptance rate the wider
step and the draft passes cost more than the few extra tokens give back, so decoding is slower
than without it, and TPOT is exactly the latency that suffers.

Evidence:
Metrics window: spec-decode draft, accepted and draft-count deltas (the mean acceptance length,
1 + accepted / drafts, where vLLM V1 counts drafts). Startup log (or run record):
`speculative_config` and `num_speculative_tokens`. User felt: TPOT p90 per witness.

Remediation:
Lower `num_speculative_tokens` to the draft positions still accepted at least `min_position_acceptance`
of the time, estimated from the window's rate with the usual model of one acceptance rate per
position (position j is reached with probability a^j); when not even the first position is
worth drafting, turn speculative decoding off (drop `--speculative-config`).

Options:
tpot_target_s: the inter-token target (defaults to --tpot-budget)
min_acceptance: accepted / draft tokens below which drafting is judged a loss
min_position_acceptance: acceptance a draft position needs to be kept in the suggestion
min_draft_tokens: fewer draft tokens in the window are too few to judge

Example:
LD209 speculative-decoding-loss: 18 % of 24,000 draft tokens accepted (num_speculative_tokens 5,
1.9 tokens per step) while TPOT p90 is 82 ms over the 50 ms budget -> num_speculative_tokens 5 ->
off.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import Setting, engine_setting, rerun_gated, vllm_flag
from doctor.derive.log_facts import LogFacts
from doctor.derive.metrics_window import MetricsWindow
from doctor.derive.user_felt import UserFelt, Witness
from doctor.evidence import RunRecord
from doctor.foundation.units import fmt_pct, fmt_seconds
from doctor.model import EvidenceValue, Remediation, Severity, SymptomClass

#: Startup-log facts any one of which says speculative decoding was configured.
_SPEC_FACTS = ("speculative_config", "speculative_model", "num_speculative_tokens")


@dataclass(frozen=True)
class Found:
    """The drafts over the window: tokens drafted and accepted, drafts (V1), the acceptance rate,
    the draft length (configured, else the counters'), and the witness with the worst TPOT p90."""

    drafted: float
    accepted: float
    drafts: float | None
    rate: float
    k: int | None
    k_setting: Setting | None
    witness: Witness | None
    tpot: float


@check(code="LD209", name="speculative-decoding-loss", symptom=SymptomClass.INTER_TOKEN, cause="decode")
def speculative_decoding_loss(
    metrics_window: MetricsWindow,
    user_felt: UserFelt,
    log_facts: LogFacts | None = None,
    run: RunRecord | None = None,
    *,
    tpot_target_s: float = 0.05,
    min_acceptance: float = 0.5,
    min_position_acceptance: float = 0.5,
    min_draft_tokens: float = 100.0,
) -> Result:
    configured = next((s for name in _SPEC_FACTS if (s := engine_setting(name, log_facts, run)) is not None), None)
    drafted, accepted = metrics_window.spec_draft_tokens, metrics_window.spec_accepted_tokens
    if drafted is None or accepted is None:
        if configured is None:
            return NotApplicable("speculative decoding is off (no speculative_config in the log, no spec-decode counters)")
        return NotApplicable("speculative decoding is configured but /metrics has no spec-decode counters")
    if drafted < min_draft_tokens:
        return NotApplicable(_too_few_drafts(drafted, min_draft_tokens))
    k_setting = engine_setting("num_speculative_tokens", log_facts, run)
    worst = _worst_tpot(user_felt)
    found = Found(
        drafted=drafted, accepted=accepted, drafts=metrics_window.spec_drafts, rate=accepted / drafted,
        k=_draft_length(k_setting.value if k_setting is not None else None, drafted, metrics_window.spec_drafts),
        k_setting=k_setting, witness=worst[0] if worst is not None else None,
        tpot=worst[1] if worst is not None else 0.0,
    )
    if found.rate >= min_acceptance:
        return Pass(_accepted(found))
    if found.witness is None:
        return NotApplicable(_no_witness(found))
    if found.tpot <= tpot_target_s:
        return Pass(_within_budget(found, tpot_target_s))
    return Fire(
        title="Speculative decoding accepts too few drafts to pay for itself",
        summary=_summary(found, tpot_target_s),
        remediation=_remediation(found, _keep(found.rate, found.k, min_position_acceptance), tpot_target_s,
                                 min_acceptance, min_position_acceptance),
        severity=Severity.WARNING,
        evidence=_evidence(found),
    )


def _draft_length(configured: object, drafted: float, drafts: float | None) -> int | None:
    """Draft tokens per step: the configured value, else the counters' draft tokens / drafts (V1)."""
    if isinstance(configured, int) and not isinstance(configured, bool) and configured > 0:
        return configured
    if drafts:
        return max(1, round(drafted / drafts))
    return None


def _worst_tpot(user_felt: UserFelt) -> tuple[Witness, float] | None:
    """The witness whose TPOT p90 is surely highest (a histogram's lower bucket bound)."""
    felt = [(w, w.tpot.p90_low) for w in user_felt.witnesses if w.tpot is not None and w.tpot.n > 0]
    return max(felt, key=lambda pair: pair[1]) if felt else None


def _per_position_acceptance(rate: float, k: int) -> float:
    """The per-position acceptance ``a`` whose k-token drafts accept ``rate`` of their tokens.

    Under one acceptance rate per position, a draft of ``k`` accepts on average
    ``a + a^2 + ... + a^k`` tokens, so the window's rate is that sum / k; it grows with ``a``,
    and bisection finds ``a`` (there is no closed form for k > 2).
    """
    low, high = 0.0, 1.0
    for _ in range(60):
        mid = (low + high) / 2
        if sum(mid**j for j in range(1, k + 1)) / k < rate:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def _keep(rate: float, k: int | None, min_position: float) -> tuple[float, int] | None:
    """(per-position acceptance, draft positions to keep: those accepted at least ``min_position``
    of the time, fewer than ``k``; 0: none), or ``None`` when the draft length is unknown."""
    if k is None:
        return None
    a = _per_position_acceptance(rate, k)
    return a, (min(k - 1, math.floor(math.log(min_position) / math.log(a))) if 0 < a < 1 else 0)


def _too_few_drafts(drafted: float, min_draft_tokens: float) -> str:
    return f"only {drafted:,.0f} draft tokens in the window ({min_draft_tokens:,.0f} needed to judge)"


def _accepted(found: Found) -> str:
    per_step = f", {1 + found.accepted / found.drafts:.1f} tokens per step" if found.drafts else ""
    return (f"{fmt_pct(found.rate)} of {found.drafted:,.0f} draft tokens accepted "
            f"(num_speculative_tokens {found.k if found.k is not None else 'unknown'}{per_step})")


def _no_witness(found: Found) -> str:
    return _accepted(found) + "; no witness of TPOT to weigh it against"


def _seen_by(found: Found) -> str:
    return found.witness.label if found.witness is not None else ""


def _within_budget(found: Found, tpot_target_s: float) -> str:
    return (f"{_accepted(found)}, but TPOT p90 {fmt_seconds(found.tpot)} is within the {fmt_seconds(tpot_target_s)} "
            f"budget, as {_seen_by(found)} saw it")


def _summary(found: Found, tpot_target_s: float) -> str:
    return (f"{_accepted(found)} while TPOT p90 is {fmt_seconds(found.tpot)}, over the {fmt_seconds(tpot_target_s)} "
            f"budget, as {_seen_by(found)} saw it")


def _evidence(found: Found) -> list[EvidenceValue]:
    witness = found.witness
    evidence = [
        EvidenceValue("draft acceptance rate", round(found.rate, 4), "", "metrics: spec_decode accepted / draft token deltas"),
        EvidenceValue("draft tokens", found.drafted, "tokens", "metrics: vllm:spec_decode_num_draft_tokens_total delta"),
        EvidenceValue("accepted tokens", found.accepted, "tokens",
                      "metrics: vllm:spec_decode_num_accepted_tokens_total delta"),
        EvidenceValue("TPOT p90", round(found.tpot, 4), "s",
                      f"{_seen_by(found)}, n={witness.tpot.n if witness is not None and witness.tpot else 0}"),
    ]
    if found.drafts:
        evidence.append(EvidenceValue("drafts", found.drafts, "drafts", "metrics: vllm:spec_decode_num_drafts_total delta"))
    if found.k_setting is not None:
        evidence.append(found.k_setting.evidence("num_speculative_tokens"))
    return evidence


def _suggestion(keep: tuple[float, int] | None, k: int | None, min_position: float) -> tuple[str, str]:
    if keep is None or k is None:
        return "fewer (or off)", "The draft length is not in the log: halve it, or turn drafting off and compare."
    a, positions = keep
    reach = f"{fmt_pct(a)} per position: position 1 is accepted {fmt_pct(a)} of the time, position {k} {fmt_pct(a**k)}"
    if positions < 1:
        return ("off (drop --speculative-config)",
                f"That is {reach}; not even the first draft position is accepted {fmt_pct(min_position)} of the time.")
    return (f"{positions} (positions accepted at least {fmt_pct(min_position)} of the time)",
            f"That is {reach}; positions beyond {positions} are accepted less than {fmt_pct(min_position)} of the time.")


def _remediation(found: Found, keep: tuple[float, int] | None, tpot_target_s: float, min_acceptance: float,
                 min_position: float) -> Remediation:
    k = found.k
    suggested, why_k = _suggestion(keep, k, min_position)
    return Remediation(
        setting="num_speculative_tokens",
        suggested=suggested,
        current=str(k) if k is not None else None,
        where=vllm_flag("speculative_config") + " (its num_speculative_tokens)",
        why=(f"each step drafts {k or 'several'} tokens and the target model verifies them in one wider pass, "
             f"but only {fmt_pct(found.rate)} are kept: the drafting and the wider step cost more than the rejected "
             f"positions give back, and TPOT is over budget. {why_k}"),
        verify=rerun_gated(f"TPOT p90 under {fmt_seconds(tpot_target_s)}, and an acceptance rate at or above "
                           f"{fmt_pct(min_acceptance)} if drafting stays on"),
    )
