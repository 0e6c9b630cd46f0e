"""The streams' longest stalls sat behind other requests' prefills, named request by request.

What it detects:
Prefill interference seen in the engine's own spans: joined with the engine's span of every
request in the window (``request_hops``), the longest gap between two tokens of the probe's
slowest streams (at or above the p90 of every request's longest gap) was covered by the prefill of
other requests, whose spans say when their prompt was computed, how long it took and how many
tokens it had; the gap was several times the stream's usual gap, and the largest prompt computed
meanwhile several times the stream's own (a pause of the whole engine also lengthens the prefill
window of whatever small prompt was in it, and is LD210's). Only where the change cuts something:
with the prompts computed during each stall together no longer than the step budget it would set,
or the budget at its floor, the check passes saying so (``checklib.step_budget``).

Why it matters:
The probe's streams alone can only say that gaps ended as another request started; the server's
histograms only that some steps were long. The spans name the prompts that held the streams:
which requests, their size, and that the stall lasted exactly their prefill. A user's answer that
pauses for seconds while another user's long prompt is computed is what this stall is.

Evidence:
request_hops: each slow stream's longest stall (seconds, after which token, its usual gap) and the
requests whose prefill covered it (the engine's request id, prompt tokens, prefill seconds, the
overlap). Startup log / run record: ``chunked_prefill``, ``max_num_batched_tokens``.

Remediation:
Lower ``max_num_batched_tokens`` (to 2048 when above it, else halve it, at least 512) so the long
prompts are cut into smaller chunks that each hold the streams less (TTFT of long prompts rises a
little); with chunked prefill off, turn it on (``enable_chunked_prefill``).

Options:
covered_share: the share of a stall that other requests' prefills must cover
stall_factor: a stall is long at this many times the stream's usual gap
min_stall_s: and at least this long
prompt_factor: the largest prompt computed during it must have this many times the stream's own prompt tokens

Example:
The longest stall of 5 requests (5.08 s after token 51; its usual gap 52 ms) sat behind the
prefill of another user's request cmpl-75c3 (1,837 prompt tokens, prefill 5.08 s, covering all
of it); max_num_batched_tokens 2048 -> 1024.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import (
    StepBudget,
    step_budget,
    step_budget_evidence,
    step_budget_idle,
    step_budget_in_use,
    step_budget_remediation,
)
from doctor.derive.engine import UNIDENTIFIED, EngineIdentity
from doctor.derive.log_facts import LogFacts
from doctor.derive.request_hops import RequestHops, RequestHopsView
from doctor.derive.request_stalls import Behind, Stall
from doctor.evidence import RunRecord
from doctor.foundation.units import fmt_pct, fmt_seconds
from doctor.model import Cause, EvidenceValue, Severity, SymptomClass

#: The stalls named in the summary and the evidence, the longest first.
SHOWN = 3


@dataclass(frozen=True)
class Stalled:
    """One slow stream's longest stall and the request it sat behind most."""

    request: RequestHops
    stall: Stall
    behind: Behind


@dataclass(frozen=True)
class Found:
    """What the check found: the long stalls others' prefills covered, among how many."""

    stalled: list[Stalled]  # the slowest streams' long stalls that others' prefills covered
    long: int  # the slowest streams' stalls long enough to count
    slow: int  # the slowest streams (their longest stall at or above the p90)
    every: list[Stalled]  # every request's long stall others' prefills covered, the longest first
    requests: int  # the requests whose longest stall was measured


@check(code="LD213", name="slow-stalls-behind-prefills", symptom=SymptomClass.INTER_TOKEN,
       cause=Cause.PREFILL_INTERFERENCE)
def slow_stalls_behind_prefills(
    request_hops: RequestHopsView,
    log_facts: LogFacts | None = None,
    run: RunRecord | None = None,
    engine: EngineIdentity = UNIDENTIFIED,
    *,
    covered_share: float = 0.5,
    stall_factor: float = 4.0,
    min_stall_s: float = 0.1,
    prompt_factor: float = 4.0,
) -> Result:
    view = request_hops
    slow = [(view.requests[i], stall) for i in view.stalled if (stall := view.requests[i].stall) is not None]
    if not slow:
        raise NotApplicable(_no_stall())
    measured = sorted(((row, stall) for row in view.requests if (stall := row.stall) is not None),
                      key=lambda rs: -rs[1].seconds)

    def is_long(stall: Stall) -> bool:
        return stall.seconds >= max(min_stall_s, stall_factor * stall.usual)

    def long_prompt(row: RequestHops, stall: Stall) -> bool:
        largest = stall.behind[0].prompt_tokens if stall.behind else None
        return largest is not None and (row.prompt_tokens is None or largest >= prompt_factor * row.prompt_tokens)

    def behind(pairs: list[tuple[RequestHops, Stall]]) -> list[Stalled]:
        return [Stalled(row, stall, stall.behind[0]) for row, stall in pairs
                if is_long(stall) and stall.covered >= covered_share and long_prompt(row, stall)]

    long = [(row, stall) for row, stall in slow if is_long(stall)]
    if not long:
        return Pass(_none_long(slow[0][1], stall_factor, min_stall_s))
    found = Found(stalled=behind(long), long=len(long), slow=len(slow), every=behind(measured), requests=len(measured))
    if 2 * len(found.stalled) < found.long:
        return Pass(_not_behind(found, covered_share))
    budget = step_budget(log_facts, run, _largest_step(found.stalled))
    if not budget.cuts:
        return Pass(step_budget_idle(budget, "the prompts the engine's spans computed during each stall"))
    return Fire(
        title="The streams' longest stalls sat behind other requests' prefills",
        summary=_summary(found, budget),
        remediation=step_budget_remediation(budget, engine.id,
                                            "the longest stalls in the per-request join (--otlp-listen) to shrink"),
        severity=Severity.WARNING,
        evidence=[*_evidence(found), *step_budget_evidence(budget)],
    )


def _largest_step(stalled: list[Stalled]) -> int | None:
    """The most prompt tokens any stall's steps can have held: every prompt computed during it, when
    the spans name each one's size (``None``: one is unknown, or more overlapped than were kept)."""
    sizes = [[b.prompt_tokens for b in s.stall.behind] for s in stalled]
    if any(None in size or len(size) < s.stall.prefills for size, s in zip(sizes, stalled, strict=True)):
        return None
    return max((sum(t for t in size if t is not None) for size in sizes), default=None)


def _no_stall() -> str:
    return "no probe request streamed two tokens and had its engine span: no stall to place"


def _none_long(longest: Stall, stall_factor: float, min_stall_s: float) -> str:
    return (f"the longest stall, {fmt_seconds(longest.seconds)} (usual gap {fmt_seconds(longest.usual)}), is under "
            f"{stall_factor:g} times its stream's usual gap or {fmt_seconds(min_stall_s)}: no stall stands out")


def _not_behind(found: Found, covered_share: float) -> str:
    return (f"{len(found.stalled)} of the {found.long} long stall(s) of the slowest streams sat behind a long prompt "
            f"(other requests' prefills over {fmt_pct(covered_share)} of the stall, the largest several times the "
            "stream's own): the rest were mostly something else (an engine-wide pause, LD210; preemption, LD201; "
            "the client)")


def _whose(behind: Behind) -> str:
    who = "the probe's own request" if behind.probe else "another user's request"
    tokens = f"{behind.prompt_tokens:,} prompt tokens, " if behind.prompt_tokens is not None else ""
    return f"{who} {behind.request_id or '(no id)'} ({tokens}prefill {fmt_seconds(behind.prefill)})"


def _one(s: Stalled) -> str:
    computed = _whose(s.behind) if s.stall.prefills == 1 else (
        f"{s.stall.prefills} other prompts, the largest: {_whose(s.behind)}, over "
        f"{fmt_pct(s.behind.overlap / s.stall.seconds)} of it")
    return (f"request {s.request.index} ({s.request.path}): {fmt_seconds(s.stall.seconds)} after token "
            f"{s.stall.after_token}, its usual gap {fmt_seconds(s.stall.usual)}; {fmt_pct(s.stall.covered)} of it while "
            f"the engine computed {computed}")


def _summary(found: Found, budget: StepBudget) -> str:
    head = (f"{len(found.stalled)} of the {found.slow} slowest stream(s) stalled behind other requests' prefills, "
            f"and {len(found.every)} of all {found.requests} streams' longest stalls did: ")
    in_use = step_budget_in_use(budget)
    tail = f"; {in_use}" if in_use else ""
    return head + "; ".join(_one(s) for s in found.every[:SHOWN]) + tail


def _evidence(found: Found) -> list[EvidenceValue]:
    return [EvidenceValue(f"request {s.request.index} ({s.request.path}) stall", round(s.stall.seconds, 6), "s",
                          f"request_hops: after token {s.stall.after_token}, behind {_whose(s.behind)}")
            for s in found.every[:SHOWN]]
