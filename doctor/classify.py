"""The classifier: which symptom dominates, why (with numbers), and the ONE remediation.

Pure function of the evidence views and the check results. It compares what users felt
(client TTFT / TPOT per path) with the budgets, and attributes the excess to the component
the findings explain; the primary remediation comes from the finding explaining the dominant
cause, the other findings are listed below it by the renderers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from doctor.model import CheckResult, Finding, Outcome, Symptom, SymptomClass, Verdict

if TYPE_CHECKING:
    from doctor.runner import Evidence


@dataclass
class Budgets:
    """What users should feel: the usual interactive-chat targets by default."""

    ttft_s: float = 0.5
    tpot_s: float = 0.05


def _fmt_s(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


def _primary(findings: list[Finding], symptom: SymptomClass) -> Finding | None:
    matching = [f for f in findings if f.symptom == symptom]
    return max(matching, key=lambda f: f.severity.rank, default=None)


def classify(evidence: Evidence, results: list[CheckResult], budgets: Budgets) -> Verdict:
    findings = [r.finding for r in results if r.outcome is Outcome.FINDING and r.finding]
    stats = evidence.maybe("stream_stats")
    budget_map = {"ttft_s": budgets.ttft_s, "tpot_s": budgets.tpot_s}
    if stats is None:
        return Verdict(
            symptom=Symptom.INCONCLUSIVE,
            summary="No streamed request was measured, so what users feel is unknown.",
            missing=["stream probe (--engine and/or --gateway)"],
            budgets=budget_map,
        )
    reasoning: list[str] = []
    over: dict[str, bool] = {}
    for name, ps in stats.paths.items():
        if ps.ttft.n == 0:
            reasoning.append(f"{name}: no successful request ({ps.n_failed} failed)")
            continue
        ttft = ps.ttft.p90 or 0.0
        tpot = ps.tpot.p90 or 0.0
        over[name] = ttft > budgets.ttft_s or tpot > budgets.tpot_s
        reasoning.append(
            f"{name}: TTFT p90 {_fmt_s(ttft)} (n={ps.ttft.n}) vs budget {_fmt_s(budgets.ttft_s)}; "
            f"TPOT p90 {_fmt_s(tpot)} vs budget {_fmt_s(budgets.tpot_s)}"
        )
    if not over:
        return Verdict(
            symptom=Symptom.INCONCLUSIVE,
            summary="Every probe request failed; see the error findings.",
            reasoning=reasoning,
            missing=["one successful streamed request"],
            budgets=budget_map,
        )
    if over.get("gateway") and over.get("direct") is False:
        symptom, cls = Symptom.PROXY_ONLY, SymptomClass.PROXY_ONLY
    elif any(over.values()):
        path = stats.path("direct") or next(iter(stats.paths.values()))
        ttft_excess = (path.ttft.p90 or 0) - budgets.ttft_s
        tpot_excess = ((path.tpot.p90 or 0) - budgets.tpot_s) * max(path.tpot.n, 1)
        if ttft_excess >= tpot_excess:
            symptom, cls = Symptom.PRE_FIRST_TOKEN, SymptomClass.PRE_FIRST_TOKEN
        else:
            symptom, cls = Symptom.INTER_TOKEN, SymptomClass.INTER_TOKEN
    else:
        return Verdict(
            symptom=Symptom.HEALTHY,
            summary="Within budget on every measured path. " + reasoning[0],
            reasoning=reasoning,
            budgets=budget_map,
        )
    primary = _primary(findings, cls)
    return Verdict(
        symptom=symptom,
        summary=f"{symptom.value}: " + "; ".join(reasoning),
        reasoning=reasoning,
        primary_remediation=primary.remediation if primary else None,
        primary_code=primary.code if primary else None,
        budgets=budget_map,
    )
