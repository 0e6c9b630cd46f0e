"""The answers gate's statistics and decisions at their edges: the floor, the KL estimate, each rule."""

from __future__ import annotations

import math

import pytest

from doctor.verify import gate
from doctor.verify.answers import REPEAT_MARGIN, REPEAT_SHARE, Answer, ToolCall, first_difference, repeat_share, self_repeating
from doctor.verify.gate import Decision, decide
from doctor.verify.prompts import Prompt, PromptFileError, builtin, parse_prompts
from doctor.verify.scoring import TokenScores, pooled, score, token_kl


def ts(*logprobs: float, tokens: tuple[int, ...] | None = None) -> TokenScores:
    return TokenScores(tokens or tuple(range(len(logprobs))), tuple(logprobs))


def prompts(n: int, **kw) -> list[Prompt]:
    return [Prompt(f"p{i}", "chat", {"messages": [{"role": "user", "content": f"q{i}"}]}, **kw) for i in range(n)]


def same(n: int, text: str = "an answer of some words", repeats: int = 3, **kw) -> dict[str, list[Answer]]:
    return {f"p{i}": [Answer(f"p{i}", text=f"{text} {i}", finish_reason="stop", **kw) for _ in range(repeats)] for i in range(n)}


# -- the KL estimate and the floor ---------------------------------------------------------------

def test_kl_is_zero_on_agreement_and_grows_with_the_change_either_way():
    ref = ts(-0.1, -2.0, -0.5)
    assert token_kl(ref, ref) == [0.0, 0.0, 0.0]
    small, large = token_kl(ref, ts(-0.2, -2.0, -0.5)), token_kl(ref, ts(-1.1, -2.0, -0.5))
    up = token_kl(ref, ts(0.0, -2.0, -0.5))
    assert 0 < small[0] < large[0] and up[0] > 0
    assert small[0] == pytest.approx(math.expm1(-0.1) + 0.1)


def test_kl_refuses_other_tokens_and_survives_minus_infinity():
    assert token_kl(ts(-0.1, -0.2), ts(-0.1, -0.2, tokens=(0, 9))) is None
    assert math.isfinite(token_kl(ts(-0.1), ts(-math.inf))[0])


def test_floor_is_the_largest_repeat_and_zero_for_a_deterministic_baseline():
    ref = ts(-0.1, -0.2)
    row, _, floor = score("p", [ref, ref, ref], ts(-0.1, -0.2))
    assert row.floor == 0.0 and row.kl == 0.0 and floor == [0.0, 0.0]
    row, _, _ = score("p", [ref, ts(-0.15, -0.2), ts(-0.3, -0.2)], ts(-0.1, -0.2))
    assert row.floor == pytest.approx(sum(token_kl(ref, ts(-0.3, -0.2))) / 2)


def test_a_single_baseline_scoring_has_no_floor_and_a_tokenizer_change_says_why():
    row, kl, _ = score("p", [ts(-0.1, -0.2)], ts(-0.1, -0.2, tokens=(5, 6)))
    assert row.floor is None and row.kl is None and kl == [] and "token ids" in row.why
    row, _, _ = score("p", [ts(-0.1, -0.2)], ts(-0.1))
    assert "1 tokens where the baseline scored 2" in row.why


def test_pooled_weighs_every_token():
    rows = [score("a", [ts(-0.1)] * 2, ts(-0.1)), score("b", [ts(*[-0.1] * 3)] * 2, ts(*[-1.1] * 3))]
    pool = pooled(rows)
    assert pool.tokens == 4 and pool.kl_mean == pytest.approx(3 * (math.expm1(-1) + 1) / 4)


# -- structural checks ---------------------------------------------------------------------------

def test_self_repeating_needs_a_loop_not_a_short_answer():
    assert self_repeating("stop the stream " * 20)
    assert not self_repeating("the same " * 3)
    assert not self_repeating("A prompt that is answered in plain prose, with no phrase said twice, ever, at all in it.")


def test_tool_calls_compare_canonically_and_json_fences_parse():
    a, b = ToolCall("f", '{"city": "Oslo", "unit": "c"}'), ToolCall("f", '{"unit":"c","city":"Oslo"}')
    assert a.canonical() == b.canonical()
    assert Answer("p", text='```json\n{"a": 1}\n```').json_valid() and not Answer("p", text="{a: 1").json_valid()


def test_first_difference_names_the_word():
    assert first_difference("the cat sat", "the cat sat") is None
    assert first_difference("the cat sat", "the dog sat") == (1, "cat", "dog")
    assert first_difference("the cat", "the cat sat") == (2, "(end)", "sat")


# -- decisions -----------------------------------------------------------------------------------

def test_identical_answers_pass_and_one_prompt_too_few_abstains():
    assert decide(prompts(8), same(8), same(8, repeats=1), None).decision is Decision.PASS
    verdict = decide(prompts(7), same(7), same(7, repeats=1), None)
    assert verdict.decision is Decision.ABSTAIN and "at least 8" in verdict.reasons[0]


def test_text_that_differs_alone_passes_but_is_listed():
    cand = same(8, text="another answer of some words", repeats=1)
    verdict = decide(prompts(8), same(8), cand, None)
    assert verdict.decision is Decision.PASS
    assert verdict.rows[0].difference == (0, "an", "another")
    assert any("8 of 8 answers differ" in n for n in verdict.notes)


@pytest.mark.parametrize("broken, said", [
    (Answer("p0", text="", finish_reason="stop"), "empty answer"),
    (Answer("p0", text="loop loop loop loop " * 10, finish_reason="stop"), "self-repeating"),
    (Answer("p0", error="HTTP 500"), "no answer: HTTP 500"),
])
def test_one_broken_answer_fails(broken, said):
    cand = same(8, repeats=1)
    cand["p0"] = [broken]
    verdict = decide(prompts(8), same(8), cand, None)
    assert verdict.decision is Decision.FAIL and said in verdict.reasons[0]


#: Two answers of the same tiny random-weight model on two real vLLM servers to the same prompt
#: (tests/realvllm/test_verify.py, 2026-12-06): one batch apart, 0.48 and 0.52 of their pieces repeated.
SAME_WEIGHTS = (
    " batchfromfromfrom batchfrom batch batch batchfrom batch onfrom batch onfromfrom batch" + " on" * 24
    + "2" * 23 + " batch2" * 15 + " batch",
    " batchfromfromfrom batchfrom batch batch batchfrom batch onfrom batch" + " on" * 27
    + "2" * 24 + " batch2" * 15 + " batch",
)


def test_a_loop_fails_only_when_more_repetitive_than_the_baseline_by_the_margin():
    """The same weights crossing the bar one batch apart pass (the CI failure of issue 31); a loop
    after prose, or after a baseline already a quarter repetitive, still fails."""
    near, over = SAME_WEIGHTS
    assert repeat_share(near) <= REPEAT_SHARE < repeat_share(over) < repeat_share(near) + REPEAT_MARGIN
    base, cand = same(8), same(8, repeats=1)
    base["p0"] = [Answer("p0", text=near, finish_reason="length")] * 3
    cand["p0"] = [Answer("p0", text=over, finish_reason="length")]
    assert decide(prompts(8), base, cand, None).decision is Decision.PASS
    cand["p0"] = [Answer("p0", text="stop the stream " * 40, finish_reason="length")]
    for prose in (" ".join(f"word{i}" for i in range(60)), near[:120] + " ".join(f"w{i}" for i in range(40))):
        assert repeat_share(prose) < 0.3
        base["p0"] = [Answer("p0", text=prose, finish_reason="length")] * 3
        verdict = decide(prompts(8), base, cand, None)
        assert verdict.decision is Decision.FAIL and "self-repeating" in verdict.reasons[0]


def test_the_length_share_fails_past_its_margin_only():
    base = same(16)
    one, three = same(16, repeats=1), same(16, repeats=1)
    one["p0"][0].finish_reason = "length"
    for i in range(3):
        three[f"p{i}"][0].finish_reason = "length"
    assert decide(prompts(16), base, one, None).decision is Decision.PASS  # 1 of 16 is under 12.5 %
    assert "cut by length" in decide(prompts(16), base, three, None).reasons[0]


def test_json_and_tool_calls():
    ps = prompts(8)
    ps[0] = Prompt("p0", "chat", {"messages": [], "response_format": {"type": "json_object"}}, "json output")
    ps[1] = Prompt("p1", "chat", {"messages": [], "tools": [{"type": "function"}]}, "tool call")
    base, cand = same(8), same(8, repeats=1)
    base["p0"] = [Answer("p0", text='{"a": 1}')] * 3
    base["p1"] = [Answer("p1", tool_calls=[ToolCall("get", '{"x": 1}')])] * 3
    cand["p0"] = [Answer("p0", text='{"a": ')]
    cand["p1"] = [Answer("p1", tool_calls=[ToolCall("get", '{"x": 2}')])]
    reasons = decide(ps, base, cand, None).reasons
    assert "JSON that does not parse" in reasons[0] and 'get({"x":1}) -> get({"x":2})' in reasons[1]
    base["p1"] = [base["p1"][0], Answer("p1", tool_calls=[ToolCall("get", '{"x": 3}')]), base["p1"][0]]
    assert len(decide(ps, base, cand, None).reasons) == 1  # an unstable baseline tool call cannot fail


def test_an_unstable_baseline_and_a_seedless_candidate_abstain():
    base = same(8)
    for i in range(5):
        base[f"p{i}"][1] = Answer(f"p{i}", text="something else")
    verdict = decide(prompts(8), base, same(8, repeats=1), None)
    assert verdict.decision is Decision.ABSTAIN and "its own repeats" in verdict.reasons[0]
    cand = same(8, repeats=2)
    for i in range(5):
        cand[f"p{i}"][1] = Answer(f"p{i}", text="drift")
    verdict = decide(prompts(8), same(8), cand, None)
    assert verdict.decision is Decision.ABSTAIN and "ignore the seed" in verdict.reasons[0]


def test_a_candidate_as_unsteady_as_batching_makes_the_same_weights_is_no_seedless_engine():
    """CI's real-vLLM run (2026-12-06): the same weights' repeats differed on 2 of 18 prompts at the
    baseline and 5 of 18 at the candidate, batch by batch on a CPU build: noise, not an ignored seed."""
    base, cand = same(18), same(18)
    for i in range(2):
        base[f"p{i}"][1] = Answer(f"p{i}", text="drift")
    for i in range(5):
        cand[f"p{i + 10}"][1] = Answer(f"p{i + 10}", text="drift")
    assert decide(prompts(18), base, cand, None).decision is Decision.PASS


def scored(kl_shift: float, floor_shift: float = 0.0, tokens: int = 300):
    ref = ts(*[-0.5] * tokens)
    rows = [score("p0", [ref, ts(*[-0.5 - floor_shift] * tokens)], ts(*[-0.5 - kl_shift] * tokens))]
    return pooled(rows)


def test_teacher_forced_bar_is_the_larger_of_the_absolute_and_three_floors():
    # k3 of d: 0.1 -> 0.0048 (under 0.01), 0.2 -> 0.0187 (over)
    assert decide(prompts(8), same(8), same(8, repeats=1), scored(0.1)).decision is Decision.PASS
    failed = decide(prompts(8), same(8), same(8, repeats=1), scored(0.2))
    assert failed.decision is Decision.FAIL and "teacher-forced KL" in failed.reasons[0]
    # a floor of 0.0187 per token raises the bar to 0.056: the same candidate passes
    assert decide(prompts(8), same(8), same(8, repeats=1), scored(0.2, floor_shift=0.2)).decision is Decision.PASS


def test_teacher_forced_abstains_when_thin_or_noisy_and_notes_when_unavailable():
    thin = decide(prompts(8), same(8), same(8, repeats=1), scored(0.0, tokens=50))
    assert thin.decision is Decision.ABSTAIN and "200 tokens" in thin.reasons[0]
    noisy = decide(prompts(8), same(8), same(8, repeats=1), scored(0.7, floor_shift=0.7))
    assert noisy.decision is Decision.ABSTAIN and "disagrees with itself" in noisy.reasons[0]
    unavailable = pooled([])
    unavailable.unavailable = "not available on this engine"
    verdict = decide(prompts(8), same(8), same(8, repeats=1), unavailable)
    assert verdict.decision is Decision.PASS and any("not available on this engine" in n for n in verdict.notes)


def test_models_and_tokenizers_are_told_apart():
    cand = same(8, repeats=1, model="tiny-fp8", prompt_tokens=12)
    verdict = decide(prompts(8), same(8, model="tiny", prompt_tokens=10), cand, None)
    assert any("different models" in n and "tiny-fp8" in n for n in verdict.notes)
    assert any("different tokenizers" in n and "10 tokens on the baseline, 12" in n for n in verdict.notes)


# -- the prompts -----------------------------------------------------------------------------------

def test_builtin_set_is_varied_and_at_least_sixteen():
    ps = builtin()
    assert len(ps) >= 16 and len({p.id for p in ps}) == len(ps)
    assert {"short chat", "long context", "code", "json output", "tool call"} <= {p.kind for p in ps}
    assert any(p.expects_tool for p in ps) and any(p.route == "completions" for p in ps)


@pytest.mark.parametrize("text, said", [
    ('{"messages": [{"role": "user", "content": "hi"}]}\nnot json\n', "f.jsonl:2: not JSON"),
    ('{"max_tokens": 3}\n', "f.jsonl:1: neither"),
    ('{"prompt": "a", "stream": true}\n', "stream"),
    ('{"id": "a", "body": {"prompt": "x"}}\n{"id": "a", "body": {"prompt": "y"}}\n', "f.jsonl:2: the id 'a' is used twice"),
    ("\n\n", "no prompt"),
])
def test_a_bad_prompts_line_is_named(text, said):
    with pytest.raises(PromptFileError, match=said):
        parse_prompts(text, "f.jsonl")


def test_gate_constants_are_in_order():
    assert gate.KL_MEAN_MAX < gate.KL_P99_MAX and gate.FLOOR_MAX <= gate.KL_P99_MAX
