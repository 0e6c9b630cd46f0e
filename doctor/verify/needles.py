"""The long-context probe (``verify --long-context``): needles in a haystack at the deployment's ``max_model_len``.

Why a probe of its own: a KV-cache precision change (``kv_cache_dtype fp8``) costs most where the
cache is longest, and the rest of the gate never gets there: its prompts are short, and the
teacher-forced KL is computed over a short answer after a short prompt. A fact stated once far
back in a long context, and asked for at its end, is what such a change loses first.

The haystack is built here, deterministically (the same text on every run and every machine):
filler sentences chosen by CRC from fixed word lists, a few needles ("The access code of the
Lisbon archive is 4817-KQP.") at different depths, and one question per needle at the end, so
the haystack is a shared prefix (an engine's prefix cache makes the repeats cheap). It is sized in
the endpoint's own tokens: two one-token requests count the template and a sample of filler
(``calibration_prompts``), since a word costs one token in one tokenizer and three in another. An answer
finds a needle when it holds the code exactly: no fuzzy match, the code is not a word the filler
or a model would produce by chance.

The decision, with the baseline's repeats as the floor:

- FAIL: a needle the baseline found on every repeat that the candidate missed on any, or did not
  answer (an error: a candidate that refuses the length is a regression too);
- ABSTAIN: no needle the baseline found on every repeat (the model cannot retrieve at this length,
  or the baseline did not answer: nothing to judge the candidate against), or none asked of both;
- PASS: the candidate found every needle the baseline found reliably.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

from doctor.verify.answers import Answer
from doctor.verify.gate import Decision, Half
from doctor.verify.prompts import Prompt

#: Where the needles sit, as the share of the haystack before each: near the start, the middle, near the end.
NEEDLE_DEPTHS = (0.1, 0.5, 0.9)
#: The share of ``max_model_len`` the haystack fills once the endpoint counted its tokens: room for
#: the needles' own sentences and the answer.
FILL = 0.85
#: Filler sentences of the calibration request (``calibration_prompts``).
CALIBRATION_SENTENCES = 32
#: Without the endpoint's counts: tokens per filler word (common words are one token each in the
#: usual tokenizers; 1.5 leaves room for punctuation and a verbose one) ...
TOKENS_PER_WORD = 1.5
#: ... and tokens kept free for the question, the chat template's markers and the answer.
RESERVE_TOKENS = 128
#: The answer's length: the code and the sentence around it.
ANSWER_TOKENS = 32

_PLACES = ("Lisbon archive", "Oslo depot", "Nairobi office", "Quito library", "Hanoi museum")
_ADJ = ("quiet", "narrow", "old", "busy", "green", "tall", "cold", "bright", "small", "long")
_NOUN = ("river", "market", "bridge", "garden", "station", "harbour", "school", "road", "tower", "field")
_VERB = ("faces", "borders", "follows", "crosses", "shelters", "overlooks", "joins", "circles")
_OBJ = ("the hills", "a wide square", "the old wall", "a row of houses", "the main street", "the coast")
_TIME = ("in the morning", "after the rain", "every summer", "at dusk", "during the week", "in winter")


def _pick(options: tuple[str, ...], *key: object) -> str:
    return options[zlib.crc32("\x00".join(map(str, key)).encode()) % len(options)]


@dataclass(frozen=True)
class Needle:
    """One fact hidden in the haystack: where (``depth``), what it names, and the code that proves it was found."""

    id: str
    depth: float
    place: str
    code: str

    @property
    def sentence(self) -> str:
        return f"The access code of the {self.place} is {self.code}."

    @property
    def question(self) -> str:
        return f"What is the access code of the {self.place}? Answer with the code only."

    def found(self, answer: Answer) -> bool:
        """The answer holds the code exactly."""
        return answer.ok and self.code in answer.text


def needles() -> list[Needle]:
    """The needles, one per depth; each code is four digits and three capitals from its CRC."""
    out = []
    for i, depth in enumerate(NEEDLE_DEPTHS):
        n = zlib.crc32(f"needle {i}".encode())
        letters = "".join(chr(ord("A") + (n >> (5 * k)) % 26) for k in range(3))
        out.append(Needle(f"needle-{round(depth * 100)}", depth, _PLACES[i % len(_PLACES)], f"{n % 9000 + 1000}-{letters}"))
    return out


def filler(index: int) -> str:
    """The ``index``-th filler sentence (ten words or so), the same on every run."""
    return (f"The {_pick(_ADJ, index, 'a')} {_pick(_NOUN, index, 'n')} near the {_pick(_NOUN, index, 'm')} "
            f"{_pick(_VERB, index, 'v')} {_pick(_OBJ, index, 'o')} {_pick(_TIME, index, 't')}.")


def haystack(sentences: int) -> str:
    """``sentences`` filler sentences, every needle at its depth among them."""
    filled = [filler(i) for i in range(max(sentences, 0))]
    placed = list(filled)
    for needle in sorted(needles(), key=lambda n: -n.depth):  # deepest first: earlier indices stay put
        placed.insert(round(needle.depth * len(filled)), needle.sentence)
    return " ".join(placed)


def _prompt(pid: str, text: str, question: str, max_tokens: int, kind: str) -> Prompt:
    return Prompt(pid, "chat", {"messages": [{"role": "user", "content": f"{text}\n\n{question}"}], "max_tokens": max_tokens}, kind)


def calibration_prompts() -> tuple[Prompt, Prompt]:
    """Two one-token requests whose ``usage.prompt_tokens`` size the haystack in the endpoint's own
    tokens: the question alone (the chat template and question), and ``CALIBRATION_SENTENCES``
    filler sentences before it (their difference: the tokens of a sentence)."""
    question = needles()[0].question
    return (_prompt("calibrate-0", "", question, 1, "calibration"),
            _prompt("calibrate-n", " ".join(filler(i) for i in range(CALIBRATION_SENTENCES)), question, 1, "calibration"))


def sentences_for(max_model_len: int, counted: tuple[int, int] | None) -> int:
    """The filler sentences that fill ``FILL`` of ``max_model_len``, the answer's tokens left free.

    ``counted``: the two calibration prompts' token counts, the endpoint's own; without them
    (an engine without ``usage``), ``TOKENS_PER_WORD`` per word and ``RESERVE_TOKENS`` for the rest.
    """
    if counted is not None and counted[1] > counted[0]:
        overhead, per_sentence = counted[0], (counted[1] - counted[0]) / CALIBRATION_SENTENCES
        return int((FILL * max_model_len - overhead - ANSWER_TOKENS) / per_sentence)
    words = sum(len(filler(i).split()) for i in range(CALIBRATION_SENTENCES)) / CALIBRATION_SENTENCES
    return int((max_model_len - RESERVE_TOKENS) / TOKENS_PER_WORD / words)


def needle_prompts(max_model_len: int, counted: tuple[int, int] | None = None) -> list[Prompt]:
    """One chat prompt per needle: the same haystack (sized by ``sentences_for``), then its question."""
    text = haystack(sentences_for(max_model_len, counted))
    return [_prompt(n.id, text, n.question, ANSWER_TOKENS, "long context needle") for n in needles()]


@dataclass
class NeedleRow:
    """One needle: how often each side found it, what the candidate said when it did not, and any error."""

    needle_id: str
    depth: float
    code: str
    baseline_found: int
    baseline_asked: int
    candidate_found: int
    candidate_asked: int
    candidate_said: str | None = None  # the candidate's first answer without the code
    error: str | None = None  # the candidate's first error


@dataclass
class NeedleVerdict(Half):
    """The long-context half: one row per needle, and the context's length."""

    rows: list[NeedleRow] = field(default_factory=list)
    max_model_len: int | None = None
    context_tokens: int | None = None  # the prompt as the baseline (else the candidate) counted it


def _row(needle: Needle, base: list[Answer], cand: list[Answer]) -> NeedleRow:
    missed = [a for a in cand if a.ok and not needle.found(a)]
    failed = [a for a in cand if not a.ok]
    return NeedleRow(needle.id, needle.depth, needle.code, sum(needle.found(a) for a in base), len(base),
                     sum(needle.found(a) for a in cand), len(cand),
                     candidate_said=" ".join(missed[0].text.split())[:80] if missed else None,
                     error=failed[0].error if failed else None)


def decide_needles(baseline: dict[str, list[Answer]], candidate: dict[str, list[Answer]], max_model_len: int) -> NeedleVerdict:
    """The long-context verdict (the rules of the module docstring)."""
    rows = [_row(n, baseline.get(n.id, []), candidate.get(n.id, [])) for n in needles()]
    counted = [a.prompt_tokens for side in (baseline, candidate) for n in needles() for a in side.get(n.id, []) if a.prompt_tokens]
    context = counted[0] if counted else None
    size = f"{context:,} tokens of a max_model_len of {max_model_len:,}" if context else f"max_model_len {max_model_len:,}"
    reliable = [r for r in rows if r.baseline_asked and r.baseline_found == r.baseline_asked]
    judged = [r for r in reliable if r.candidate_asked]
    notes = [f"{len(rows)} needles at depths {', '.join(f'{d:.0%}' for d in NEEDLE_DEPTHS)} of a context of {size}"]
    unreliable = [r for r in rows if r not in reliable and r.baseline_asked]
    if unreliable:
        notes.append("the baseline itself misses " + ", ".join(f"{r.needle_id} ({r.baseline_found} of {r.baseline_asked})"
                                                               for r in unreliable) + ": not judged")
    reasons = []
    refused: dict[str, list[str]] = {}
    for r in judged:
        if r.error:
            refused.setdefault(r.error, []).append(f"{r.needle_id} (depth {r.depth:.0%})")
        elif r.candidate_found < r.candidate_asked:
            reasons.append(f"{r.needle_id} (depth {r.depth:.0%}): the baseline found {r.code} on {r.baseline_found} of "
                           f"{r.baseline_asked} repeats, the candidate on {r.candidate_found} of {r.candidate_asked} "
                           f"(it answered {r.candidate_said!r})")
    reasons += [f"{', '.join(which)}: no answer: {error}" for error, which in refused.items()]  # one refusal said once
    if reasons:
        return NeedleVerdict(Decision.FAIL, reasons, notes, rows, max_model_len, context)
    if not judged:
        errors = [a.error for n in needles() for a in baseline.get(n.id, []) if a.error]
        why = ("the baseline answered no needle (a recording made without --long-context, or the --deadline cut it)"
               if not any(r.baseline_asked for r in rows) else
               f"the baseline did not answer ({errors[0]})" if errors and not any(r.baseline_found for r in rows) else
               "no needle was asked of both" if reliable else
               "the baseline finds no needle on every repeat: the model cannot retrieve at this length, nothing to judge against")
        return NeedleVerdict(Decision.ABSTAIN, [why], notes, rows, max_model_len, context)
    return NeedleVerdict(Decision.PASS, [f"the candidate found all {len(judged)} needles the baseline finds on every repeat"],
                         notes, rows, max_model_len, context)
