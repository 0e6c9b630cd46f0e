"""The verdict's one summary sentence, for each way the decision can end: what users felt (and who
saw it), where the time went, and the one change to make, with the numbers.

Built from the phrases of ``doctor.verdict.wording``; the decision (``doctor.verdict.decide``)
picks which sentence applies and passes what it found. ``failed`` and ``suspect`` are the run's
own notes (``wording.failed_note``, ``wording.suspect_note``), appended where the sentence needs them.
"""

from __future__ import annotations

from doctor.evidence.stream import ProbePath
from doctor.foundation.units import fmt_pct, fmt_seconds
from doctor.model import Budgets, Component, Finding, Symptom
from doctor.verdict.cases import NoLatency, Trade
from doctor.verdict.failures import Failing
from doctor.verdict.felt import Bursts, Felt, SoFar, Unshown
from doctor.verdict.split import Split
from doctor.verdict.wording import (
    COMPONENT_PHRASES,
    also,
    bursts_text,
    failing_text,
    fix,
    freeze_text,
    review,
    so_far_text,
    split_whole,
    tpot_text,
    trade_text,
    ttft_text,
    unshown_text,
    warmup_text,
    who,
)

#: First-token components measured inside the server, whose shares the checks quote of the server's TTFT.
SERVER_PARTS = ("queue", "prefill")

NOTHING_MEASURED = ("Inconclusive: no streamed request was measured and no server histogram saw enough requests, "
              "so what users feel is unknown.")


def gateway_fails(failing: Failing, direct: Felt, primary: Finding | None, suspect: str) -> str:
    return (f"Proxy-only: {failing_text(failing)}, while direct requests succeed "
            f"({ttft_text(direct)}){fix(primary)}{suspect}.")


def bursts_within(bursts: Bursts, primary: Finding | None, failed: str, suspect: str) -> str:
    return f"Proxy-only: within budget, but {bursts_text(bursts)}{fix(primary)}{failed}{suspect}."


def finding_within(symptom: Symptom, user: Felt, top: Finding, severe: list[Finding], failed: str, suspect: str) -> str:
    """Every witness within budget, and a felt finding of a latency class decides."""
    within = ttft_text(user) + (f", {tpot_text(user)}" if user.witness.tpot is not None else "")
    return (f"{symptom.value.capitalize()}: {user.witness.label} within budget ({within}), but {top.code} "
            f"({top.severity.value}): {top.summary}{fix(top)}{also(symptom, severe)}{failed}{suspect}.")


def failing_within(worst: Failing, primary: Finding | None, suspect: str) -> str:
    return (f"Not healthy: {failing_text(worst)}; the requests that succeeded were within budget"
            f"{fix(primary)}{suspect}.")


def healthy(user: Felt, felts: list[Felt], so_far: SoFar | None, budgets: Budgets, findings: list[Finding],
            failed: str, suspect: str) -> str:
    """Within every budget on every witness ("so far" when the run ended before it could show it)."""
    tpot = f" and {tpot_text(user)}" if user.witness.tpot is not None else ""
    lead = f"Within budget so far: {so_far_text(so_far)}; " if so_far else "Healthy: "
    return (f"{lead}{ttft_text(user)}{tpot} are within the {fmt_seconds(budgets.ttft_s)} / "
            f"{fmt_seconds(budgets.tpot_s)} budgets on {' and '.join(f.witness.label for f in felts)}"
            f"{failed}{review(findings)}{suspect}.")


def unshown(gap: Unshown, budgets: Budgets, failed: str, suspect: str) -> str:
    """Within budget on every witness, and none shows the first token within it (a tight --deadline)."""
    text = unshown_text(gap, budgets).removesuffix(": not a conclusive healthy verdict")
    return f"Inconclusive: {text}, so whether the first token is within budget is unknown{failed}{suspect}."


def inconclusive(user: Felt, failed: str, suspect: str) -> str:
    return (f"Inconclusive: the {user.path} path is over budget ({ttft_text(user)}) but the evidence "
            f"cannot tell the gateway from the engine{failed}{suspect}.")


def finding_unmeasured(symptom: Symptom, top: Finding) -> str:
    """No request measured, but a felt finding of a latency class speaks."""
    return (f"{symptom.value.capitalize()}: no request was measured, but {top.code} ({top.severity.value}) "
            f"found {top.summary}{fix(top)}.")


def no_latency(why: NoLatency, failed: int, cut: int, failing: list[Failing], primary: Finding | None,
               suspect: str, warmups: dict[str, float], budgets: Budgets) -> str:
    """The probe ran, and no request after the warm-up gave a latency: interrupted, cut by the user's
    deadline, failed; the warm-up's first token, when it came, is said with its number."""
    if why is NoLatency.INTERRUPTED:
        text = "the run was interrupted before any request completed" + (f" ({failed} failed)" if failed else "")
    elif why is NoLatency.DEADLINE:
        text = (f"the --deadline cut {cut} request(s) before they finished (censored then, not failed by the "
                "server)" + (f"; {failed} failed" if failed else ""))
    elif why is NoLatency.FAILING:
        text = "; ".join(failing_text(f) for f in failing)
    else:
        text = "every probe request" + (" after the warm-up" if warmups else "") + " failed"
    warm = warmup_text(warmups, budgets)
    measured = f"; only the warm-up measured a first token: {warm}" if warm else ", so no latency was measured"
    return f"Inconclusive: {text}{measured}{fix(primary)}{suspect}."


def over_budget(symptom: Symptom, probe: dict[str, Felt], decider: Felt, budgets: Budgets,
                dominant: Component | None, split: Split, primary: Finding | None, server_ttft: float | None,
                first_token: Felt, trade: Trade | None, severe: list[Finding], failed: str, suspect: str) -> str:
    """One sentence with the numbers: what users felt (and who saw it), where it went, what to change.

    An inter-token verdict decided by a preemption finding while every witnessed gap stayed
    within budget (``decide.symptom_of``) leads with what was over, the first-token wait: the
    headline never quotes only numbers within budget for an incident."""
    if symptom is Symptom.PROXY_ONLY:
        gw, direct = probe.get(ProbePath.GATEWAY), probe.get(ProbePath.DIRECT)
        what = f"gateway {ttft_text(gw)}" if gw is not None else ttft_text(decider)
        if direct is not None:
            what += f" vs direct {ttft_text(direct)}"
        what += f", budget {fmt_seconds(budgets.ttft_s)}"
    elif symptom is Symptom.INTER_TOKEN:
        if decider.freeze_excess > decider.tpot_excess and decider.froze:
            inner = f"{freeze_text(decider, budgets)} ({tpot_text(decider)} vs budget {fmt_seconds(budgets.tpot_s)})"
        else:
            inner = f"{tpot_text(decider)} vs budget {fmt_seconds(budgets.tpot_s)}"
        what = f"{who(decider)}: {inner}"
        if decider.inter_excess <= 0 < first_token.ttft_excess:
            where = "" if first_token is decider else f" ({who(decider)})"
            what = (f"{who(first_token)}: {ttft_text(first_token)} vs budget {fmt_seconds(budgets.ttft_s)}, the KV "
                    f"cache running out (preempted requests wait again); between tokens{where} {inner}")
    else:
        what = f"{who(decider)}: {ttft_text(decider)} vs budget {fmt_seconds(budgets.ttft_s)}"
    if decider.witness.server and probe:
        own = probe.get(ProbePath.DIRECT) or probe.get(ProbePath.GATEWAY)
        if own is not None:
            what += f" (the probe's own {own.path} requests: {ttft_text(own)}" + (
                f", {tpot_text(own)})" if symptom is Symptom.INTER_TOKEN else ")")
    if dominant is not None and dominant.share is not None and symptom is not Symptom.PROXY_ONLY:
        phrase = COMPONENT_PHRASES.get(dominant.name, dominant.name)
        share, whole = dominant.share, split_whole(split)
        if dominant.name in SERVER_PARTS and server_ttft:
            # the share the queue and prefill checks quote: of the server's own TTFT, one number for one thing
            share, whole = min((dominant.seconds or 0.0) / server_ttft, 1.0), f"the server's TTFT mean {fmt_seconds(server_ttft)}"
        what += f"; {fmt_pct(share)} of {whole} is {phrase}"
    change = fix(primary) or "; no check explains it"
    return (f"{symptom.value.capitalize()}: {what}{change}" + (f"; {trade_text(trade)}" if trade else "")
            + also(symptom, severe) + failed + suspect + ".")
