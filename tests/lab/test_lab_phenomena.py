"""The scheduler model's phenomena as a client sees them over HTTP: orders and ratios only."""

from __future__ import annotations

import contextlib
import dataclasses
import statistics
import threading
import time
from collections.abc import Iterator

import httpx
from prometheus_client.parser import text_string_to_metric_families

from doctor.lab.engine import LabEngine
from doctor.lab.scheduler import EngineConfig
from tests.support.lab_client import chat_body, run_streams

FAST = EngineConfig(step_base_s=0.008, decode_s_per_seq=0.0005)


@contextlib.contextmanager
def running(config: EngineConfig) -> Iterator[LabEngine]:
    """``with running(config) as engine:`` an in-process lab engine."""
    engine = LabEngine(config)
    engine.start()
    try:
        yield engine
    finally:
        engine.stop()


def metric(engine: LabEngine, name: str) -> float:
    text = httpx.get(engine.url + "/metrics", timeout=10).text
    return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples if s.name == name)


def test_queueing_first_tokens_arrive_in_groups_of_max_num_seqs():
    with running(dataclasses.replace(FAST, max_num_seqs=2)) as engine:
        traces = run_streams(engine.url, [chat_body(max_tokens=12) for _ in range(6)], concurrency=6)
        queued = metric(engine, "vllm:request_queue_time_seconds_sum")
    firsts = sorted(t.tokens[0] for t in traces)
    within = [firsts[1] - firsts[0], firsts[3] - firsts[2], firsts[5] - firsts[4]]
    between = [firsts[2] - firsts[1], firsts[4] - firsts[3]]
    # Pairs, each waiting a whole answer (12 steps) for a slot; within a pair the first tokens share
    # one step, apart only by when the client read them (tens of ms on a loaded machine).
    assert min(between) > 2 * max(within)
    # Once admitted, every stream decodes at the same pace: the wait is before the first token.
    assert max(t.median_gap for t in traces) < 2 * min(t.median_gap for t in traces)
    assert queued > 0


def test_kv_pressure_preempts_and_stalls_a_stream_while_usage_is_full():
    config = dataclasses.replace(FAST, max_model_len=256, kv_cache_tokens=256)
    seen: dict[str, float] = {"kv": 0.0, "waiting": 0.0}
    with running(config) as engine:
        preempted_before = metric(engine, "vllm:num_preemptions_total")
        stop = threading.Event()

        def watch() -> None:  # what a scraper sees during the streams
            while not stop.is_set():
                seen["kv"] = max(seen["kv"], metric(engine, "vllm:kv_cache_usage_perc"))
                seen["waiting"] = max(seen["waiting"], metric(engine, "vllm:num_requests_waiting"))
                time.sleep(0.02)

        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            traces = run_streams(
                engine.url, [chat_body(prompt_words=8, max_tokens=100) for _ in range(4)], concurrency=4
            )
        finally:
            stop.set()
            watcher.join()
        preempted = metric(engine, "vllm:num_preemptions_total") - preempted_before
    assert preempted > 0
    # A preemption happens only when no block is free, but that instant is shorter than the
    # scraper's poll on a busy machine: what a scraper reliably sees is high usage and a queue.
    assert seen["kv"] > 0.5 and seen["waiting"] >= 1
    stalled = [t for t in traces if t.max_gap > 10 * t.median_gap]
    assert stalled, [round(t.max_gap / t.median_gap, 1) for t in traces]
    assert all(len(t.tokens) == 100 for t in traces)  # recomputed, not failed


def test_a_long_prompt_freezes_running_streams_during_its_prefill():
    def run_with(budget: int) -> tuple[list, float, float]:
        config = dataclasses.replace(FAST, max_num_batched_tokens=budget, prefill_s_per_token=0.0002)
        with running(config) as engine:
            result: dict[str, float] = {}

            def long_prompt() -> None:
                deadline = time.monotonic() + 30  # the three streams are decoding (polled: a loaded machine is late)
                while metric(engine, "vllm:generation_tokens_total") < 3 * 5 and time.monotonic() < deadline:
                    time.sleep(0.01)
                t0 = time.perf_counter()
                body = {"prompt": " ".join(["policy"] * 6000), "max_tokens": 1, "stream": False}
                httpx.post(engine.url + "/v1/completions", json=body, timeout=30)
                result["sent"], result["done"] = t0, time.perf_counter()

            sender = threading.Thread(target=long_prompt)
            start = time.perf_counter()
            sender.start()
            traces = run_streams(engine.url, [chat_body(max_tokens=60) for _ in range(3)], concurrency=3, t0=start)
            sender.join()
        return traces, result["sent"] - start, result["done"] - start

    traces, sent, done = run_with(8192)
    for trace in traces:
        gaps = trace.gaps
        worst = max(range(len(gaps)), key=gaps.__getitem__)
        begins, ends = trace.tokens[worst], trace.tokens[worst + 1]
        assert gaps[worst] > 10 * statistics.median(gaps)
        assert begins < done and ends > sent  # the stall overlaps the long prompt's prefill
    chunked, _, _ = run_with(512)
    assert max(t.max_gap for t in traces) > 3 * max(t.max_gap for t in chunked)


def test_prefix_caching_skips_the_shared_prefix():
    shared = " ".join(["policy"] * 3000)
    config = dataclasses.replace(FAST, prefill_s_per_token=0.0001)
    with running(config) as engine:
        bodies = [
            chat_body(
                max_tokens=2,
                messages=[{"role": "system", "content": shared}, {"role": "user", "content": f"question {i}"}],
            )
            for i in range(2)
        ]
        first = run_streams(engine.url, bodies[:1], concurrency=1)[0]
        second = run_streams(engine.url, bodies[1:], concurrency=1)[0]
        hits = metric(engine, "vllm:prefix_cache_hits_total")
    assert hits >= 2900
    assert second.ttft < first.ttft / 2
