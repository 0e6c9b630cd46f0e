"""The lab's scheduler model on a simulated clock: the phenomena come from the model's rules."""

from __future__ import annotations

import dataclasses
import itertools
import statistics

import pytest

from doctor.lab.scheduler import FINISHED, EngineConfig, Scheduler, Sequence

BASE = EngineConfig(max_model_len=2048, kv_cache_tokens=65536, block_size=16)


def _seq(i: int, prompt: int, max_tokens: int, prefix: list[int] | None = None) -> Sequence:
    head = prefix or []
    return Sequence(f"r{i}", head + [1000 * (i + 1) + k for k in range(prompt - len(head))], max_tokens, 0.0, seed=i)


def run(config: EngineConfig, seqs: list[Sequence], arrivals: dict[int, list[Sequence]] | None = None) -> dict:
    """Step the scheduler to completion on a simulated clock; returns per-step facts."""
    sched = Scheduler(config)
    for seq in seqs:
        sched.add(seq)
    arrivals = dict(arrivals or {})
    now, step, usage_max, steps = 0.0, 0, 0.0, []
    tokens: dict[str, list[float]] = {}
    while sched.has_work or arrivals:
        for seq in arrivals.pop(step, []):
            seq.arrival = now
            sched.add(seq)
        batch = sched.schedule(now)
        assert batch.scheduled or not sched.has_work, "the model must never stall with work left"
        cost = sched.step_seconds(batch)
        now += cost
        for out in sched.complete(batch, now):
            tokens.setdefault(out.seq.request_id, []).extend([now] * len(out.new_text))
        usage_max = max(usage_max, sched.pool.usage())
        steps.append((now, cost, {s.request_id: n for s, n in batch.scheduled.items()}))
        step += 1
        assert step < 100_000
    assert sched.pool.num_free == config.num_blocks, "every block is released at the end"
    return {"sched": sched, "steps": steps, "usage_max": usage_max, "tokens": tokens}


def gaps(times: list[float]) -> list[float]:
    return [b - a for a, b in itertools.pairwise(times)]


def test_queueing_first_tokens_come_in_groups_of_max_num_seqs():
    seqs = [_seq(i, 64, 20) for i in range(6)]
    run(dataclasses.replace(BASE, max_num_seqs=2), seqs)
    firsts = sorted({round(s.first_token_t, 9) for s in seqs})
    assert len(firsts) == 3  # three pairs
    assert all(sum(1 for s in seqs if round(s.first_token_t, 9) == t) == 2 for t in firsts)
    # Each pair waits for the previous one to finish: queue time grows by a whole answer.
    queue = sorted(s.first_scheduled for s in seqs)
    assert queue[0] == queue[1] < queue[2] == queue[3] < queue[4] == queue[5]


def test_without_a_seq_limit_everyone_starts_together():
    seqs = [_seq(i, 64, 20) for i in range(6)]
    run(BASE, seqs)
    assert len({s.first_token_t for s in seqs}) == 1


def test_kv_pressure_preempts_by_recompute_and_stalls_the_victim():
    config = dataclasses.replace(BASE, max_model_len=512, kv_cache_tokens=512)
    seqs = [_seq(i, 32, 120) for i in range(6)]  # 6 x 152 tokens at peak for 512 of KV
    out = run(config, seqs)
    sched = out["sched"]
    assert sched.counters.preemptions > 0
    assert out["usage_max"] <= 1.0
    victims = [s for s in seqs if s.num_preemptions]
    assert victims and all(s.status == FINISHED and len(s.output) == 120 for s in seqs)
    # The victim's stream has a stall many times its usual gap; the survivors' do not.
    for seq in victims:
        victim_gaps = gaps(out["tokens"][seq.request_id])
        assert max(victim_gaps) > 10 * statistics.median(victim_gaps)
    survivor = next(s for s in seqs if not s.num_preemptions)
    survivor_gaps = gaps(out["tokens"][survivor.request_id])
    assert max(survivor_gaps) < 3 * statistics.median(survivor_gaps)


def test_preemption_is_counted_when_the_request_resumes():
    config = dataclasses.replace(BASE, max_model_len=256, kv_cache_tokens=256)
    seqs = [_seq(i, 16, 100) for i in range(4)]
    sched = Scheduler(config)
    for seq in seqs:
        sched.add(seq)
    now, seen_pending = 0.0, False
    while sched.has_work:
        batch = sched.schedule(now)
        now += sched.step_seconds(batch)
        sched.complete(batch, now)
        pending = sum(s.unreported_preemptions for s in seqs)
        if pending:
            seen_pending = True
            assert sched.counters.preemptions < sum(s.num_preemptions for s in seqs)
    assert seen_pending
    assert sched.counters.preemptions == sum(s.num_preemptions for s in seqs) > 0


def test_chunked_prefill_shares_the_step_budget_with_running_decodes():
    config = dataclasses.replace(BASE, max_num_batched_tokens=512)
    runner = [_seq(0, 16, 60)]
    long = _seq(1, 2000, 1)
    out = run(config, runner, arrivals={5: [long]})
    chunks = [sched.get("r1") for _, _, sched in out["steps"] if "r1" in sched]
    assert len(chunks) == 4 and sum(chunks) == 2000  # 511 + 511 + 511 + 467, one decode token each step
    assert all("r0" in sched for _, _, sched in out["steps"] if "r1" in sched)


def test_a_bigger_step_budget_makes_a_longer_stall_in_running_streams():
    def worst_gap(budget: int) -> float:
        config = dataclasses.replace(BASE, max_num_batched_tokens=budget, prefill_s_per_token=0.0002)
        out = run(config, [_seq(0, 16, 60)], arrivals={5: [_seq(1, 6000, 1)]})
        return max(gaps(out["tokens"]["r0"]))

    assert worst_gap(8192) > 3 * worst_gap(1024)


def test_prefix_caching_reuses_shared_prefix_blocks():
    prefix = list(range(7, 7 + 1024))
    first, second = _seq(0, 1100, 4, prefix), _seq(1, 1100, 4, prefix)
    out = run(BASE, [first], arrivals={10: [second]})
    assert second.cached_prompt_tokens == 1024
    assert out["sched"].counters.prefix_hits == 1024
    prefill = {rid: (n, cost) for _, cost, sched in out["steps"] for rid, n in sched.items() if n > 1}
    assert prefill["r0"][0] == 1100 and prefill["r1"][0] == 1100 - 1024  # only the tail is computed
    assert prefill["r1"][1] < prefill["r0"][1]


def test_prefix_caching_off_computes_everything():
    prefix = list(range(7, 7 + 1024))
    second = _seq(1, 1100, 4, prefix)
    run(dataclasses.replace(BASE, enable_prefix_caching=False), [_seq(0, 1100, 4, prefix)], arrivals={10: [second]})
    assert second.cached_prompt_tokens == 0


def test_kv_smaller_than_max_model_len_refuses_to_start_like_vllm():
    with pytest.raises(ValueError, match="larger than the maximum number of tokens"):
        EngineConfig(max_model_len=4096, kv_cache_tokens=2048)


def test_without_chunked_prefill_a_prompt_is_computed_in_one_step():
    config = dataclasses.replace(BASE, enable_chunked_prefill=False, max_num_batched_tokens=2048)
    long = _seq(0, 1500, 2)
    out = run(config, [long])
    assert out["steps"][0][2] == {"r0": 1500}


def test_without_chunked_prefill_the_budget_must_hold_max_model_len_like_vllm():
    with pytest.raises(ValueError, match="chunked prefill is disabled"):
        EngineConfig(enable_chunked_prefill=False, max_num_batched_tokens=2048, max_model_len=8192)
