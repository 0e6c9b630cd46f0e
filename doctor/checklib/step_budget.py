"""What other requests' prefills stalling running streams ask for: a smaller step budget.

vLLM computes prompts in the same steps as the running streams' next tokens; a step carries up to
``max_num_batched_tokens`` prompt tokens, so its length is what every running stream waits when a
long prompt arrives. Both checks that see it (LD202 from the probe's streams and the server's
histograms, LD213 from the engine's span of each request) name the same lever: with chunked prefill
off, turn it on; else cut the budget (to ``TARGET_BATCHED_TOKENS`` when above it, else halve it, at
least ``MIN_BATCHED_TOKENS``). Decided by ``step_budget``, worded by ``step_budget_remediation``
and ``step_budget_evidence``; public through ``doctor.checklib``.

The lever acts only where it cuts something: a budget already at its floor is not lowered, and a
step budget above the longest prompt cuts no prompt into chunks. Short prompts on a slow engine (a
CPU build computes a 150-token prompt in 0.4 s) stall the running streams for as long as each
prefill takes, whatever the budget: ``StepBudget.cuts`` says so, and the checks pass with
``step_budget_idle``'s words instead of naming a change that would change nothing. Several short
prompts arriving in one step can still add up past the budget; the largest prompt cannot show that,
so a finding that needs it stays with the stalls the probe's own streams or spans place.
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
    """The step-budget settings in use, and the ``max_num_batched_tokens`` to suggest (``None``:
    chunked prefill is off, turn it on first)."""

    chunked: Setting | None
    batched: Setting | None
    target: int | None

    @property
    def smallest(self) -> int:
        """The smallest step budget the change can bring: its target where the budget in use is known,
        ``TARGET_BATCHED_TOKENS`` where chunked prefill is turned on, and with the budget unknown
        ``MIN_BATCHED_TOKENS`` (it may be small already, and no change this lever names goes lower)."""
        if self.target is None:
            return TARGET_BATCHED_TOKENS
        return self.target if self.batched is not None else MIN_BATCHED_TOKENS

    @property
    def lowers(self) -> bool:
        """Whether the change lowers the budget in use (not at its floor already, or chunking off)."""
        return self.target is None or self.batched is None or self.target < int(self.batched.value)

    def cuts(self, largest_prompt: float | None) -> bool:
        """Whether the change cuts a prompt of ``largest_prompt`` tokens (``None``: not known) into shorter steps."""
        return self.lowers and (largest_prompt is None or largest_prompt > self.smallest)


def step_budget(log_facts: LogFacts | None, run: RunRecord | None) -> StepBudget:
    """The step-budget settings in use (startup log, then run record) and the change that shortens each stall."""
    chunked = engine_setting("chunked_prefill", log_facts, run)
    batched = engine_setting("max_num_batched_tokens", log_facts, run)
    if chunked is not None and not chunked.value:
        return StepBudget(chunked, batched, None)
    current = int(batched.value) if batched is not None else None
    target = TARGET_BATCHED_TOKENS if current is None or current > TARGET_BATCHED_TOKENS \
        else max(current // 2, MIN_BATCHED_TOKENS)
    return StepBudget(chunked, batched, target)


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


def step_budget_idle(budget: StepBudget, largest_prompt: float | None, source: str) -> str:
    """Why the change would not shorten the stalls (``StepBudget.cuts`` was false): the budget is at its
    floor, or no prompt (at most ``largest_prompt`` tokens, read from ``source``) is longer than it."""
    if not budget.lowers and budget.batched is not None:
        return (f"max_num_batched_tokens {int(budget.batched.value)} is already at or below {MIN_BATCHED_TOKENS}: "
                "a smaller step budget is not the lever")
    return (f"the longest prompt was at most {largest_prompt:,.0f} tokens ({source}), within {budget.smallest}, the "
            "smallest step budget the change can set: smaller chunks would shorten no prefill, so each stall is a "
            "whole prompt's prefill on this engine")


def step_budget_in_use(budget: StepBudget) -> str:
    """The summary's words for the settings in use: "chunked prefill off", "max_num_batched_tokens 2048", or ""."""
    if budget.target is None:
        return "chunked prefill off"
    return f"max_num_batched_tokens {int(budget.batched.value)}" if budget.batched is not None else ""
