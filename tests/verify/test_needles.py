"""The long-context probe's haystack and its decision at the edges (pure: ``doctor.verify.needles``)."""

from __future__ import annotations

from doctor.verify.answers import Answer
from doctor.verify.gate import Decision
from doctor.verify.needles import (
    ANSWER_TOKENS,
    CALIBRATION_SENTENCES,
    FILL,
    NEEDLE_DEPTHS,
    TOKENS_PER_WORD,
    calibration_prompts,
    decide_needles,
    filler,
    haystack,
    needle_prompts,
    needles,
    sentences_for,
)


def test_the_haystack_is_the_same_every_time_with_each_needle_at_its_depth():
    text = haystack(300)
    assert text == haystack(300) and text.count(".") == 300 + len(NEEDLE_DEPTHS)
    at = [text.index(n.sentence) / len(text) for n in needles()]
    assert at == sorted(at) and all(abs(a - d) < 0.05 for a, d in zip(at, NEEDLE_DEPTHS, strict=True))
    assert len({n.code for n in needles()}) == len(NEEDLE_DEPTHS)
    assert not any(ch.isdigit() for i in range(500) for ch in filler(i))  # no filler holds a code by chance


def test_the_haystack_is_sized_in_the_endpoints_own_tokens_else_by_words():
    alone, sample = calibration_prompts()
    assert alone.body["max_tokens"] == sample.body["max_tokens"] == 1
    # a tokenizer that spends 40 tokens per sentence gets a quarter of the sentences of one that spends 10
    verbose, terse = sentences_for(8192, (50, 50 + 40 * CALIBRATION_SENTENCES)), sentences_for(8192, (50, 50 + 10 * CALIBRATION_SENTENCES))
    assert verbose == int((FILL * 8192 - 50 - ANSWER_TOKENS) / 40) and terse == int((FILL * 8192 - 50 - ANSWER_TOKENS) / 10)
    guessed = sentences_for(4096, None)
    words = len(haystack(guessed).split())
    assert 0.6 * 4096 < words * TOKENS_PER_WORD <= 4096
    assert sentences_for(4096, (80, 80)) == guessed  # a count that says nothing: the guess


def test_one_prompt_per_needle_sharing_the_haystack_as_their_prefix():
    prompts = needle_prompts(2048)
    contents = [p.body["messages"][0]["content"] for p in prompts]
    assert [p.id for p in prompts] == [n.id for n in needles()]
    assert len({c.split("\n\n")[0] for c in contents}) == 1
    assert all(c.endswith(n.question) for c, n in zip(contents, needles(), strict=True))


def answers(found: dict[str, int], asked: int, wrong: str = "The access code is 0000-AAA.") -> dict[str, list[Answer]]:
    out = {}
    for n in needles():
        k = found.get(n.id, 0)
        out[n.id] = [Answer(n.id, text=n.sentence if i < k else wrong, prompt_tokens=3000) for i in range(asked)]
    return out


ALL = {n.id: 99 for n in needles()}


def test_the_candidate_finding_every_needle_the_baseline_finds_passes():
    verdict = decide_needles(answers(ALL, 3), answers(ALL, 2), 4096)
    assert verdict.decision is Decision.PASS and verdict.context_tokens == 3000
    assert "3,000 tokens of a max_model_len of 4,096" in verdict.notes[0]


def test_one_miss_of_a_needle_the_baseline_always_finds_fails_and_says_what_it_answered():
    cand = answers(ALL, 2)
    cand["needle-10"][1] = Answer("needle-10", text="The code is 1234-XYZ.")
    verdict = decide_needles(answers(ALL, 3), cand, 4096)
    assert verdict.decision is Decision.FAIL and len(verdict.reasons) == 1
    assert "needle-10 (depth 10%)" in verdict.reasons[0] and "on 1 of 2" in verdict.reasons[0] and "1234-XYZ" in verdict.reasons[0]


def test_a_needle_the_baseline_itself_misses_is_not_judged():
    base = answers({**ALL, "needle-50": 2}, 3)
    verdict = decide_needles(base, answers({"needle-10": 2, "needle-90": 2}, 2), 4096)
    assert verdict.decision is Decision.PASS and "the baseline itself misses needle-50 (2 of 3)" in verdict.notes[1]
    nothing = decide_needles(answers({}, 3), answers(ALL, 2), 4096)
    assert nothing.decision is Decision.ABSTAIN and "cannot retrieve at this length" in nothing.reasons[0]


def test_errors_fail_on_the_candidate_and_abstain_on_the_baseline():
    refused = {n.id: [Answer(n.id, error="HTTP 400: maximum context length")] for n in needles()}
    assert decide_needles(answers(ALL, 3), refused, 4096).decision is Decision.FAIL
    verdict = decide_needles(refused, answers(ALL, 2), 4096)
    assert verdict.decision is Decision.ABSTAIN and "the baseline did not answer (HTTP 400" in verdict.reasons[0]
    unasked = decide_needles({}, answers(ALL, 2), 4096)
    assert unasked.decision is Decision.ABSTAIN and "without --long-context" in unasked.reasons[0]
