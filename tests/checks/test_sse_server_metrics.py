"""The SSE test server's one /metrics exposition: every count a check reads, from the same accounting.

The server once had two (a ``metrics=True`` one counting prompts at receipt, with the real waiting
gauge and aborts, and a default one counting them at the first token, with histograms and the
process's GC counters): a test saw one or the other. Now one exposition holds them all, and a
prompt counts once prefilled, as vLLM counts it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.support.sse_server import SseServer

BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}


def scrape(server: SseServer) -> dict[tuple[str, str], float]:
    """(sample name, finished_reason or "") -> value."""
    text = httpx.get(server.url + "/metrics").text
    return {(s.name, s.labels.get("finished_reason", "")): s.value
            for f in text_string_to_metric_families(text) for s in f.samples if not s.labels.get("le")}


def until(server: SseServer, ready: Callable[[dict[tuple[str, str], float]], bool]) -> dict[tuple[str, str], float]:
    """Scrape until ``ready`` holds (the streams move on their own schedule); the last scrape."""
    deadline = time.monotonic() + 30
    while not ready(seen := scrape(server)):
        assert time.monotonic() < deadline, seen
        time.sleep(0.02)
    return seen


def test_one_exposition_counts_waits_prompts_finishes_and_aborts() -> None:
    with SseServer() as server:
        url = server.base(slots=1, itl=0.02, n=30) + "/v1/chat/completions"
        answers = [threading.Thread(target=httpx.post, args=(url,), kwargs={"json": BODY, "timeout": 30}) for _ in range(2)]
        for a in answers:
            a.start()
        queued = until(server, lambda m: m[("vllm:num_requests_waiting", "")] == 1)
        assert queued[("vllm:num_requests_running", "")] == 1  # the slot holder
        assert ("python_gc_collections_total", "") in queued  # the process's runtime beside the engine's
        for a in answers:
            a.join()
        done = until(server, lambda m: m[("vllm:request_success_total", "length")] == 2)
        assert done[("vllm:prompt_tokens_total", "")] == 2 * 38
        assert done[("vllm:generation_tokens_total", "")] == 2 * 30
        assert done[("vllm:time_to_first_token_seconds_count", "")] == 2
        with httpx.stream("POST", server.base(itl=0.05, n=200) + "/v1/chat/completions", json=BODY) as r:
            next(r.iter_raw())  # the first event, then the client goes away
        left = until(server, lambda m: m[("vllm:request_success_total", "abort")] == 1)
        assert left[("vllm:request_success_total", "length")] == 2
        assert left[("vllm:prompt_tokens_total", "")] == 3 * 38  # the aborted one was prefilled
