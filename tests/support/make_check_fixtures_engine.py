"""Write the fixture bundles of the pre-first-token and inter-token checks and the GPU checks (LD101-LD207, LD508).

Run ``.venv/bin/python -m tests.support.make_check_fixtures_engine``. Streams that need a
realistic interplay of requests (prefill steps stalling running streams, gaps growing with
depth) come from ``simulate``, a toy continuous-batching loop whose step cost is stated in
each case's ``_why``; log lines are written in vLLM 0.32's exact format; the real vLLM 0.32
scrapes (``fixtures/metrics``) and nginx traces (``fixtures/real-vllm/nginx``) give the real cases.
"""

from __future__ import annotations

import itertools
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from doctor.engine_metrics.metric_names import FAMILIES
from doctor.evidence import (
    GpuDevice,
    GpuEvidence,
    GpuProcess,
    HostEvidence,
    LogEvidence,
    MetricsEvidence,
    ProcessInfo,
    RequestTrace,
    RunRecord,
    Scrape,
    StreamEvidence,
    WedgeStop,
    XidEvent,
    XidWatch,
)
from doctor.evidence.stream import WEDGED
from doctor.probes.logfile import read_log
from tests.support import nginx_traces
from tests.support.bundles import ITL_BOUNDS, bundle, exposition, histogram, log, metrics, real_log, request, stream, traced
from tests.support.write_fixture import write_all, write_case

ROOT = Path(__file__).resolve().parents[2]
GIB = 2**30

# --------------------------------------------------------------------------- builders


def vllm_log(args: Mapping[str, Any], *, kv_tokens: int | None = None, max_len: int = 8192,
             kv_gib: float | None = None) -> LogEvidence:
    """Startup lines as vLLM 0.32 prints them: ``non-default args``, the KV line, KV memory."""
    shown = {"model_tag": "/srv/models/llama", "model": "/srv/models/llama", **args}
    lines = [f"(APIServer pid=7) INFO 11-30 05:37:29 [api_utils.py:286] non-default args: {shown!r}"]
    if kv_gib is not None:
        lines.append(f"(EngineCore_DP0 pid=9) INFO 11-30 05:38:37 [gpu_worker.py:298] Available KV cache memory: {kv_gib:.2f} GiB")
    if kv_tokens is not None:
        lines.append(f"(EngineCore_DP0 pid=9) INFO 11-30 05:38:37 [kv_cache_utils.py:2327] GPU KV cache size: "
                     f"{kv_tokens:,} tokens, Maximum concurrency for {max_len:,} tokens per request: {kv_tokens / max_len:.2f}x")
    return log(lines)


def simulate(arrivals: list[float], tokens: int, step: Callable[[int, int], float], *,
             prompt_tokens: int = 256, path: str = "direct") -> list[RequestTrace]:
    """A toy continuous-batching engine: one step decodes a token for every running request and
    prefills every request that arrived before it; a prefilled request's first token comes at the
    end of its prefill step. ``step(running, prefilling)`` is the step's duration."""
    pending = sorted(range(len(arrivals)), key=lambda i: arrivals[i])
    running: dict[int, list[float]] = {}
    done: dict[int, list[float]] = {}
    t = 0.0
    while pending or running:
        if not running and arrivals[pending[0]] > t:
            t = arrivals[pending[0]]
        new = [i for i in pending if arrivals[i] <= t]
        pending = [i for i in pending if arrivals[i] > t]
        t = round(t + step(len(running), len(new)), 6)
        for times in running.values():
            times.append(t)
        running.update({i: [t] for i in new})
        for i in [i for i, times in running.items() if len(times) == tokens]:
            done[i] = running.pop(i)
    reqs = []
    for i, times in sorted(done.items()):
        gaps = [round(b - a, 6) for a, b in itertools.pairwise(times)]
        req = request(path, i, ttft=round(times[0] - arrivals[i], 6), gaps=gaps, start=arrivals[i])
        req.prompt_tokens = prompt_tokens
        reqs.append(req)
    return reqs


def steady(n: int, *, ttft: float, gap: float, tokens: int = 6, path: str = "direct", every: float = 3.0,
           prompt_tokens: int | None = 256, warmup_ttft: float | None = None) -> list[RequestTrace]:
    """``n`` sequential requests alike (plus a warm-up request first when ``warmup_ttft``)."""
    reqs: list[RequestTrace] = []
    if warmup_ttft is not None:
        reqs.append(request(path, 0, ttft=warmup_ttft, gaps=[gap] * (tokens - 1), start=0.0, warmup=True))
    for _ in range(n):
        idx = len(reqs)
        reqs.append(request(path, idx, ttft=ttft, gaps=[gap] * (tokens - 1), start=idx * every))
    for r in reqs:
        r.prompt_tokens = prompt_tokens
    return reqs


def app_payload(ev: StreamEvidence) -> StreamEvidence:
    """The probe as ``--payload app.json`` sends it: one application body, unchanged, every request."""
    ev.shape.payload_source = "app.json"
    ev.shape.payload = {"model": "llama", "stream": True, "max_tokens": 64, "messages": [
        {"role": "system", "content": "You are the support assistant of ACME. <3,800 tokens of policy>"},
        {"role": "user", "content": "Where is my order?"}]}
    return ev


def default_payload(ev: StreamEvidence) -> StreamEvidence:
    """The probe's own body: each prompt starts with its request number (``doctor.probes.payload``)."""
    ev.shape.payload_source = "default"
    return ev


def hist(mean: float, count: int) -> dict[str, float]:
    return {"sum": round(mean * count, 6), "count": count}


def window(before: Mapping[str, object], during: list[Mapping[str, object]], after: Mapping[str, object],
           *, end: float = 10.0) -> MetricsEvidence:
    """Scrapes before, during (one per second) and after the probe."""
    scrapes = [("before", -0.1, before)]
    scrapes += [("during", float(i + 1), d) for i, d in enumerate(during)]
    scrapes.append(("after", end, after))
    return metrics(*scrapes)


def load_scrapes(before: Mapping[str, object], during: Mapping[str, object], after: Mapping[str, object]) -> MetricsEvidence:
    """A load window: every family zero before, gauges during, histogram totals after (gauges back to 0
    unless ``after`` says otherwise), as a real engine exposes all of them in every scrape."""
    zero = {k: ({"sum": 0, "count": 0} if isinstance(v, Mapping) else 0) for k, v in {**during, **after}.items()}
    return window({**zero, **before}, [{**zero, **before, **during}], {**zero, **after})


def gpu(*devices: GpuDevice) -> GpuEvidence:
    return GpuEvidence(available=True, driver_version="550.54.15", devices=list(devices))


def h100(**fields: Any) -> GpuDevice:
    base = {"index": 0, "name": "NVIDIA H100 80GB HBM3", "memory_total_bytes": 80 * GIB, "memory_used_bytes": 72 * GIB,
                "memory_free_bytes": 8 * GIB, "sm_clock_mhz": 1980, "sm_clock_max_mhz": 1980, "temperature_c": 61.0,
                "power_w": 610.0, "power_limit_w": 700.0,
                "processes": [GpuProcess(pid=4100, name="VLLM::EngineCore", used_memory_bytes=71 * GIB)]}
    base.update(fields)
    return GpuDevice(**base)


#: The families the pre-first-token and inter-token checks read (the real scrapes are cut to them).
ENGINE_FAMILIES = ("preemptions", "finished_by_reason", "prompt_tokens", "ttft", "queue", "prefill",
                   "kv_usage", "running", "waiting")


def real_scrape(name: str, phase: str, t: float) -> Scrape:
    """A real vLLM 0.32 /metrics body, cut to ``ENGINE_FAMILIES`` without HELP lines (fixture size)."""
    prefixes = tuple(n for fam in FAMILIES if fam.key in ENGINE_FAMILIES for n in fam.names)
    kept = []
    for line in (ROOT / "fixtures" / "metrics" / name).read_text().splitlines():
        metric = line.split()[2] if line.startswith("# ") and len(line.split()) > 2 else line.split("{")[0].split(" ")[0]
        base = metric.removesuffix("_total").removesuffix("_bucket").removesuffix("_sum").removesuffix("_count")
        if base in prefixes and not metric.endswith("_created") and not line.startswith("# HELP"):
            kept.append(line)
    return Scrape(phase=phase, t=t, wall=1_796_017_000.0 + t, status=200,
                  content_type="text/plain; version=0.0.4; charset=utf-8", text="\n".join(kept) + "\n")


def real_window() -> MetricsEvidence:
    return MetricsEvidence(url="http://127.0.0.1:8000/metrics", interval_s=None, scrapes=[
        real_scrape("0.32.0-cpu-idle.prom", "before", -0.1),
        real_scrape("0.32.0-cpu-after-load.prom", "after", 60.0),
    ])


REAL_SCRAPES = ("real vLLM 0.32.0 (CPU, tiny-llama) /metrics before and after 209 requests "
                "(fixtures/metrics/0.32.0-cpu-{idle,after-load}.prom, cut to the families these checks read)")
REAL_LOG = ROOT / "fixtures" / "run_record" / "startup-0.32.0-cpu-default.log"


def real_startup_log() -> LogEvidence:
    """The real vLLM 0.32 startup log, read by the collector's own log probe (matched lines only)."""
    evidence, errors = read_log(str(REAL_LOG))
    assert evidence is not None, errors
    evidence.source = REAL_LOG.name
    return evidence


# --------------------------------------------------------------------------- LD101


def cases_slow_requests_queued() -> None:
    name = "slow-requests-queued"

    def probe(ttfts: list[float]) -> StreamEvidence:
        return stream([request("direct", i, ttft=t, gaps=[0.03] * 7, start=i * 2.0) for i, t in enumerate(ttfts)])

    few = probe([0.2] * 18 + [1.4, 1.31])
    write_case(name, "fires-two-queued-behind-long-prefills",
               bundle(stream=few, traces=traced(few, {18: 1.12, 19: 1.05}, others=[(0.0, 1.8), (0.0, 1.6), (0.9, 0.1)]),
                      log=vllm_log({"max_num_seqs": 8})),
               why="18 requests at 0.2 s, 2 at 1.4 s and 1.31 s whose own spans queued 1.12 s and 1.05 s (80 % of their "
                   "TTFT) behind other users' 1.6-1.8 s prefills; over all 20 the queue was 34 % of TTFT: the p90 "
                   "requests queued, which the mean hides -> raise max_num_seqs from 8",
               expect={"severity": "warning", "setting": "max_num_seqs", "summary_contains": ["2 slowest of 20", "#18"]})
    alike = probe([1.0] * 10)
    write_case(name, "quiet-every-request-queued-alike",
               bundle(stream=alike, traces=traced(alike, dict.fromkeys(range(10), 0.8))),
               why="every request queued 0.8 s of 1.0 s: the queue is the mean's too (requests-queued-before-prefill "
                   "says so from the histograms), nothing hidden")
    unseen = probe([0.2] * 18 + [1.4, 1.31])
    traced(unseen, {})  # the requests carried their traceparent; no span came back
    write_case(name, "missing-no-spans", bundle(stream=unseen),
               why="no OTLP receiver ran (no --otlp-listen): the join is missing, and says how to turn tracing on")
    two = probe([0.2, 1.4])
    write_case(name, "na-two-requests", bundle(stream=two, traces=traced(two, {1: 1.1})),
               why="two requests: no slow ones to tell from the rest")


def cases_slow_stalls_behind_prefills() -> None:
    name = "slow-stalls-behind-prefills"

    def probe(stalls: Mapping[int, float], n: int = 10) -> StreamEvidence:
        """``n`` streams 4 s apart, each 21 tokens 30 ms apart but for ``stalls[i]`` after its 11th token."""
        return stream([request("direct", i, ttft=0.2, gaps=[0.03] * 10 + [stalls.get(i, 0.03)] + [0.03] * 10, start=i * 4.0)
                       for i in range(n)])

    def during(i: int, seconds: float, tokens: int = 1800) -> tuple[float, float, int]:
        """Another user's prompt computed through stream ``i``'s stall (after its 11th token, 0.5 s in)."""
        return (i * 4.0 + 0.5, seconds, tokens)

    held = probe({8: 1.5, 9: 1.6})
    write_case(name, "fires-two-streams-behind-long-prompts",
               bundle(stream=held, traces=traced(held, {}, prompts=[during(8, 1.5, 6000), during(9, 1.6, 6000)]),
                      log=vllm_log({"max_num_batched_tokens": 8192})),
               why="the 2 slowest of 10 streams stopped 1.5 s and 1.6 s after their 11th token (usual gap 30 ms), each "
                   "exactly while another user's 6,000-token prompt was computed (its span: prefill 1.5 s, 1.6 s) -> "
                   "cut max_num_batched_tokens from 8192 to 2048",
               expect={"severity": "warning", "setting": "max_num_batched_tokens",
                       "summary_contains": ["1 of the 1 slowest", "2 of all 10", "6,000 prompt tokens", "max_num_batched_tokens 8192"]})
    crowded = probe({8: 1.5, 9: 1.6})
    write_case(name, "fires-several-prompts-in-one-stall",
               bundle(stream=crowded, traces=traced(crowded, {}, prompts=[during(8, 1.5), during(8, 1.5), during(9, 1.6),
                                                                          during(9, 1.6)]),
                      log=vllm_log({"max_num_batched_tokens": 8192})),
               why="the same two stalls, each while two 1,800-token prompts were computed together: 3,600 tokens "
                   "in the stall's steps, which a budget cut from 8192 to 2048 splits",
               expect={"severity": "warning", "setting": "max_num_batched_tokens",
                       "summary_contains": ["2 other prompts", "1,800 prompt tokens"]})
    uncut = probe({8: 1.5, 9: 1.6})
    write_case(name, "quiet-prompts-within-the-new-budget",
               bundle(stream=uncut, traces=traced(uncut, {}, prompts=[during(8, 1.5), during(9, 1.6)]),
                      log=vllm_log({"max_num_batched_tokens": 8192})),
               why="the same two stalls behind 1,800-token prompts: cutting max_num_batched_tokens from 8192 to "
                   "2048 would still compute each in one step, so the change would shorten nothing")
    elsewhere = probe({8: 1.5, 9: 1.6})
    write_case(name, "quiet-stalls-with-no-prompt-computed",
               bundle(stream=elsewhere, traces=traced(elsewhere, {}, prompts=[(2.5, 1.0, 1800), (6.5, 1.0, 1800)])),
               why="the same two 1.5 s stalls, but the other users' long prompts were computed between streams: "
                   "nothing was being prefilled while they stalled (an engine-wide pause or preemption reads those)")
    smooth = probe({})
    write_case(name, "quiet-no-stall-stands-out",
               bundle(stream=smooth, traces=traced(smooth, {}, prompts=[during(8, 0.2)])),
               why="every gap 30 ms: the longest stall is not several times the usual gap")
    unseen = probe({8: 1.5, 9: 1.6})
    traced(unseen, {})  # the requests carried their traceparent; no span came back
    write_case(name, "missing-no-spans", bundle(stream=unseen),
               why="no OTLP receiver ran (no --otlp-listen): the join is missing, and says how to turn tracing on")
    single = stream([request("direct", i, ttft=0.2, gaps=[], start=i * 4.0) for i in range(5)])
    write_case(name, "na-one-token-answers", bundle(stream=single, traces=traced(single, {})),
               why="each answer was one token: no gap between two tokens to place")


def cases_requests_queued_before_prefill() -> None:
    name = "requests-queued-before-prefill"
    direct = steady(4, ttft=2.4, gap=0.03)
    histos = {"vllm:request_queue_time_seconds": hist(1.97, 16), "vllm:time_to_first_token_seconds": hist(2.4, 16)}
    full_batch = load_scrapes({}, {"vllm:num_requests_waiting": 12, "vllm:num_requests_running": 8,
                                   "vllm:kv_cache_usage_perc": 0.31}, {**histos, "vllm:kv_cache_usage_perc": 0.02})
    write_case(name, "fires-full-batch-kv-headroom",
               bundle(stream=stream(direct, concurrency=20), metrics=full_batch,
                      log=vllm_log({"max_num_seqs": 8}, kv_tokens=131072)),
               why="queue 1.97 s of TTFT 2.4 s (82 %), 12 waiting, running = max_num_seqs = 8, KV <= 31 %: "
                   "raise max_num_seqs to the peak demand 20 (8 running + 12 waiting); the KV cache fits "
                   "131072 x 0.9 / (256 + 6) tokens per request = 450",
               expect={"severity": "critical", "setting": "max_num_seqs",
                       "summary_contains": ["82 %", "running = max_num_seqs = 8", "KV usage <= 31 %"]})
    write_case(name, "quiet-running-below-max-num-seqs",
               bundle(stream=stream(direct, concurrency=20), metrics=full_batch,
                      log=vllm_log({"max_num_seqs": 32}, kv_tokens=131072)),
               why="the same queue (82 % of TTFT, 12 waiting, KV <= 31 %) but only 8 of max_num_seqs 32 ran: "
                   "neither the batch limit nor the KV cache held the requests, so raising max_num_seqs "
                   "would change nothing")
    above_default = load_scrapes({}, {"vllm:num_requests_waiting": 12, "vllm:num_requests_running": 300,
                                      "vllm:kv_cache_usage_perc": 0.31}, {**histos, "vllm:kv_cache_usage_perc": 0.02})
    write_case(name, "fires-direction-only-above-default-lower-bound",
               bundle(stream=stream(direct, concurrency=312), metrics=above_default,
                      log=vllm_log({}, kv_tokens=4_000_000)),
               why="vllm serve on a GPU without --max-num-seqs: V1's default there is at least 256 (1024 on cards "
                   "with >= 70 GiB), and 300 ran: the limit in use is unknown, so the batch is not claimed full and "
                   "the advice is the direction only, never a number that could lower a 1024 limit",
               expect={"severity": "critical", "setting": "max_num_seqs",
                       "summary_contains": ["running up to 300, above vLLM's default lower bound of 256", "unknown"]})
    kv_full = load_scrapes({}, {"vllm:num_requests_waiting": 9, "vllm:num_requests_running": 5,
                                "vllm:kv_cache_usage_perc": 0.97}, {**histos, "vllm:kv_cache_usage_perc": 0.1})
    write_case(name, "fires-kv-full-needs-capacity",
               bundle(stream=stream(direct, concurrency=14), metrics=kv_full,
                      log=vllm_log({"max_num_seqs": 8}, kv_tokens=4096)),
               why="queue dominates and KV usage reached 97 % with 5 of 8 running: memory binds, add replicas",
               expect={"setting": "replicas"})
    write_case(name, "fires-real-vllm-0.32-scrapes", bundle(metrics=real_window()),
               why=REAL_SCRAPES + ": queue 0.28 s of TTFT 0.46 s (61 %); no during-scrape, KV 0 -> raise max_num_seqs",
               expect={"severity": "warning", "setting": "max_num_seqs", "summary_contains": ["61 %"]})
    short = load_scrapes({}, {"vllm:num_requests_waiting": 0, "vllm:num_requests_running": 2},
                         {"vllm:request_queue_time_seconds": hist(0.004, 16),
                          "vllm:time_to_first_token_seconds": hist(0.2, 16)})
    write_case(name, "quiet-short-queue", bundle(stream=stream(steady(4, ttft=0.2, gap=0.03)), metrics=short),
               why="queue 4 ms of TTFT 200 ms")
    write_case(name, "na-no-queue-histogram",
               bundle(metrics=load_scrapes({}, {"vllm:num_requests_running": 2}, {"vllm:kv_cache_usage_perc": 0.1})),
               why="the scrapes have no vllm:request_queue_time_seconds (V0 before 0.6)")
    write_case(name, "missing-no-metrics", bundle(stream=stream(direct)), why="no /metrics scrape at all")


# --------------------------------------------------------------------------- LD102

    one_slot = load_scrapes({}, {"llamacpp:requests_deferred": 3, "llamacpp:requests_processing": 1}, {})
    falcon = real_log("llamacpp/b4351-falcon3-1b-vulkan-startup.log", folder="engines")
    write_case(name, "fires-llama-cpp-slots-full-no-queue-histogram",
               bundle(stream=stream(steady(4, ttft=6.3, gap=0.004), concurrency=4), metrics=one_slot, log=falcon),
               why="llama.cpp exposes no queue-time histogram: 3 requests deferred while its one slot "
                   "(n_slots = 1 in a real b4351 startup) was busy is the queue, named in its own flag",
               expect={"severity": "warning", "setting": "max_num_seqs",
                       "summary_contains": ["not exposed by llama.cpp: its /metrics has no queue-time histogram",
                                            "waiting up to 3"]})
    write_case(name, "na-llama-cpp-nothing-waited",
               bundle(stream=stream(steady(4, ttft=0.3, gap=0.004)),
                      metrics=load_scrapes({}, {"llamacpp:requests_deferred": 0, "llamacpp:requests_processing": 1}, {}),
                      log=falcon),
               why="llama.cpp, no queue-time histogram and nothing deferred: the gauges say nothing of a queue")


def cases_prefill_bound_first_token() -> None:
    name = "prefill-bound-first-token"
    long_prompts = steady(4, ttft=1.25, gap=0.03, prompt_tokens=3900)
    scrapes = load_scrapes({}, {"vllm:num_requests_running": 2, "vllm:kv_cache_usage_perc": 0.2},
                           {"vllm:request_queue_time_seconds": hist(0.05, 8),
                            "vllm:request_prefill_time_seconds": hist(1.1, 8),
                            "vllm:time_to_first_token_seconds": hist(1.2, 8)})
    write_case(name, "fires-prefix-caching-off",
               bundle(stream=app_payload(stream(long_prompts)), metrics=scrapes,
                      log=vllm_log({"enable_prefix_caching": False, "max_num_batched_tokens": 8192})),
               why="prefill 1.1 s of TTFT 1.2 s on 3,900-token prompts, prefix caching off, and the probe sent "
                   "the application's body (--payload) 4 times: the prompts share a prefix",
               expect={"setting": "enable_prefix_caching", "summary_contains": ["92 %", "3,900"]})
    write_case(name, "fires-caching-off-unique-prompts",
               bundle(stream=default_payload(stream(long_prompts)), metrics=scrapes,
                      log=vllm_log({"enable_prefix_caching": False, "enable_chunked_prefill": True,
                                    "max_num_batched_tokens": 512})),
               why="the same prefill with prefix caching off, but the default probe numbers each prompt: nothing "
                   "is shared, so caching would not help; falls through to the 512-token chunk budget",
               expect={"setting": "max_num_batched_tokens", "summary_contains": ["no prompt prefix was seen shared"]})
    write_case(name, "fires-small-chunk-budget",
               bundle(stream=stream(long_prompts), metrics=scrapes,
                      log=vllm_log({"enable_chunked_prefill": True, "max_num_batched_tokens": 512})),
               why="chunked prefill in 512-token steps: a 3,900-token prompt needs 8 steps; suggest 4096",
               expect={"setting": "max_num_batched_tokens"})
    write_case(name, "fires-compute-bound",
               bundle(stream=stream(long_prompts), metrics=scrapes,
                      log=vllm_log({"enable_chunked_prefill": True, "max_num_batched_tokens": 8192,
                                    "tensor_parallel_size": 1})),
               why="caching on and a large step budget: only more compute helps",
               expect={"setting": "tensor_parallel_size"})
    write_case(name, "quiet-short-prompts",
               bundle(stream=stream(steady(4, ttft=1.25, gap=0.03, prompt_tokens=200)), metrics=scrapes),
               why="prefill dominates but prompts are 200 tokens: slow steps, not long prompts")
    write_case(name, "quiet-real-vllm-0.32-scrapes", bundle(metrics=real_window()),
               why=REAL_SCRAPES + ": prefill 0.11 s is 24 % of TTFT 0.46 s")
    write_case(name, "na-no-prefill-histograms",
               bundle(metrics=load_scrapes({}, {"vllm:num_requests_running": 2}, {"vllm:kv_cache_usage_perc": 0.1})),
               why="no prefill, TTFT or queue histogram")


# --------------------------------------------------------------------------- LD103


def cases_slow_cold_start() -> None:
    name = "slow-cold-start"
    write_case(name, "fires-cold-first-request",
               bundle(stream=stream(steady(8, ttft=0.12, gap=0.03, warmup_ttft=4.1))),
               why="warm-up TTFT 4.1 s vs steady 120 ms (34x): warning",
               expect={"severity": "warning", "setting": "warmup", "summary_contains": ["34x"]})
    real = nginx_traces.load("direct", "chat", "direct")
    real[0].warmup = True
    write_case(name, "quiet-real-vllm-0.32-direct", bundle(stream=stream(real)),
               why="real vLLM 0.32 direct.chat.jsonl (fixtures/real-vllm/nginx), first request as warm-up: "
                   "116 ms vs 61 ms is under 3x")
    busy = load_scrapes({}, {"vllm:num_requests_running": 4, "vllm:num_requests_waiting": 2}, {})
    write_case(name, "quiet-warmup-queued-behind-other-users",
               bundle(stream=stream(steady(8, ttft=0.12, gap=0.03, warmup_ttft=4.1)), metrics=busy),
               why="the same 4.1 s warm-up, but the scrape while it waited shows 4 running and 2 waiting, "
                   "the probe's own warm-up one of them: it queued behind other users, no cold start")
    write_case(name, "na-no-warmup", bundle(stream=stream(steady(8, ttft=0.12, gap=0.03))),
               why="the probe ran with --warmup 0")
    prefills = load_scrapes({}, {"vllm:num_requests_running": 1, "vllm:num_requests_waiting": 0},
                            {"vllm:prompt_tokens_total": 40000})
    write_case(name, "quiet-warmup-behind-other-users-prefills",
               bundle(stream=stream(steady(8, ttft=0.12, gap=0.03, warmup_ttft=4.1)), metrics=prefills),
               why="the same 4.1 s warm-up; no scrape caught another request in the engine, but /metrics counted "
                   "40,000 prompt tokens against the probe's 2,304: it waited behind other users' prefills")
    served = load_scrapes({"vllm:request_success_total": {"stop": 40}}, {}, {"vllm:request_success_total": {"stop": 49}})
    write_case(name, "quiet-engine-already-serving",
               bundle(stream=stream(steady(8, ttft=0.12, gap=0.03, warmup_ttft=4.1)), metrics=served),
               why="the same 4.1 s warm-up, but the scrape before it shows 40 requests finished: the engine was warm")

    def started(ago: float) -> MetricsEvidence:
        evidence = load_scrapes({}, {"vllm:num_requests_running": 1}, {})
        before = evidence.scrapes[0]
        before.text += ("# HELP process_start_time_seconds s\n# TYPE process_start_time_seconds gauge\n"
                        f"process_start_time_seconds {before.wall - ago:.2f}\n")
        return evidence

    write_case(name, "quiet-engine-up-for-minutes",
               bundle(stream=stream(steady(8, ttft=0.12, gap=0.03, warmup_ttft=4.1)), metrics=started(600.0)),
               why="the same 4.1 s warm-up, no request finished yet, but the engine process had been up 10 min "
                   "(process_start_time_seconds): not a cold start")
    write_case(name, "fires-engine-just-started",
               bundle(stream=stream(steady(8, ttft=0.12, gap=0.03, warmup_ttft=4.1)), metrics=started(20.0)),
               why="the same 4.1 s warm-up on an engine up 20 s with no request finished: a cold start",
               expect={"severity": "warning", "setting": "warmup"})


# --------------------------------------------------------------------------- LD105


def waited(outcome: str = WEDGED, *, sent: float = 0.1, end: float = 16.2) -> RequestTrace:
    """A request accepted (HTTP 200, headers) that got no token before the probe stopped waiting."""
    return RequestTrace(index=0, path="direct", warmup=True, t_scheduled=sent, t_sent=sent, t_connected=sent,
                        t_headers=sent + 0.01, status=200, http_version="HTTP/1.1", outcome=outcome, t_end=end,
                        t_failed=end, error=f"synthetic {outcome}", headers={"content-type": "text/event-stream"})


def engine_counters(generated: int, ttft_count: int = 5, prefill_count: int = 5) -> dict[str, object]:
    """vLLM's progress counters and gauges as one scrape shows them (one request running)."""
    return {"vllm:generation_tokens_total": generated, "vllm:prompt_tokens_total": 1280,
            "vllm:request_success_total": {"length": 5}, "vllm:time_to_first_token_seconds": hist(0.08, ttft_count),
            "vllm:request_prefill_time_seconds": hist(0.05, prefill_count), "vllm:num_requests_running": 1,
            "vllm:num_requests_waiting": 0}


def cases_engine_wedged() -> None:
    name = "engine-wedged"
    frozen = window(engine_counters(320), [engine_counters(320)] * 16, engine_counters(320), end=16.3)
    stop = WedgeStop(t_detected=16.2, t_first_waiting=0.1, still_since=-0.1, still_until=16.0, scrapes=17, counters=5,
                     bound_s=15.0, in_flight=1, sent=1, running=1.0, waiting=0.0)
    watched = stream([waited()])
    watched.wedge = stop
    write_case(name, "fires-watchdog-stopped-frozen-engine", bundle(stream=watched, metrics=frozen),
               why="the warm-up request was accepted and got no token; every engine counter (tokens, finished requests, "
                   "TTFT and prefill histogram counts) stood still over 17 scrapes; the watchdog stopped after 16.1 s",
               expect={"severity": "critical", "setting": "restart_and_health_check",
                       "summary_contains": ["none of 5 engine counters", "watchdog stopped after 16.1 s"]})
    stalled = window(engine_counters(320), [engine_counters(320)] * 30, engine_counters(320), end=30.5)
    write_case(name, "fires-stall-timeout-without-watchdog", bundle(stream=stream([waited("stall", end=30.2)]), metrics=stalled),
               why="a bundle without the watchdog: the request stalled 30 s (the stall timeout) with every counter still",
               expect={"severity": "critical", "setting": "restart_and_health_check"})
    flowing = window(engine_counters(320), [engine_counters(320 + 40 * i) for i in range(1, 31)], engine_counters(1600),
                     end=30.5)
    write_case(name, "quiet-queued-while-tokens-flow", bundle(stream=stream([waited("stall", end=30.2)]), metrics=flowing),
               why="the request waited 30 s without a token, but the engine generated 40 tokens a second for others: "
                   "queueing, not a wedge")
    prefill = window(engine_counters(320), [engine_counters(320)] * 11 + [engine_counters(321, 6, 6)] * 4,
                     engine_counters(321, 6, 6), end=15.5)
    write_case(name, "quiet-slow-prefill-ends", bundle(stream=stream([waited("deadline", end=15.2)]), metrics=prefill),
               why="a long prefill: nothing moved for 11 s, then the prefill and TTFT histograms observed it: the "
                   "counters stood still only 4 s before the probe stopped")
    refused = stream([request("direct", 0, ttft=0.0, gaps=[], outcome="connect")])
    write_case(name, "quiet-dead-engine-refuses", bundle(stream=refused, metrics=frozen),
               why="the engine refused the connection: a dead engine, which the error-rate check names")
    write_case(name, "na-no-metrics", bundle(stream=watched),
               why="no /metrics: the counters cannot say whether the engine moved")
    llama = window({"llamacpp:requests_processing": 1}, [{"llamacpp:requests_processing": 1}] * 16,
                   {"llamacpp:requests_processing": 1}, end=16.3)
    write_case(name, "na-not-exposed-by-llamacpp", bundle(stream=watched, metrics=llama),
               why="a /metrics with no token or request counter (only a gauge): not exposed by that engine")


# --------------------------------------------------------------------------- LD210


PAUSES = ((1.0, 1.4), (2.2, 2.6), (3.4, 3.8))


def paused(index: int, pauses: tuple[tuple[float, float], ...], *, start: float = 0.0, tokens: int = 90,
           itl: float = 0.05) -> RequestTrace:
    """A stream sent at ``start`` whose tokens come every ``itl``, held to the end of each of ``pauses``."""
    times, t = [], start + 0.05
    for _ in range(tokens):
        t = next((b for a, b in pauses if a <= t < b), t)
        times.append(t)
        t += itl
    req = request("direct", index, ttft=times[0] - start, gaps=[b - a for a, b in itertools.pairwise(times)], start=start)
    req.prompt_tokens = 38
    return req


def runtime_scrapes(gc: list[int], prompts: list[int], *, preempted: int = 0, every: float = 0.5,
                    cores: float | None = None, gc_exported: bool = True) -> MetricsEvidence:
    """vLLM counters plus the serving process's GC and start time, one scrape every ``every`` s from t=0;
    with ``cores``, its CPU seconds growing at that rate; without ``gc_exported``, no GC counter."""
    scrapes = []
    for k, (collections, prompt) in enumerate(zip(gc, prompts, strict=True)):
        text = exposition({"vllm:prompt_tokens_total": prompt, "vllm:num_preemptions_total": preempted if k else 0,
                           "vllm:num_requests_running": 4})
        if gc_exported:
            text += ('# TYPE python_gc_collections counter\n'
                     f'python_gc_collections_total{{generation="0"}} {40 * collections}.0\n'
                     f'python_gc_collections_total{{generation="2"}} {collections}.0\n')
        text += "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds 1699996400.0\n"
        if cores is not None:
            text += f"# TYPE process_cpu_seconds counter\nprocess_cpu_seconds_total {8.0 + cores * k * every:.3f}\n"
        scrapes.append(Scrape(phase="during", t=k * every, wall=1_700_000_000.0 + k * every, status=200,
                              content_type="text/plain; version=0.0.4", text=text))
    return MetricsEvidence(url="http://127.0.0.1:8000/metrics", scrapes=scrapes, interval_s=every)


def cases_engine_wide_pauses() -> None:
    name = "engine-wide-pauses"
    together = stream([paused(i, PAUSES) for i in range(4)], concurrency=4)
    gc = [0, 0, 1, 1, 2, 2, 2, 3, 3, 3, 3]  # one full collection per freeze
    flat = [152] * 11  # the four prompts, prefilled before the first scrape's bracket closes
    write_case(name, "fires-every-stream-freezes-at-once", bundle(stream=together, metrics=runtime_scrapes(gc, flat)),
               why="4 concurrent streams, tokens every 50 ms, all held 400 ms at 1.0, 2.2 and 3.4 s; no request sent "
                   "then, prompt tokens flat, gen-2 GC +3, no preemption",
               expect={"severity": "warning", "setting": "gc_freeze", "summary_contains": ["3 times", "GC collections +3"]})
    write_case(name, "fires-no-metrics", bundle(stream=together),
               why="the same streams without /metrics: the probe saw no send during the freezes; no scrape to read "
                   "the GC counter from", expect={"setting": "gc_freeze", "summary_contains": ["no /metrics scrape"]})
    write_case(name, "fires-no-gc-counter",
               bundle(stream=together, metrics=runtime_scrapes(gc, flat, gc_exported=False)),
               why="the same freezes, scraped, but the serving process's /metrics has no python_gc_collections_total "
                   "(a multiprocess exporter): the freezes stand; the counter is named as absent",
               expect={"setting": "gc_freeze", "summary_contains": ["its /metrics has no python_gc_collections_total"]})
    growing = [152 + 900 * sum(1 for _, end in PAUSES if end <= k * 0.5) for k in range(11)]  # 900 more by each freeze's end
    write_case(name, "quiet-prompts-arrive-at-each-freeze", bundle(stream=together, metrics=runtime_scrapes(gc, growing)),
               why="the same freezes, but 900 prompt tokens of other users were prefilled around each: prefill "
                   "interference (LD202's), not a pause of the engine")
    write_case(name, "quiet-preemption", bundle(stream=together, metrics=runtime_scrapes(gc, flat, preempted=3)),
               why="the same freezes with 3 preemptions in the window: LD201's")
    growing_pauses = ((1.0, 1.3), (2.2, 2.7), (3.4, 4.1))
    write_case(name, "fires-freezes-grow", bundle(stream=stream([paused(i, growing_pauses) for i in range(4)], concurrency=4),
                                                 metrics=runtime_scrapes(gc, flat)),
               why="the same four streams, held 300, 500 and 700 ms: the pause grows as the run goes on",
               expect={"setting": "gc_freeze", "summary_contains": ["grew from 3"]})
    alone = stream([paused(0, PAUSES), *(paused(i, ()) for i in range(1, 4))], concurrency=4)
    write_case(name, "quiet-one-stream-freezes", bundle(stream=alone, metrics=runtime_scrapes(gc, flat)),
               why="one stream freezes three times, the three others run on: not the whole engine")
    write_case(name, "quiet-serving-process-at-its-last-core",
               bundle(stream=together, metrics=runtime_scrapes(gc, flat, cores=0.96)),
               why="the same freezes while the serving process's CPU grew 0.96 s per second over the window: a process "
                   "at its last core stops every stream at once, collection or not; CPU starvation, not claimed as "
                   "an engine-wide pause")
    write_case(name, "fires-idle-serving-process", bundle(stream=together, metrics=runtime_scrapes(gc, flat, cores=0.2)),
               why="the same freezes, the serving process at 0.2 cores: no starvation over the window",
               expect={"setting": "gc_freeze", "summary_contains": ["3 times"]})
    busy = HostEvidence(cpu_percent=98.0, cpu_count_logical=8, load_avg=[11.5, 9.0, 6.0])
    write_case(name, "fires-host-busy-at-the-start", bundle(stream=together, metrics=runtime_scrapes(gc, flat), host=busy),
               why="the same freezes; psutil saw the host at 98 % CPU (load 11.5 on 8 CPUs) before the probe: a "
                   "snapshot, not the window, so the finding stands with the caveat that it may be starvation",
               expect={"setting": "gc_freeze", "summary_contains": ["CPU-saturated when the run began"]})
    queued = HostEvidence(cpu_percent=41.0, cpu_count_logical=8, load_avg=[9.2, 8.4, 7.0])
    write_case(name, "fires-host-loaded-at-the-start", bundle(stream=together, metrics=runtime_scrapes(gc, flat), host=queued),
               why="the same freezes; psutil's sample caught the host at 41 % CPU, but its load average was 9.2 on 8 "
                   "CPUs: more runnable tasks than CPUs, so starvation is as possible (LD507 calls it saturated too)",
               expect={"setting": "gc_freeze", "summary_contains": ["CPU-saturated when the run began (load 9.2 on 8 CPUs"]})
    calm = HostEvidence(cpu_percent=41.0, cpu_count_logical=8, load_avg=[3.1, 2.8, 2.5])
    write_case(name, "fires-host-calm-at-the-start", bundle(stream=together, metrics=runtime_scrapes(gc, flat), host=calm),
               why="the same freezes on a host at 41 % CPU, load 3.1 on 8 CPUs: no caveat",
               expect={"setting": "gc_freeze", "summary_contains": ["3 times"], "summary_lacks": ["CPU-saturated"]})
    sequential = stream([paused(i, PAUSES, start=6.0 * i) for i in range(3)])
    write_case(name, "na-one-stream-at-a-time", bundle(stream=sequential),
               why="concurrency 1: no two streams to freeze together")


# --------------------------------------------------------------------------- LD211


def cpu_scrapes(cores: float | None, itl_mean: float, *, gaps: int = 400, end: float = 28.0) -> MetricsEvidence:
    """Scrapes before, during and after a window: the engine's inter-token histogram filling with ``gaps``
    gaps of ``itl_mean`` and the serving process's CPU seconds growing at ``cores`` (None: not exported)."""
    scrapes = []
    for phase, t, share in (("before", -0.1, 0.0), ("during", end / 2, 0.5), ("after", end, 1.0)):
        n = round(gaps * share)
        text = exposition({"vllm:inter_token_latency_seconds": histogram([itl_mean] * n, ITL_BOUNDS),
                           "vllm:num_requests_running": 8})
        if cores is not None:
            text += f"# TYPE process_cpu_seconds counter\nprocess_cpu_seconds_total {100.0 + cores * (t + 0.1):.2f}\n"
        scrapes.append(Scrape(phase=phase, t=t, wall=1_700_000_000.0 + t, status=200,
                              content_type="text/plain; version=0.0.4", text=text))
    return MetricsEvidence(url="http://127.0.0.1:8000/metrics", scrapes=scrapes, interval_s=1.0)


def cases_front_end_saturated() -> None:
    name = "front-end-saturated"
    slow = stream(steady(8, ttft=0.1, gap=0.064, tokens=20), concurrency=8)
    write_case(name, "fires-api-server-pegged", bundle(stream=slow, metrics=cpu_scrapes(0.97, 0.021)),
               why="the API server's CPU grew 0.97 s per second over 28 s; the engine's inter-token mean 21 ms, the "
                   "client's TPOT 64 ms (3x)",
               expect={"severity": "warning", "setting": "api_server_count", "summary_contains": ["0.97 cores", "3.0x"]})
    write_case(name, "quiet-api-server-idle", bundle(stream=slow, metrics=cpu_scrapes(0.12, 0.021)),
               why="the same gap between engine and client, but the API server used 0.12 cores: not the front end")
    fast = stream(steady(8, ttft=0.1, gap=0.025, tokens=20), concurrency=8)
    write_case(name, "quiet-client-keeps-up", bundle(stream=fast, metrics=cpu_scrapes(0.95, 0.021)),
               why="a busy API server (0.95 cores) whose streams keep up with the engine: TPOT 25 ms vs 21 ms")
    write_case(name, "na-no-process-cpu", bundle(stream=slow, metrics=cpu_scrapes(None, 0.021)),
               why="a /metrics without process_cpu_seconds_total (a multiprocess exporter): not exposed")


# --------------------------------------------------------------------------- LD104


def cases_slow_transport() -> None:
    name = "slow-transport"
    scrapes = load_scrapes({}, {"vllm:num_requests_running": 1},
                           {"vllm:time_to_first_token_seconds": hist(0.06, 8)})
    write_case(name, "fires-far-client", bundle(stream=stream(steady(8, ttft=0.42, gap=0.03)), metrics=scrapes),
               why="client TTFT 420 ms vs server 60 ms on the direct path, connections reused",
               expect={"setting": "region_placement", "summary_contains": ["360 ms"]})
    reqs = steady(8, ttft=0.42, gap=0.03)
    for r in reqs:
        r.connection_reused = False
        r.t_connected = r.t_sent + 0.3  # TCP + TLS handshakes to a far endpoint
    write_case(name, "fires-new-connection-each-request", bundle(stream=stream(reqs), metrics=scrapes),
               why="every request opens a connection taking 300 ms of the 360 ms outside the server",
               expect={"setting": "http_keepalive"})
    write_case(name, "quiet-same-host", bundle(stream=stream(steady(8, ttft=0.075, gap=0.03)), metrics=scrapes),
               why="15 ms between client and server")
    lagged = stream(steady(8, ttft=0.13, gap=0.03))
    lagged.client.loop_lag_p99_ms, lagged.client.suspect = 40.0, True
    write_case(name, "quiet-client-lag-explains-it", bundle(stream=lagged, metrics=scrapes),
               why="client TTFT 130 ms vs server 60 ms, but the client's event loop lagged 40 ms at p99: "
                   "30 ms is left for the network (a loaded client on the engine's own host)")
    write_case(name, "na-gateway-only",
               bundle(stream=stream(steady(8, ttft=0.42, gap=0.03, path="gateway")), metrics=scrapes),
               why="no direct path: the gateway's share cannot be told from the network's")
    busy = load_scrapes({}, {"vllm:num_requests_running": 4}, {"vllm:time_to_first_token_seconds": hist(0.06, 80)})
    write_case(name, "na-other-users-dominate-the-server-mean",
               bundle(stream=stream(steady(8, ttft=0.42, gap=0.03)), metrics=busy),
               why="the server timed 80 first tokens while the probe sent 8: its mean is mostly other users' "
                   "requests, so client minus server is not the network")


# --------------------------------------------------------------------------- LD201


def stalled(n: int, *, stall: float, every: int = 2) -> list[RequestTrace]:
    """Streams of 30 ms gaps; every ``every``-th one stalls ``stall`` seconds mid-answer (preempted).

    Long-context requests (16,000-token prompts, 2,000-token answers) on an 8B model whose KV
    cache holds 245,760 tokens in 30 GiB: 13 such requests fit at full length, 32 are admitted.
    """
    reqs = []
    for i in range(n):
        gaps = [0.03] * 15
        if i % every == 0:
            gaps[8] = stall
        reqs.append(request("direct", i, ttft=0.15, gaps=gaps, start=i * 0.1))
    return reqs


def long_context(reqs: list[RequestTrace], concurrency: int) -> StreamEvidence:
    """The probe's shape for ``stalled``: answers are cut to 16 events to keep fixtures small, so
    tokens per request come from the shape (no usage trailer on a cut answer)."""
    for r in reqs:
        r.completion_tokens = None
    ev = stream(reqs, concurrency=concurrency)
    ev.shape.prompt_tokens, ev.shape.max_tokens = 16000, 2000
    return ev


def cases_kv_pressure_preemption() -> None:
    name = "kv-pressure-preemption"
    pressure = load_scrapes({}, {"vllm:kv_cache_usage_perc": 0.97, "vllm:num_requests_running": 8,
                                 "vllm:num_requests_waiting": 3, "vllm:num_preemptions_total": 0},
                            {"vllm:num_preemptions_total": 3, "vllm:kv_cache_usage_perc": 0.1})
    args = {"max_num_seqs": 32, "gpu_memory_utilization": 0.6, "max_model_len": 32768}
    write_case(name, "fires-preempted-no-gpu-headroom",
               bundle(stream=long_context(stalled(4, stall=9.0), 4), metrics=pressure,
                      log=vllm_log(args, kv_tokens=245760, max_len=32768, kv_gib=30.0),
                      gpu=gpu(h100(memory_free_bytes=int(1.6 * GIB)))),
               why="3 preemptions counted at the after-scrape (as on vLLM 0.32, on resume), KV 97 %, 9 s stalls; "
                   "2 % GPU memory free -> max_num_seqs 245,760 / 18,000 = 13",
               expect={"severity": "critical", "setting": "max_num_seqs",
                       "summary_contains": ["3 preemptions", "KV usage up to 97 %"]})
    write_case(name, "fires-preempted-gpu-headroom",
               bundle(stream=long_context(stalled(4, stall=9.0), 4), metrics=pressure,
                      log=vllm_log(args, kv_tokens=245760, max_len=32768, kv_gib=30.0),
                      gpu=gpu(h100(memory_used_bytes=48 * GIB, memory_free_bytes=32 * GIB))),
               why="same pressure, NVML shows 40 % free: gpu_memory_utilization 0.6 -> 0.95, "
                   "KV grows by 28 GiB at 8,192 tokens per GiB",
               expect={"setting": "gpu_memory_utilization"})
    write_case(name, "fires-kv-sized-in-bytes",
               bundle(stream=long_context(stalled(4, stall=9.0), 4), metrics=pressure,
                      log=vllm_log({"max_num_seqs": 32, "kv_cache_memory_bytes": 32 * 2**30, "max_model_len": 32768},
                                   kv_tokens=245760, max_len=32768)),
               why="the same pressure with --kv-cache-memory-bytes (as the real-vLLM CPU stage runs): "
                   "gpu_memory_utilization cannot grow the cache, so lower max_num_seqs to 13, whatever NVML says",
               expect={"setting": "max_num_seqs"})
    retracted = load_scrapes({}, {"sglang:token_usage": 0.97, "sglang:num_running_reqs": 8,
                                  "sglang:num_queue_reqs": 3, "sglang:num_retracted_requests_total": 0},
                             {"sglang:num_retracted_requests_total": 3, "sglang:token_usage": 0.1})
    write_case(name, "fires-sglang-retractions",
               bundle(stream=long_context(stalled(4, stall=9.0), 4), metrics=retracted),
               why="the same pressure on SGLang (synthetic scrapes in its metric names, collector.py): 3 retracted "
                   "requests, token usage 97 %, 9 s stalls; no NVML evidence: the remediation names SGLang's "
                   "--mem-fraction-static, with --max-running-requests as the alternative",
               expect={"severity": "critical", "setting": "gpu_memory_utilization",
                       "summary_contains": ["3 preemptions"]})
    full_no_counter = load_scrapes({}, {"vllm:kv_cache_usage_perc": 0.99, "vllm:num_requests_running": 8,
                                        "vllm:num_preemptions_total": 0},
                                   {"vllm:num_preemptions_total": 0, "vllm:kv_cache_usage_perc": 0.2})
    write_case(name, "fires-kv-full-with-stalls",
               bundle(stream=long_context(stalled(4, stall=6.0), 4), metrics=full_no_counter),
               why="no counted preemption (scraped before the preempted requests resumed) but KV 99 % and 6 s stalls; "
                   "no NVML evidence: gpu_memory_utilization if free, else max_num_seqs, in one suggestion",
               expect={"severity": "warning", "setting": "gpu_memory_utilization"})
    def served(preempted: int, finished: int) -> MetricsEvidence:
        return load_scrapes({"vllm:request_success_total": {"stop": 0, "length": 0}},
                            {"vllm:kv_cache_usage_perc": 0.98, "vllm:num_requests_running": 8,
                             "vllm:num_requests_waiting": 4, "vllm:num_preemptions_total": 0},
                            {"vllm:num_preemptions_total": preempted,
                             "vllm:request_success_total": {"stop": 0, "length": finished}})
    spared = stream(steady(8, ttft=0.1, gap=0.03))
    write_case(name, "fires-critical-other-users-preempted",
               bundle(stream=spared, metrics=served(12, 60)),
               why="12 preemptions over 60 finished requests (every user's), KV 98 %; the probe's own 8 streams "
                   "were spared (no stall): a fifth of the requests froze, which is critical, not a warning",
               expect={"severity": "critical", "summary_contains": ["0.20 per finished request"]})
    write_case(name, "fires-warning-a-few-preemptions",
               bundle(stream=spared, metrics=served(2, 60)),
               why="2 preemptions over 60 finished requests, the probe's streams spared: a warning",
               expect={"severity": "warning"})
    write_case(name, "quiet-real-vllm-0.32-scrapes", bundle(metrics=real_window()),
               why=REAL_SCRAPES + ": no preemption, KV usage 0")
    calm = load_scrapes({}, {"vllm:kv_cache_usage_perc": 0.4, "vllm:num_preemptions_total": 0},
                        {"vllm:num_preemptions_total": 0, "vllm:kv_cache_usage_perc": 0.1})
    write_case(name, "quiet-kv-headroom", bundle(stream=stream(steady(8, ttft=0.1, gap=0.03)), metrics=calm),
               why="KV usage up to 40 %, no preemption")
    write_case(name, "na-no-kv-metrics",
               bundle(metrics=load_scrapes({}, {}, {"vllm:time_to_first_token_seconds": hist(0.1, 4)})),
               why="neither the preemption counter nor a KV usage gauge")


# --------------------------------------------------------------------------- LD202


ARRIVALS = [0.0, 0.4, 0.8, 1.2, 1.6]


def cases_prefill_interference() -> None:
    name = "prefill-interference"
    # 900 prompt tokens of other users at 0.5, 2.0 and 4.5 s: between the freezes, none around one
    between_freezes = [152 + 900 * sum(1 for at in (0.5, 2.0, 4.5) if at <= k * 0.5) for k in range(11)]
    write_case(name, "quiet-engine-wide-pause-no-prompt-at-the-freeze",
               bundle(stream=stream([paused(i, PAUSES) for i in range(4)], concurrency=4),
                      metrics=runtime_scrapes([0, 0, 1, 1, 2, 2, 2, 3, 3, 3, 3], between_freezes)),
               why="4 streams all freeze together three times; other users' prompts (2,700 tokens) were prefilled in "
                   "the window but the counter stood still across each freeze: an engine-wide pause (LD210), not prefill")
    stutter = simulate(ARRIVALS, 20, lambda running, new: 0.025 + 0.25 * new)
    write_case(name, "fires-prefill-steps-stall-streams",
               bundle(stream=stream(stutter, concurrency=3),
                      log=vllm_log({"enable_chunked_prefill": True, "max_num_batched_tokens": 16384})),
               why="toy engine: 25 ms decode steps, a step carrying a prefill takes 250 ms more; requests every "
                   "0.4 s -> each running stream stalls as the next request gets its first token",
               expect={"setting": "max_num_batched_tokens", "summary_contains": ["max_num_batched_tokens 16384"]})
    smooth = simulate(ARRIVALS, 20, lambda running, new: 0.025 + 0.005 * new)
    write_case(name, "quiet-small-prefill-chunks", bundle(stream=stream(smooth, concurrency=3)),
               why="toy engine: a prefill adds 5 ms to its step, no large gap")
    freezes = [request("direct", i, ttft=0.1 + 0.01 * i, gaps=[1.0 if k in (20, 40) else 0.03 for k in range(60)])
               for i in range(3)]
    for req in freezes:
        req.prompt_tokens = 100
    foreign = load_scrapes({}, {"vllm:prompt_tokens_total": 0, "vllm:num_preemptions_total": 0},
                           {"vllm:prompt_tokens_total": 12300, "vllm:num_preemptions_total": 0})
    write_case(name, "fires-other-users-prefills", bundle(stream=stream(freezes, concurrency=3), metrics=foreign,
                                                          log=vllm_log({"max_num_batched_tokens": 8192})),
               why="3 streams freeze together for 1 s twice, at no probe request's first token; /metrics counted "
                   "12,300 prompt tokens against the probe's 300: other users' long prompts were prefilled",
               expect={"setting": "max_num_batched_tokens", "summary_contains": ["other requests were prefilled"]})
    preempting = load_scrapes({}, {"vllm:prompt_tokens_total": 0, "vllm:num_preemptions_total": 0},
                              {"vllm:prompt_tokens_total": 12300, "vllm:num_preemptions_total": 3})
    write_case(name, "quiet-shared-freezes-but-preempted", bundle(stream=stream(freezes, concurrency=3),
                                                                 metrics=preempting),
               why="the same shared freezes, but 3 preemptions: KV pressure (LD201) explains them, not prefills")
    itl = ITL_BOUNDS
    zeros = {"vllm:inter_token_latency_seconds": histogram([], itl), "vllm:request_prefill_time_seconds": histogram([], itl),
             "vllm:num_preemptions_total": 0, "vllm:prompt_tokens_total": 0, "vllm:request_success_total": {"length": 0}}
    stalled = {"vllm:inter_token_latency_seconds": histogram([0.02] * 400 + [1.4] * 9, itl),
               "vllm:request_prefill_time_seconds": histogram([1.5] * 3 + [0.02] * 9, itl),
               "vllm:num_preemptions_total": 0, "vllm:prompt_tokens_total": 18600,
               "vllm:request_success_total": {"length": 12}}
    write_case(name, "fires-server-histograms-only",
               bundle(metrics=window(zeros, [], stalled), log=vllm_log({"max_num_batched_tokens": 8192})),
               why="no probe stream hit: the server's inter-token histogram has 9 gaps over 1 s beside a 25 ms median, "
                   "3 of 12 prefills took 1.5 s (6,000-token prompts), no preemption; max_num_batched_tokens 8192",
               expect={"setting": "max_num_batched_tokens", "severity": "warning",
                       "summary_contains": ["9 inter-token gaps over 1.00 s", "max_num_batched_tokens 8192"]})
    # vLLM's tokens-per-step buckets (0.32: powers of two from 8 up to the step budget, and 1)
    step_bounds = (1.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0, 16384.0)
    steps = "vllm:iteration_tokens_total"
    cpu_healthy = {"vllm:inter_token_latency_seconds": histogram([0.022] * 3035 + [0.56] * 16, itl),
                   "vllm:request_prefill_time_seconds": histogram([0.41] * 50, itl),
                   steps: histogram([1] * 1100 + [2] * 1900 + [103] * 35 + [355] * 15, step_bounds),
                   "vllm:num_preemptions_total": 0, "vllm:prompt_tokens_total": 8830,
                   "vllm:request_success_total": {"length": 50}}
    write_case(name, "quiet-server-histograms-small-steps",
               bundle(metrics=window({**zeros, steps: histogram([], step_bounds)}, [], cpu_healthy)),
               why="the healthy control of the real-vLLM stage as CI saw it (2026-12-06): on a CPU build each "
                   "100-350-token prompt takes 0.4 s to prefill, so 16 of 3,051 gaps exceed 0.5 s, but no engine "
                   "step held over 512 tokens (vllm:iteration_tokens_total) and the log does not say the budget: "
                   "no budget the lever sets (512 at least) would cut a step")
    crowded = {**cpu_healthy, "vllm:inter_token_latency_seconds": histogram([0.022] * 3035 + [1.4] * 40, itl),
               steps: histogram([2] * 3000 + [4010] * 40, step_bounds)}
    write_case(name, "fires-server-histograms-several-prompts-per-step",
               bundle(metrics=window({**zeros, steps: histogram([], step_bounds)}, [], crowded),
                      log=vllm_log({"max_num_batched_tokens": 8192})),
               why="no prompt over 1,000 tokens, but four arrived together 40 times: steps of about 4,000 tokens "
                   "(vllm:iteration_tokens_total <= 4096) stall the streams 1.4 s each, and a budget cut from 8192 "
                   "to 2048 splits each in two",
               expect={"setting": "max_num_batched_tokens", "summary_contains": ["max_num_batched_tokens 8192"]})
    write_case(name, "quiet-step-budget-at-its-floor",
               bundle(stream=stream(stutter, concurrency=3),
                      log=vllm_log({"enable_chunked_prefill": True, "max_num_batched_tokens": 256})),
               why="the toy engine's stalls, with max_num_batched_tokens 256: already under the 512 floor, "
                   "a smaller budget is not the lever (it would have been raised to 512)")
    small_steps = window({steps: histogram([], step_bounds)}, [], {steps: histogram([3] * 400 + [300] * 5, step_bounds)})
    write_case(name, "fires-chunked-prefill-off-small-steps",
               bundle(stream=stream(stutter, concurrency=3), metrics=small_steps,
                      log=vllm_log({"enable_chunked_prefill": False})),
               why="the toy engine's stalls with chunked prefill off, every step under 512 tokens: turning it on "
                   "changes the steps whatever their size (a prompt no longer runs in a step of its own)",
               expect={"setting": "enable_chunked_prefill"})
    preempted = {**stalled, "vllm:num_preemptions_total": 4}
    write_case(name, "quiet-server-histograms-preempted", bundle(metrics=window(zeros, [], preempted)),
               why="the same long gaps, but 4 preemptions: KV pressure (LD201) explains them, not prefills")
    real = nginx_traces.load("direct", "chat", "direct")
    write_case(name, "na-real-vllm-0.32-one-stream-at-a-time", bundle(stream=stream(real)),
               why="real vLLM 0.32 direct.chat.jsonl (fixtures/real-vllm/nginx): sequential requests never overlap")


# --------------------------------------------------------------------------- LD203


RAMP = [i * 0.2 for i in range(4)]


def cases_batch_too_deep() -> None:
    name = "batch-too-deep"
    deep = simulate(RAMP, 24, lambda running, new: 0.01 + 0.012 * (running + new))
    write_case(name, "fires-tpot-grows-with-depth",
               bundle(stream=stream(deep, concurrency=4), log=vllm_log({"max_num_seqs": 16})),
               why="toy engine: a step costs 10 ms + 12 ms per sequence; 4 deep -> 58 ms > 50 ms; "
                   "(50 - 10) / 12 -> max_num_seqs 3",
               expect={"setting": "max_num_seqs"})
    flat = simulate(RAMP, 24, lambda running, new: 0.02)
    write_case(name, "quiet-flat-tpot", bundle(stream=stream(flat, concurrency=4)),
               why="toy engine: 20 ms per step at any depth")
    preempted = load_scrapes({}, {"vllm:num_preemptions_total": 0}, {"vllm:num_preemptions_total": 2})
    write_case(name, "quiet-preemption-explains-it", bundle(stream=stream(deep, concurrency=4), metrics=preempted),
               why="the same growth, but 2 preemptions: KV pressure (LD201), not depth")
    uncaptured = simulate(RAMP, 24, lambda running, new: 0.02 if running + new <= 2 else 0.08)
    write_case(name, "fires-batch-above-captured-graphs",
               bundle(stream=stream(uncaptured, concurrency=4),
                      log=vllm_log({"max_num_seqs": 16, "max_cudagraph_capture_size": 2})),
               why="toy engine: a step costs 20 ms while 2 sequences or fewer decode (a captured graph), 80 ms "
                   "above (eager); --max-cudagraph-capture-size 2 under max_num_seqs 16: the capture size is the "
                   "lever, not max_num_seqs",
               expect={"setting": "max_cudagraph_capture_size", "summary_contains": ["largest captured graph is 2"]})
    sglang = log([("[2026-03-03 23:21:38] INFO engine.py:158: server_args=ServerArgs(model_path='/srv/models/llama', "
                   "max_running_requests=16, cuda_graph_max_bs=2, disable_cuda_graph=False)"),
                  "[2026-03-03 23:21:39] Capture cuda graph bs [1, 2]"], source="sglang.log")
    write_case(name, "fires-sglang-batch-above-captured-graphs", bundle(stream=stream(uncaptured, concurrency=4), log=sglang),
               why="the same toy engine behind SGLang: lines in SGLang's format (engine.py's server_args, "
                   "cuda_graph_runner.py's capture sizes) with --cuda-graph-max-bs 2 under --max-running-requests 16",
               expect={"setting": "max_cudagraph_capture_size", "summary_contains": ["largest captured graph is 2"]})
    busy = load_scrapes({}, {"vllm:num_requests_running": 420, "vllm:num_preemptions_total": 0},
                        {"vllm:num_preemptions_total": 0})
    write_case(name, "fires-real-capped-capture-sizes",
               bundle(stream=stream(deep, concurrency=4), metrics=busy,
                      log=real_log("vNEW-pr30515-capping-cudagraph-capture-sizes-mamba.log")),
               why="the real log lines of vllm PR#30515 (capture sizes capped from 512 to 352 for Mamba cache "
                   "blocks); the toy engine's growing gaps, and other users keeping 420 sequences running "
                   "(synthetic scrapes): batches above 352 run without a graph",
               expect={"setting": "max_cudagraph_capture_size", "summary_contains": ["352"]})
    write_case(name, "na-one-stream-at-a-time", bundle(stream=stream(steady(8, ttft=0.1, gap=0.03))),
               why="sequential requests: depth 1 only")
    steps = load_scrapes({}, {"vllm:num_preemptions_total": 0},
                         {"vllm:num_preemptions_total": 0, "vllm:inter_token_latency_seconds": histogram([0.015] * 300, ITL_BOUNDS)})
    write_case(name, "quiet-engine-steps-did-not-slow", bundle(stream=stream(deep, concurrency=4), metrics=steps),
               why="the same client-side growth, but the engine's own inter-token histogram says 15 ms per step: "
                   "the steps did not slow with depth, the front end did (LD211)")


# --------------------------------------------------------------------------- LD204, LD205


def cases_eager_mode() -> None:
    name = "eager-mode"
    write_case(name, "fires-enforce-eager", bundle(log=vllm_log({"enforce_eager": True})),
               why="--enforce-eager in non-default args", expect={"severity": "info", "setting": "enforce_eager"})
    write_case(name, "quiet-real-vllm-0.32-log", bundle(log=real_startup_log()),
               why="real vLLM 0.32 startup log (fixtures/run_record/startup-0.32.0-cpu-default.log): enforce_eager=False")
    write_case(name, "na-no-log", bundle(run=RunRecord()), why="no startup log and no engine_config")


def cases_token_bundling() -> None:
    name = "token-bundling"
    bundled = steady(8, ttft=0.1, gap=0.12)
    for r in bundled:
        r.completion_tokens = 4 * len(r.tokens)
    write_case(name, "fires-stream-interval", bundle(stream=stream(bundled), log=vllm_log({"stream_interval": 4})),
               why="stream_interval 4: 4 tokens per chunk", expect={"severity": "warning", "setting": "stream_interval"})
    merged = steady(8, ttft=0.1, gap=0.05)
    for r in merged:
        r.completion_tokens = round(2.5 * len(r.tokens))
    write_case(name, "fires-api-server-merges", bundle(stream=stream(merged)),
               why="2.5 tokens per chunk with the default stream_interval: the API server falls behind",
               expect={"severity": "info", "setting": "api_server_count"})
    write_case(name, "quiet-real-vllm-0.32-direct", bundle(stream=stream(nginx_traces.load("direct", "chat", "direct"))),
               why="real vLLM 0.32 direct.chat.jsonl (fixtures/real-vllm/nginx): one token per chunk")
    no_usage = steady(8, ttft=0.1, gap=0.03)
    for r in no_usage:
        r.completion_tokens = None
    write_case(name, "na-no-usage", bundle(stream=stream(no_usage)), why="no usage trailer and no log")


# --------------------------------------------------------------------------- LD209

SPEC_LOGS = ROOT / "fixtures" / "spec-decode"
SPEC_TOTALS = re.compile(r"(?:Number of accepted tokens|Accepted): (\d+)(?: tokens)?, (?:Number of draft tokens|Drafted): (\d+)")


def spec_counts(name: str) -> list[tuple[int, int]]:
    """(accepted, drafted) of each real "Speculative metrics" / "SpecDecoding metrics" line in ``name``."""
    text = (SPEC_LOGS / name).read_text(encoding="utf-8")
    return [(int(m[1]), int(m[2])) for m in SPEC_TOTALS.finditer(text)]


def spec_window(accepted: float, drafted: float, drafts: float | None = None, *, itl: list[float] | None = None,
                before: tuple[float, float] = (0, 0)) -> MetricsEvidence:
    """Spec-decode counters from ``before`` (accepted, drafted) to the window's totals, with an
    inter-token histogram of ``itl`` gaps when given."""
    def counters(acc: float, dra: float, n: float | None) -> dict[str, object]:
        out: dict[str, object] = {"vllm:spec_decode_num_accepted_tokens_total": acc,
                                  "vllm:spec_decode_num_draft_tokens_total": dra}
        if n is not None:
            out["vllm:spec_decode_num_drafts_total"] = n
        if itl is not None:
            out["vllm:inter_token_latency_seconds"] = histogram([] if n == 0 and acc == 0 else itl, ITL_BOUNDS)
        return out
    zero_itl = {"vllm:inter_token_latency_seconds": histogram([], ITL_BOUNDS)} if itl is not None else {}
    return window({**counters(*before, 0 if drafts is not None else None), **zero_itl}, [],
                  counters(accepted, drafted, drafts))


def cases_speculative_decoding_loss() -> None:
    name = "speculative-decoding-loss"
    eagle3 = real_log("v0.10.1dev-speculators166-eagle3-random-draft-engine-config.log")
    write_case(name, "fires-real-eagle3-log-random-draft",
               bundle(log=eagle3, metrics=spec_window(360, 9000, 3000, itl=[0.085] * 3000)),
               why="real vLLM 0.10.1 engine config (vllm-project/speculators#166): EAGLE-3 with a random-weight 2-layer "
                   "draft, num_spec_tokens=3; counters (synthetic, V1 names) over the window: 360 of 9,000 draft tokens "
                   "accepted in 3,000 drafts (4 %, 1.1 tokens per step), every inter-token gap 85 ms (p90 bucket "
                   "75-100 ms) over the 50 ms budget: not even position 1 is worth drafting -> off",
               expect={"severity": "warning", "setting": "num_speculative_tokens", "summary_contains": ["4 %", "9,000"]})
    slow = stream(steady(6, ttft=0.2, gap=0.07, tokens=20))
    write_case(name, "fires-counters-only-probe-over-budget",
               bundle(stream=slow, metrics=spec_window(3500, 10000, 2000)),
               why="no log: V1 counters alone say drafting is on, 10,000 draft tokens in 2,000 drafts (5 per draft), "
                   "35 % accepted; the probe's TPOT is 70 ms; one acceptance rate per position gives ~55 %, so only "
                   "position 1 is accepted at least half the time -> num_speculative_tokens 1",
               expect={"setting": "num_speculative_tokens", "summary_contains": ["35 %", "num_speculative_tokens 5"]})
    write_case(name, "quiet-low-acceptance-tpot-within-budget",
               bundle(log=eagle3, stream=stream(steady(6, ttft=0.2, gap=0.03, tokens=20)),
                      metrics=spec_window(360, 9000, 3000)),
               why="the same low acceptance, but the probe's TPOT is 30 ms, within the 50 ms budget: nothing users feel")
    accepted, drafted = spec_counts("v0.10.2dev-pr24127-ngram-k5-specdecoding-metrics.log")[0]
    write_case(name, "quiet-real-counts-pr24127-ngram",
               bundle(metrics=spec_window(accepted, drafted, drafted // 5, itl=[0.085] * 300),
                      log=vllm_log({"speculative_config": {"method": "ngram", "num_speculative_tokens": 5,
                                                           "prompt_lookup_min": 5, "prompt_lookup_max": 10}})),
               why="real counts of vllm-project/vllm PR #24127's ngram run (num_speculative_tokens 5): 262 of 295 "
                   "draft tokens accepted (88.8 %), 59 drafts, as counters; TPOT over budget but drafting pays")
    v0_accepted, v0_drafted = spec_counts("v0.6.3-issue9539-speculative-metrics.log")[0]
    write_case(name, "quiet-real-counts-issue9539-v0",
               bundle(metrics=spec_window(v0_accepted, v0_drafted, itl=[0.085] * 300)),
               why="real counts of vllm-project/vllm#9539 (vLLM 0.6.3, V0, 3 speculative tokens): 8,547 of 13,311 "
                   "draft tokens accepted (64 %), as V0 counters (no drafts counter)")
    (first_acc, first_dra), (last_acc, last_dra) = spec_counts("v0.6.x-issue7301-speculative-metrics-two-lines.log")
    write_case(name, "na-real-counts-issue7301-too-few-drafts",
               bundle(metrics=spec_window(last_acc, last_dra, itl=[0.085] * 30, before=(first_acc, first_dra))),
               why="real cumulative counts of two V0 log lines in vllm-project/vllm#7301 (1 of 5, then 1 of 15): "
                   "10 draft tokens in the window, too few to judge")
    write_case(name, "na-speculative-decoding-off",
               bundle(stream=slow, metrics=load_scrapes({}, {"vllm:num_preemptions_total": 0},
                                                        {"vllm:num_preemptions_total": 0}),
                      log=vllm_log({"max_num_seqs": 64})),
               why="no speculative_config in the log and no spec-decode counters: drafting is off")


# --------------------------------------------------------------------------- LD206, LD207


def cases_gpu_throttled() -> None:
    name = "gpu-throttled"
    write_case(name, "fires-thermal-slowdown",
               bundle(gpu=gpu(h100(sm_clock_mhz=1290, throttle_reasons=["sw_thermal_slowdown"], temperature_c=87.0))),
               why="SM clock 65 % of max, thermal slowdown", expect={"severity": "critical", "setting": "gpu_cooling"})
    write_case(name, "fires-power-cap",
               bundle(gpu=gpu(h100(sm_clock_mhz=1600, throttle_reasons=["sw_power_cap"], power_limit_w=400.0))),
               why="SM clock 81 % of max under a 400 W software power cap",
               expect={"severity": "warning", "setting": "gpu_power_limit"})
    write_case(name, "quiet-idle-clocks",
               bundle(gpu=gpu(h100(sm_clock_mhz=345, throttle_reasons=["gpu_idle"]))),
               why="low clocks because the GPU was idle: normal")
    write_case(name, "na-no-nvml", bundle(gpu=GpuEvidence(available=False, reason="NVML Shared Library Not Found")),
               why="no NVIDIA driver on the host")


def cases_gpu_contended() -> None:
    name = "gpu-contended"
    other = GpuProcess(pid=4242, name="python", used_memory_bytes=int(9.5 * GIB))
    write_case(name, "fires-other-process",
               bundle(gpu=gpu(h100(processes=[GpuProcess(pid=4100, name="VLLM::EngineCore", used_memory_bytes=60 * GIB),
                                              other]))),
               why="a notebook's python holds 9.5 GiB on vLLM's GPU", expect={"setting": "gpu_isolation"})
    write_case(name, "fires-unnamed-processes-host-pid",
               bundle(gpu=gpu(h100(processes=[GpuProcess(pid=4100, used_memory_bytes=60 * GIB),
                                              GpuProcess(pid=5000, used_memory_bytes=12 * GIB)])),
                      host=HostEvidence(vllm_process=ProcessInfo(pid=4100, name="vllm", found_by="port"))),
               why="NVML gives no names (container); the host probe found vLLM as pid 4100, pid 5000 is another",
               expect={"summary_contains": ["pid 5000"]})
    write_case(name, "quiet-only-vllm", bundle(gpu=gpu(h100())), why="only VLLM::EngineCore on the GPU")
    write_case(name, "na-no-process-list", bundle(gpu=gpu(h100(processes=[]))),
               why="NVML lists no process (a container without the host PID namespace)")


# --------------------------------------------------------------------------- LD508


def xid_watch(*events: tuple[int, int | None, float], watched: tuple[int, ...] = (0, 1), reason: str | None = None,
              read_error: str | None = None, gpu_lost: bool = False) -> XidWatch:
    """A watch over a 12.3 s probe window (run clock 0.2-12.5 s); ``events`` are (xid, gpu, seen_t).

    ``read_error`` is the message the probe records when NVML fails mid-read (also its ``reason``).
    """
    t0_wall = 1_796_000_000.0
    return XidWatch(watched=list(watched), start_t=0.2, end_t=12.5, start_wall=t0_wall + 0.2, end_wall=t0_wall + 12.5,
                    events=[XidEvent(gpu=g, xid=x, seen_t=t, seen_wall=t0_wall + t) for x, g, t in events],
                    reason=reason or read_error, read_error=read_error, gpu_lost=gpu_lost)


def cases_gpu_xid_errors() -> None:
    name = "gpu-xid-errors"
    two = gpu(h100(), h100(index=1))

    def with_watch(watch: XidWatch | None, devices: GpuEvidence = two) -> GpuEvidence:
        return GpuEvidence(available=True, driver_version=devices.driver_version, devices=devices.devices, xid=watch)

    write_case(name, "fires-fell-off-the-bus", bundle(gpu=with_watch(xid_watch((79, 1, 12.5)))),
               why="GPU 1 fell off the bus (XID 79) while the probe ran: the node needs draining",
               expect={"severity": "critical", "setting": "gpu_hardware", "summary_contains": ["XID 79", "GPU 1"]})
    write_case(name, "fires-app-illegal-address",
               bundle(gpu=with_watch(xid_watch((31, 0, 12.5), (43, 0, 12.5), (43, 0, 12.5)))),
               why="a kernel's illegal address (XID 31) then the GPU stopped processing (XID 43 x2): a software fault",
               expect={"severity": "warning", "setting": "software_stack",
                       "summary_contains": ["XID 31", "XID 43", "x2"]})
    write_case(name, "quiet-watched-no-events", bundle(gpu=with_watch(xid_watch())),
               why="both GPUs watched over the probe window, no XID reported")
    write_case(name, "na-no-watch", bundle(gpu=with_watch(None)), why="the GPU snapshot ran but no XID watch (no stream probe)")
    write_case(name, "na-nothing-watched",
               bundle(gpu=with_watch(xid_watch(watched=(), reason="no GPU supports XID events"),
                                     gpu(h100(errors=["xid_events: Not Supported"])))),
               why="the driver does not support XID events on this GPU (a vGPU), so nothing was watched")
    lost = "NVML failed while reading XID events: GPU is lost"
    write_case(name, "fires-gpu-lost-while-reading", bundle(gpu=with_watch(xid_watch(read_error=lost, gpu_lost=True))),
               why="NVML answered 'GPU is lost' when the watch read its events (how XID 79 shows to the reader): "
                   "no event was read, yet the GPU has likely fallen off the bus",
               expect={"severity": "critical", "setting": "gpu_hardware",
                       "summary_contains": ["NVML lost the GPU", "fallen off the bus"]})
    write_case(name, "fires-gpu-lost-after-an-xid",
               bundle(gpu=with_watch(xid_watch((94, 0, 12.5), read_error=lost, gpu_lost=True))),
               why="one contained ECC error (XID 94, a warning alone) was read, then NVML lost the GPU: critical",
               expect={"severity": "critical", "setting": "gpu_hardware",
                       "summary_contains": ["NVML lost the GPU", "XID 94"]})
    write_case(name, "na-read-failed-no-events",
               bundle(gpu=with_watch(xid_watch(read_error="NVML failed while reading XID events: Unknown Error"))),
               why="NVML failed (not 'GPU is lost') while reading the events: an empty watch proves nothing, never a pass")


def main() -> None:
    write_all(sys.modules[__name__])


if __name__ == "__main__":
    main()
