"""What other requests' prefills stalling running streams ask for: a smaller step budget.

vLLM computes prompts in the same steps as the running streams' next tokens; a step carries up to
``max_num_batched_tokens`` prompt tokens, so its length is what every running stream waits when a
long prompt arrives. Both checks that see it (LD202 from the probe's streams and the server's
histograms, LD213 from the engine's span of each request) name the same lever: with chunked prefill
off, turn it on; else cut the budget (to ``TARGET_BATCHED_TOKENS`` when above it, else halve it, at
least ``MIN_BATCHED_TOKENS``). Decided by ``step_budget``, worded by ``step_budget_remediation``
and ``step_budget_evidence``; public through ``doctor.checklib``.

A smaller budget acts only where it cuts something: a budget already at its floor is not lowered,
and a budget no engine step reached cuts no step (one long prompt, or several short ones that
arrived together). Short prompts on a slow engine (a CPU build computes a 150-token prompt in
0.4 s) stall the running streams for as long as each prefill takes, whatever the budget:
``StepBudget.cuts`` says so from the largest step (vLLM's tokens-per-step histogram, or the
prompts the engine's spans computed during a stall), which also bounds a budget the log does not
give (it is at least the largest step), and the checks pass with
``step_budget_idle``'s words instead of naming a change that would change nothing. Turning chunked
prefill on always changes the steps (a prompt no longer runs in a step of its own, as long as the
model), so it is never judged idle.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.checklib.engine_settings import Setting, engine_setting
from doctor.checklib.remediation import engine_flag, rerun
from doctor.derive.log_facts import LogFacts
from doctor.evidence import RunRecord
from doctor.model import EvidenceValue, Remediation

#: The step budget suggested when the current one is larger (vLLM's default for most GPUs).
TARGET_BATCHED_TOKENS = 2048
MIN_BATCHED_TOKENS = 512


@dataclass(frozen=True)
class StepBudget:
    """The step-budget settings in use, the largest engine step seen (tokens, ``None``: not known),
    and the ``max_num_batched_tokens`` to suggest (``None``: chunked prefill is off, turn it on first)."""

    chunked: Setting | None
    batched: Setting | None
    largest_step: float | None
    target: int | None

    @property
    def lowers(self) -> bool:
        """Whether the change lowers the budget in use: turning chunked prefill on, or a target under it
        (a budget at ``MIN_BATCHED_TOKENS`` or below is not lowered)."""
        return self.target is None or self.batched is None or self.target < int(self.batched.value)

    @property
    def cuts(self) -> bool:
        """Whether the change shortens a step: turning chunked prefill on always does; a smaller budget
        where a step (or, not known, any step) was larger than it."""
        if self.target is None:
            return True
        return self.lowers and (self.largest_step is None or self.largest_step > self.target)


def step_budget(log_facts: LogFacts | None, run: RunRecord | None, largest_step: float | None) -> StepBudget:
    """The step-budget settings in use (startup log, then run record) and the change that shortens each
    stall. With the budget in use unknown it is at least the largest step: a step of at most
    ``TARGET_BATCHED_TOKENS`` is then halved, at least to ``MIN_BATCHED_TOKENS``."""
    chunked = engine_setting("chunked_prefill", log_facts, run)
    batched = engine_setting("max_num_batched_tokens", log_facts, run)
    if chunked is not None and not chunked.value:
        return StepBudget(chunked, batched, largest_step, None)
    current = int(batched.value) if batched is not None else None
    if current is None and largest_step is not None and largest_step <= TARGET_BATCHED_TOKENS:
        current = int(largest_step)
    target = TARGET_BATCHED_TOKENS if current is None or current > TARGET_BATCHED_TOKENS \
        else max(current // 2, MIN_BATCHED_TOKENS)
    return StepBudget(chunked, batched, largest_step, target)


def step_budget_remediation(budget: StepBudget, engine: str, expect: str) -> Remediation:
    """The change for ``engine``; ``expect`` is what the re-run should show (the check's own measure of the stalls)."""
    if budget.target is None:
        return Remediation(
            setting="enable_chunked_prefill",
            suggested=f"true, with max_num_batched_tokens {TARGET_BATCHED_TOKENS}",
            why="without chunked prefill a whole prompt runs in one step and every running stream waits for it",
            verify=rerun(f"{expect}; TTFT of long prompts may rise a little"),
            current="false",
            where=engine_flag(engine, "enable_chunked_prefill"),
        )
    current = int(budget.batched.value) if budget.batched is not None else None
    return Remediation(
        setting="max_num_batched_tokens",
        suggested=str(budget.target),
        why=("a step carrying a prefill chunk of up to max_num_batched_tokens tokens stalls every running "
             "stream; smaller chunks spread the prompt over more, shorter steps"),
        verify=rerun(f"{expect} and TPOT p90 to fall; TTFT of long prompts may rise a little"),
        current=str(current) if current is not None else None,
        where=engine_flag(engine, "max_num_batched_tokens"),
    )


def step_budget_evidence(budget: StepBudget) -> list[EvidenceValue]:
    """The settings the change was read from, each with its source."""
    return [setting.evidence(name) for name, setting in
            (("chunked_prefill", budget.chunked), ("max_num_batched_tokens", budget.batched)) if setting is not None]


def step_budget_idle(budget: StepBudget, source: str) -> str:
    """Why the change would not shorten the stalls (``StepBudget.cuts`` was false): the budget is at its
    floor, or no step (its largest read from ``source``) was larger than a cut leaves."""
    if not budget.lowers and budget.batched is not None:
        return (f"max_num_batched_tokens {int(budget.batched.value)} is already at or below {MIN_BATCHED_TOKENS}: "
                "a smaller step budget is not the lever")
    within = (f"within {budget.target}, the budget the change would set from {int(budget.batched.value)}"
              if budget.batched is not None else f"no more than {MIN_BATCHED_TOKENS}, the lowest budget this lever sets")
    return (f"no engine step held more than {budget.largest_step or 0:,.0f} tokens ({source}), {within}: a smaller "
            "budget would cut no step, so each stall is a whole prefill, as long as this engine takes to compute it")


def step_budget_in_use(budget: StepBudget) -> str:
    """The summary's words for the settings in use: "chunked prefill off", "max_num_batched_tokens 2048", or ""."""
    if budget.target is None:
        return "chunked prefill off"
    return f"max_num_batched_tokens {int(budget.batched.value)}" if budget.batched is not None else ""
