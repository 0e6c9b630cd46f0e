"""The answers gate's decision: PASS, FAIL or ABSTAIN, each with the reasons that made it.

Never "safe to ship": PASS says that nothing these prompts can show moved beyond the baseline's
own noise. The rules, in order (``decide``):

FAIL when any of:
  - the candidate gives no answer (an error) to a prompt the baseline answered;
  - an empty answer where the baseline's was not, or a self-repeating one more repetitive than the
    baseline's by ``REPEAT_MARGIN`` (a baseline half a loop already crosses the bar by noise);
  - the share of answers cut by ``length`` grows by more than ``LENGTH_MARGIN`` of the prompts;
  - JSON that no longer parses, on a prompt that asks for JSON and where the baseline's parsed;
  - a tool call whose name or canonical arguments changed, where the baseline's repeats agree;
  - teacher-forced: the mean KL estimate per token above ``max(KL_MEAN_MAX, FLOOR_FACTOR x floor)``,
    or its 99th percentile above ``max(KL_P99_MAX, FLOOR_FACTOR x the floor's)`` (InferPilot's
    thresholds, with the baseline's repeats as the floor: a candidate is judged by what the
    baseline's own nondeterminism produces, not by zero).

ABSTAIN (cannot tell) when nothing failed and any of:
  - fewer than ``MIN_PROMPTS`` prompts answered by both;
  - the baseline's own repeats differ on more than half of the prompts (its seed or temperature 0
    is not honoured: no difference can be read against it), or its teacher-forced floor is above
    ``FLOOR_MAX``;
  - the candidate's repeats differ on more than half of the prompts, and on more than the
    baseline's by over ``LENGTH_MARGIN`` of them (it ignores the seed: a sampling engine's repeats
    differ on nearly every prompt). Fewer is the same noise the baseline shows: on a CPU build the
    same weights' repeats differed on 2 and on 5 of 18 prompts, batch by batch;
  - teacher-forced scoring ran but scored fewer than ``MIN_TOKENS`` comparable tokens.

Otherwise PASS. Where the engine cannot score prompts, the structural checks alone decide and
the reasons say so: text that differs is listed, never a failure by itself (greedy output moves
under harmless changes; ``doctor.verify.scoring``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from doctor.foundation.strenum import StrEnum
from doctor.foundation.units import fmt_pct
from doctor.verify.answers import REPEAT_MARGIN, REPEAT_SHARE, Answer, first_difference, repeat_share
from doctor.verify.prompts import Prompt
from doctor.verify.scoring import PromptScore, Scored

#: The smallest set of prompts answered by both that can pass.
MIN_PROMPTS = 8
#: The growth of the share cut by ``length`` (and of prompts answered unlike themselves) that is more than chance.
LENGTH_MARGIN = 0.125
#: InferPilot's teacher-forced thresholds: mean KL per token and its 99th percentile.
KL_MEAN_MAX = 0.01
KL_P99_MAX = 0.1
#: How many times the baseline's own KL a candidate may show before the difference is its own.
FLOOR_FACTOR = 3.0
#: A baseline floor above this is too noisy to judge anything against.
FLOOR_MAX = 0.1
#: Comparable reference tokens under which the teacher-forced estimate is too thin to decide.
MIN_TOKENS = 200


class Decision(StrEnum):
    """What a half of ``verify`` concluded."""

    PASS = "PASS"
    FAIL = "FAIL"
    ABSTAIN = "ABSTAIN"  # cannot tell


@dataclass
class PromptRow:
    """One prompt, baseline against candidate: the answers, whether the baseline was stable, the
    first difference, the structural problems found and the teacher-forced score."""

    prompt_id: str
    kind: str
    baseline: Answer
    candidate: Answer | None
    stable: bool  # the baseline's repeats all gave the same answer
    candidate_stable: bool | None = None  # None: the candidate answered once
    problems: list[str] = field(default_factory=list)
    difference: tuple[int, str, str] | None = None  # word index, baseline's word, candidate's word
    score: PromptScore | None = None

    @property
    def differs(self) -> bool:
        return self.candidate is not None and self.candidate.signature() != self.baseline.signature()


@dataclass
class Half:
    """What every half of ``verify`` says (answers, long context, latency): its decision, the reasons
    that made it, and notes that decide nothing; each half adds what it measured."""

    decision: Decision
    reasons: list[str]
    notes: list[str] = field(default_factory=list)


@dataclass
class AnswersVerdict(Half):
    """The answers half: notes on the models, tokenizers and what the engine could not do, one row
    per prompt and the teacher-forced pool."""

    rows: list[PromptRow] = field(default_factory=list)
    scored: Scored | None = None


def modal(answers: list[Answer]) -> tuple[Answer, bool]:
    """The baseline's most common answer and whether every repeat gave it."""
    ok = [a for a in answers if a.ok]
    if not ok:
        return answers[0], False
    counts = Counter(a.signature() for a in ok)
    top, n = counts.most_common(1)[0]
    return next(a for a in ok if a.signature() == top), n == len(answers)


def _problems(prompt: Prompt, base: Answer, cand: Answer, stable: bool) -> list[str]:
    """What is structurally wrong with ``cand`` that was not with ``base``."""
    if not cand.ok:
        return [f"no answer: {cand.error}"]
    found = []
    if cand.empty and not base.empty:
        found.append("empty answer")
    looped = repeat_share(cand.text)
    if looped > REPEAT_SHARE and looped - repeat_share(base.text) > REPEAT_MARGIN:
        found.append("self-repeating answer")
    if prompt.expects_json and not prompt.expects_tool and base.json_valid() and not cand.json_valid():
        found.append("JSON that does not parse")
    if prompt.expects_tool and stable and cand.tools() != base.tools():
        names = ([c.name for c in base.tool_calls], [c.name for c in cand.tool_calls])
        found.append("tool call changed: " + (f"{names[0]} -> {names[1]}" if names[0] != names[1]
                                              else f"{', '.join(base.tools())} -> {', '.join(cand.tools()) or 'none'}"))
    return found


def rows_for(prompts: list[Prompt], baseline: dict[str, list[Answer]], candidate: dict[str, list[Answer]],
             scored: Scored | None = None) -> list[PromptRow]:
    """One ``PromptRow`` per prompt the baseline has answers for."""
    scores = {s.prompt_id: s for s in scored.prompts} if scored else {}
    rows = []
    for prompt in prompts:
        if not baseline.get(prompt.id):
            continue
        base, stable = modal(baseline[prompt.id])
        cands = candidate.get(prompt.id) or []
        cand = cands[0] if cands else None
        row = PromptRow(prompt.id, prompt.kind, base, cand, stable, score=scores.get(prompt.id))
        if len(cands) > 1:
            row.candidate_stable = len({a.signature() for a in cands}) == 1
        if cand is not None and base.ok:
            row.problems = _problems(prompt, base, cand, stable)
            if cand.ok and not cand.tool_calls:
                row.difference = first_difference(base.text, cand.text)
        rows.append(row)
    return rows


def bars(scored: Scored) -> tuple[float, float]:
    """The bars the pooled KL is held to: (mean, p99), each the fixed threshold or ``FLOOR_FACTOR`` x the floor's."""
    return max(KL_MEAN_MAX, FLOOR_FACTOR * (scored.floor_mean or 0.0)), max(KL_P99_MAX, FLOOR_FACTOR * (scored.floor_p99 or 0.0))


def _teacher_forced(scored: Scored | None, reasons: list[str], abstain: list[str], notes: list[str]) -> None:
    if scored is None or scored.unavailable:
        notes.append(f"teacher-forced scoring: {scored.unavailable if scored else 'not run'}; "
                     "the structural checks alone decide")
        return
    if scored.kl_mean is None:
        not_compared = [p for p in scored.prompts if p.why]
        abstain.append("teacher-forced scoring compared no token"
                       + (f" ({not_compared[0].prompt_id}: {not_compared[0].why})" if not_compared else ""))
        return
    floor, floor_p99 = scored.floor_mean or 0.0, scored.floor_p99 or 0.0
    mean_bar, p99_bar = bars(scored)
    said = (f"teacher-forced KL per token {scored.kl_mean:.4f} (p99 {scored.kl_p99:.4f}) over {scored.tokens} tokens, "
            f"baseline floor {floor:.4f} (p99 {floor_p99:.4f})")
    if scored.kl_mean > mean_bar or (scored.kl_p99 or 0.0) > p99_bar:
        which = "mean" if scored.kl_mean > mean_bar else "p99"
        reasons.append(f"{said}: the {which} is above its bar ({mean_bar if which == 'mean' else p99_bar:.4f})")
    elif floor > FLOOR_MAX:
        abstain.append(f"{said}: the baseline disagrees with itself too much to judge against (floor above {FLOOR_MAX})")
    elif scored.tokens < MIN_TOKENS:
        abstain.append(f"{said}: under the {MIN_TOKENS} tokens that can decide")
    else:
        notes.append(f"{said}: within max({KL_MEAN_MAX}, {FLOOR_FACTOR:g}x floor)")


def decide(prompts: list[Prompt], baseline: dict[str, list[Answer]], candidate: dict[str, list[Answer]],
           scored: Scored | None) -> AnswersVerdict:
    """The answers half's verdict (the rules of the module docstring)."""
    rows = rows_for(prompts, baseline, candidate, scored)
    reasons: list[str] = []
    abstain: list[str] = []
    notes: list[str] = _identities(rows)
    failed = [r for r in rows if r.problems]
    for row in failed[:5]:
        reasons.append(f"{row.prompt_id}: {'; '.join(row.problems)}")
    if len(failed) > 5:
        reasons.append(f"... and {len(failed) - 5} more prompts with problems")
    both = [r for r in rows if r.baseline.ok and r.candidate is not None and r.candidate.ok]
    cut_base = sum(r.baseline.cut for r in both)
    cut_cand = sum(r.candidate.cut for r in both if r.candidate is not None)
    if both and (cut_cand - cut_base) / len(both) > LENGTH_MARGIN:
        reasons.append(f"cut by length: {fmt_pct(cut_cand / len(both))} of the candidate's answers against "
                       f"{fmt_pct(cut_base / len(both))} of the baseline's")
    _teacher_forced(scored, reasons, abstain, notes)
    if len(both) < MIN_PROMPTS:
        abstain.append(f"{len(both)} prompts answered by both: at least {MIN_PROMPTS} are needed")
    unstable = [r for r in rows if not r.stable]
    if rows and len(unstable) > len(rows) / 2:
        abstain.append(f"the baseline answers {len(unstable)} of {len(rows)} prompts differently between its own "
                       "repeats: its seed or temperature 0 is not honoured, and no difference can be read against it")
    cand_unstable = [r for r in rows if r.candidate_stable is False]
    if rows and len(cand_unstable) > len(rows) / 2 and (len(cand_unstable) - len(unstable)) / len(rows) > LENGTH_MARGIN:
        abstain.append(f"the candidate answers {len(cand_unstable)} prompts differently between its own repeats "
                       f"where the baseline does {len(unstable)}: it seems to ignore the seed")
    differed = [r for r in both if r.differs]
    if differed:
        notes.append(f"{len(differed)} of {len(both)} answers differ in text from the baseline's "
                     f"({sum(not r.stable for r in differed)} of them on prompts the baseline itself answers unstably)")
    decision = Decision.FAIL if reasons else Decision.ABSTAIN if abstain else Decision.PASS
    if decision is Decision.PASS:
        reasons = [f"{len(both)} prompts: no structural problem"
                   + ("" if scored is None or scored.unavailable else ", teacher-forced KL within the floor's bar")]
    return AnswersVerdict(decision, reasons or abstain, notes, rows, scored)


def _identities(rows: list[PromptRow]) -> list[str]:
    """What tells the two endpoints apart besides their answers: the model names, and the tokenizers
    (the same prompt counted as another number of tokens)."""
    notes = []
    base_models = {r.baseline.model for r in rows if r.baseline.model}
    cand_models = {r.candidate.model for r in rows if r.candidate is not None and r.candidate.model}
    if base_models and cand_models and base_models != cand_models:
        notes.append(f"different models: the baseline answers as {', '.join(sorted(base_models))}, "
                     f"the candidate as {', '.join(sorted(cand_models))}")
    counted = [(r.prompt_id, r.baseline.prompt_tokens, r.candidate.prompt_tokens) for r in rows
               if r.candidate is not None and r.baseline.prompt_tokens is not None and r.candidate.prompt_tokens is not None]
    unlike = [c for c in counted if c[1] != c[2]]
    if unlike:
        pid, b, c = unlike[0]
        notes.append(f"different tokenizers (or templates): {len(unlike)} of {len(counted)} prompts counted differently "
                     f"({pid}: {b} tokens on the baseline, {c} on the candidate)")
    return notes
