"""Teacher-forced scoring: both configurations score the same reference tokens, compared against
the baseline's own repeats.

Comparing generated text is the wrong gate: a numerics change that is harmless (speculative
decoding, another batch composition) moves greedy output at its last bit, and one changed token
changes every token after it. Scoring instead feeds both configurations the *same* tokens (the
prompt followed by the baseline's answer) and compares the log-probability each gives every
token, which no cascade can reach.

Per token, with ``d = log q(x) - log p(x)`` (candidate minus baseline, on the baseline's token
``x``), the KL estimate is ``exp(d) - 1 - d``: Schulman's k3 estimator of KL(p || q), never
negative, zero only where the two agree, and second order in ``d`` as the KL is. It sees only the
reference token's probability (engines return that one cheaply), so it is an estimate of the
divergence along the answer, not the full divergence over the vocabulary.

The floor is the same estimate between the baseline's own repeats (the first against each
other): what the baseline's nondeterminism alone produces. A candidate is judged by how far it
is beyond that (``doctor.verify.gate``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from doctor.foundation.stats import quantile


@dataclass(frozen=True)
class TokenScores:
    """The reference tokens of one prompt and the log-probability one endpoint gave each (the
    answer's part of the scored sequence, as the endpoint tokenised it)."""

    tokens: tuple[int, ...]
    logprobs: tuple[float, ...]

    def to_json(self) -> dict[str, list[int] | list[float]]:
        return {"tokens": list(self.tokens), "logprobs": list(self.logprobs)}


def token_kl(reference: TokenScores, other: TokenScores) -> list[float] | None:
    """The per-token KL estimate of ``other`` against ``reference``; None when they scored different
    tokens (another tokenizer, or another template: nothing to compare position by position)."""
    if reference.tokens != other.tokens:
        return None
    out = []
    for p, q in zip(reference.logprobs, other.logprobs, strict=True):
        d = max(min(q - p, 50.0), -50.0)  # a -inf or absurd log-prob must not overflow exp
        out.append(math.expm1(d) - d)
    return out


def mean_delta(reference: TokenScores, other: TokenScores) -> float | None:
    """Mean log-prob change per reference token (negative: the candidate finds the baseline's answer less likely)."""
    if reference.tokens != other.tokens or not reference.tokens:
        return None
    return sum(q - p for p, q in zip(reference.logprobs, other.logprobs, strict=True)) / len(reference.tokens)


@dataclass
class PromptScore:
    """One prompt's teacher-forced comparison: the candidate's mean KL estimate per token, the
    baseline's own (the floor, the largest over its repeats), and the mean log-prob change."""

    prompt_id: str
    tokens: int
    kl: float | None  # None: the candidate scored other tokens, or did not score
    floor: float | None  # None: fewer than two baseline scorings
    delta: float | None = None
    why: str | None = None  # why ``kl`` is None


@dataclass
class Scored:
    """The teacher-forced half over every prompt: per prompt, and pooled over all reference tokens."""

    prompts: list[PromptScore] = field(default_factory=list)
    kl_mean: float | None = None  # over every scored token of every prompt
    kl_p99: float | None = None
    floor_mean: float | None = None
    floor_p99: float | None = None
    tokens: int = 0
    unavailable: str | None = None  # "not available on this engine: ..." when nothing was scored


def score(prompt_id: str, baseline: list[TokenScores], candidate: TokenScores | None) -> tuple[PromptScore, list[float], list[float]]:
    """(the prompt's score, the candidate's per-token KL, the floor's per-token KL) for one prompt.

    ``baseline``: its scorings of its own answer, the first the reference; the floor is the
    largest KL of the others against it (a repeat that scored other tokens is left out).
    """
    reference = baseline[0]
    floors = [kl for repeat in baseline[1:] if (kl := token_kl(reference, repeat)) is not None]
    floor_tokens = max(floors, key=lambda k: sum(k), default=[])
    floor = sum(floor_tokens) / len(floor_tokens) if floor_tokens else (0.0 if floors else None)
    if candidate is None:
        return PromptScore(prompt_id, len(reference.tokens), None, floor, why="the candidate did not score it"), [], floor_tokens
    kl = token_kl(reference, candidate)
    if kl is None:
        why = (f"the candidate scored {len(candidate.tokens)} tokens where the baseline scored "
               f"{len(reference.tokens)}" if len(candidate.tokens) != len(reference.tokens)
               else "the candidate scored other token ids (another tokenizer)")
        return PromptScore(prompt_id, len(reference.tokens), None, floor, why=why), [], floor_tokens
    mean = sum(kl) / len(kl) if kl else 0.0
    return PromptScore(prompt_id, len(kl), mean, floor, mean_delta(reference, candidate)), kl, floor_tokens


def pooled(rows: list[tuple[PromptScore, list[float], list[float]]]) -> Scored:
    """Every prompt's score, and the KL pooled over every reference token (a long answer weighs more)."""
    kls = sorted(k for _, kl, _ in rows for k in kl)
    floors = sorted(f for _, _, fl in rows for f in fl)
    return Scored(
        prompts=[r for r, _, _ in rows],
        kl_mean=sum(kls) / len(kls) if kls else None, kl_p99=quantile(kls, 0.99) if kls else None,
        floor_mean=sum(floors) / len(floors) if floors else None, floor_p99=quantile(floors, 0.99) if floors else None,
        tokens=len(kls),
    )
