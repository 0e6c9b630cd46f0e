"""Write the fixture bundles of the general checks (LD501-LD507).

Run ``.venv/bin/python -m tests.support.make_check_fixtures_general``. Metrics are raw scrapes in
vLLM V1's exposition format (``tests.support.bundles.exposition``; histograms with buckets and
a second engine are added here), so the real metrics-window derivation computes the deltas.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping

from doctor.evidence import ClientHealth, HostEvidence, MetricsEvidence, RunRecord, Scrape, StreamEvidence
from tests.support.bundles import bundle, exposition, log, metrics, request, stream
from tests.support.write_fixture import write_all, write_case

WALL0 = 1_700_000_000.0


def histogram(name: str, buckets: Mapping[float, float], total: float, engine: str = "0") -> str:
    """A histogram family: cumulative ``buckets`` {le: count}, its +Inf bucket and ``total`` sum."""
    labels = f'engine="{engine}",model_name="m"'
    count = max(buckets.values()) if buckets else 0
    lines = [f"# HELP {name} h", f"# TYPE {name} histogram"]
    lines += [f'{name}_bucket{{{labels},le="{le}"}} {n}' for le, n in sorted(buckets.items())]
    lines += [
        f'{name}_bucket{{{labels},le="+Inf"}} {count}',
        f"{name}_count{{{labels}}} {count}",
        f"{name}_sum{{{labels}}} {total}",
    ]
    return "\n".join(lines) + "\n"


def scrapes(*texts: tuple[str, float, str]) -> MetricsEvidence:
    """Scrapes whose exposition text is given whole: ``(phase, t, text)``."""
    return MetricsEvidence(
        url="http://127.0.0.1:8000/metrics",
        interval_s=1.0,
        scrapes=[
            Scrape(
                phase=p, t=t, wall=WALL0 + t, status=200, content_type="text/plain; version=0.0.4", text=text
            )
            for p, t, text in texts
        ],
    )


def two_engines(first: Mapping[str, object], second: Mapping[str, object]) -> str:
    """One scrape of two engines serving model ``m`` (the second's HELP/TYPE lines are the first's)."""
    other = [ln for ln in exposition(second, engine="1").splitlines() if not ln.startswith("#")]
    return exposition(first, engine="0") + "\n".join(other) + "\n"


def probe(*, failed: int = 0, status: int = 503, n: int = 8, cancelled: int = 0) -> StreamEvidence:
    """``n`` gateway requests: the first ``failed`` answer ``status``, the last ``cancelled`` were
    still streaming when the probe was stopped (Ctrl-C)."""
    reqs = []
    for i in range(n):
        outcome = "http-status" if i < failed else "cancelled" if i >= n - cancelled else "ok"
        req = request("gateway", i, ttft=0.1, gaps=[0.03] * 4, start=i * 1.0, outcome=outcome)
        if i < failed:
            req.status = status
            req.body_excerpt = '{"error":"Service Unavailable"}' if status == 503 else None
        reqs.append(req)
    return stream(reqs)


def cases_error_rate() -> None:
    name = "error-rate"
    before = {"vllm:request_success_total": {"stop": 0, "length": 0, "error": 0, "abort": 0}}
    write_case(
        name,
        "fires-probe-503",
        bundle(stream=probe(failed=3)),
        why="3 of 8 gateway requests answered HTTP 503: capacity.",
        expect={"severity": "critical", "setting": "replicas", "summary_contains": ["3 of 8"]},
    )
    write_case(
        name,
        "fires-metrics-errors",
        bundle(
            metrics=metrics(
                ("before", -0.1, before),
                (
                    "after",
                    30.0,
                    {"vllm:request_success_total": {"stop": 20, "length": 16, "error": 4, "abort": 0}},
                ),
            )
        ),
        why="No probe; vLLM finished 4 of 40 requests with error (10 %).",
        expect={"severity": "critical", "setting": "vllm_server"},
    )
    write_case(
        name,
        "fires-metrics-aborts",
        bundle(
            stream=probe(),
            metrics=metrics(
                ("before", -0.1, before),
                (
                    "after",
                    30.0,
                    {"vllm:request_success_total": {"stop": 24, "length": 8, "error": 0, "abort": 8}},
                ),
            ),
        ),
        why="Every probe request succeeded, but vLLM saw 8 of 40 requests aborted (20 %): clients give up.",
        expect={"severity": "warning", "setting": "client_timeout"},
    )
    write_case(
        name,
        "quiet-all-ok",
        bundle(
            stream=probe(),
            metrics=metrics(
                ("before", -0.1, before),
                (
                    "after",
                    30.0,
                    {"vllm:request_success_total": {"stop": 30, "length": 10, "error": 0, "abort": 1}},
                ),
            ),
        ),
        why="Every probe request succeeded; 1 abort in 41 finished (2 %).",
    )
    write_case(
        name,
        "quiet-ctrl-c-cancelled-requests",
        bundle(
            stream=probe(cancelled=4),
            metrics=metrics(
                ("before", -0.1, before),
                ("after", 30.0, {"vllm:request_success_total": {"stop": 32, "length": 4, "error": 0, "abort": 4}}),
            ),
            interrupted=True,
        ),
        why="Ctrl-C with 4 of 8 requests in flight: they are 'cancelled', not failures, and the 4 aborts vLLM "
            "counted for them are not clients giving up; the 4 completed requests were ok.",
    )
    write_case(
        name,
        "na-every-request-cancelled",
        bundle(stream=probe(cancelled=8), interrupted=True),
        why="Ctrl-C before any request finished: nothing completed, so nothing can be said about errors.",
    )
    write_case(
        name,
        "na-nothing-measured",
        bundle(metrics=metrics(("before", -0.1, before), ("after", 30.0, before))),
        why="No probe and no request finished in the window.",
    )


def cases_low_throughput() -> None:
    name = "low-throughput"
    idle_before = {
        "vllm:prompt_tokens_total": 1000,
        "vllm:generation_tokens_total": 5000,
        "vllm:num_requests_running": 0,
        "vllm:num_requests_waiting": 0,
    }
    idle_after = {
        "vllm:prompt_tokens_total": 1120,
        "vllm:generation_tokens_total": 5600,
        "vllm:num_requests_running": 1,
        "vllm:num_requests_waiting": 0,
    }
    idle = metrics(("before", 0.0, idle_before), ("during", 30.0, idle_after), ("after", 60.0, idle_after))
    write_case(
        name,
        "fires-trickle-fed-engine",
        bundle(metrics=idle),
        why="Metrics only (vllm-doctor's mode): 2 prompt and 10 generated tokens/s over 60 s, running <= 1.",
        expect={"severity": "info", "setting": "replicas"},
    )
    busy_after = {**idle_after, "vllm:generation_tokens_total": 17000, "vllm:num_requests_running": 12}
    write_case(
        name,
        "quiet-busy-engine",
        bundle(metrics=metrics(("before", 0.0, idle_before), ("after", 60.0, busy_after))),
        why="200 generated tokens/s with 12 running.",
    )
    write_case(
        name,
        "na-probe-was-the-only-load",
        bundle(metrics=idle, stream=probe(n=2)),
        why="Same window, but the only load was the probe's single stream.",
    )


def cases_prefix_cache_efficiency() -> None:
    name = "prefix-cache-efficiency"
    zero = {"vllm:prefix_cache_queries_total": 0, "vllm:prefix_cache_hits_total": 0}
    default_log = log(
        [
            ("(APIServer pid=1) INFO 11-30 05:37:29 [api_utils.py:286] non-default args: "
            "{'model_tag': 'm', 'model': 'm', 'enable_prefix_caching': True}")
        ]
    )
    write_case(
        name,
        "fires-low-hit-rate",
        bundle(
            log=default_log,
            metrics=metrics(
                ("before", -0.1, zero),
                (
                    "after",
                    30.0,
                    {"vllm:prefix_cache_queries_total": 48210, "vllm:prefix_cache_hits_total": 5785},
                ),
            ),
        ),
        why="12 % of 48,210 looked-up prompt tokens hit the cache, prefix caching on: the prompts' shared part "
        "is not a stable prefix.",
        expect={"severity": "info", "setting": "prompt_prefix", "summary_contains": ["12 %"]},
    )
    write_case(
        name,
        "quiet-shared-system-prompt",
        bundle(
            metrics=metrics(
                ("before", -0.1, zero),
                (
                    "after",
                    30.0,
                    {"vllm:prefix_cache_queries_total": 48210, "vllm:prefix_cache_hits_total": 40960},
                ),
            )
        ),
        why="85 % of looked-up prompt tokens hit the cache.",
    )
    write_case(
        name,
        "na-no-prefix-counters",
        bundle(
            metrics=metrics(
                ("before", -0.1, {"vllm:num_requests_running": 0}),
                ("after", 30.0, {"vllm:num_requests_running": 1}),
            )
        ),
        why="A scrape without prefix-cache families.",
    )


def cases_queue_pressure() -> None:
    name = "queue-pressure"
    quiet = {"vllm:num_requests_waiting": 0, "vllm:num_requests_running": 0, "vllm:kv_cache_usage_perc": 0.0}
    write_case(
        name,
        "fires-queue-behind-max-num-seqs",
        bundle(
            run=RunRecord(tool_version="test", engine_config={"max_num_seqs": 8}),
            metrics=metrics(
                ("before", -0.1, quiet),
                (
                    "during",
                    2.0,
                    {
                        "vllm:num_requests_waiting": 12,
                        "vllm:num_requests_running": 8,
                        "vllm:kv_cache_usage_perc": 0.31,
                    },
                ),
                ("after", 10.0, quiet),
            ),
        ),
        why="12 requests waited while 8 ran (= max_num_seqs 8 from the run record), KV usage 31 %.",
        expect={"severity": "warning", "setting": "replicas", "summary_contains": ["max_num_seqs 8"]},
    )
    write_case(
        name,
        "quiet-short-queue",
        bundle(
            metrics=metrics(
                ("before", -0.1, quiet),
                (
                    "during",
                    2.0,
                    {
                        "vllm:num_requests_waiting": 2,
                        "vllm:num_requests_running": 8,
                        "vllm:kv_cache_usage_perc": 0.4,
                    },
                ),
                ("after", 10.0, quiet),
            )
        ),
        why="At most 2 waiting.",
    )
    write_case(
        name,
        "na-no-waiting-gauge",
        bundle(
            metrics=metrics(
                ("before", -0.1, {"vllm:num_requests_running": 0}),
                ("after", 10.0, {"vllm:num_requests_running": 1}),
            )
        ),
        why="A scrape without vllm:num_requests_waiting.",
    )


def cases_queue_latency() -> None:
    name = "queue-latency"
    q = "vllm:request_queue_time_seconds"
    empty = histogram(q, {0.1: 0, 0.5: 0, 1.0: 0, 2.5: 0, 5.0: 0}, 0.0)
    slow = histogram(q, {0.1: 10, 0.5: 14, 1.0: 20, 2.5: 37, 5.0: 40}, 56.8)
    fast = histogram(q, {0.1: 38, 0.5: 40, 1.0: 40, 2.5: 40, 5.0: 40}, 1.2)
    gauges = exposition({"vllm:num_requests_waiting": 9})
    write_case(
        name,
        "fires-queue-p90-2.5s",
        bundle(metrics=scrapes(("before", -0.1, empty), ("after", 30.0, slow + gauges))),
        why="40 requests; 37 had waited <= 2.5 s, 20 <= 1 s: p90 in the 2.5 s bucket (mean 1.42 s).",
        expect={"severity": "warning", "setting": "replicas", "summary_contains": ["2.50 s"]},
    )
    served = [request("direct", i, ttft=1.4, gaps=[0.02] * 63, start=i * 2.0) for i in range(8)]
    for r in served:
        r.prompt_tokens, r.completion_tokens = 270, 64
    write_case(
        name,
        "fires-kv-cache-holds-one-request",
        bundle(metrics=scrapes(("before", -0.1, empty), ("after", 30.0, slow + gauges)),
               log=log(["(EngineCore_DP0 pid=9) INFO 11-30 05:38:37 [kv_cache_utils.py:2327] GPU KV cache size: 512 tokens"]),
               stream=stream(served)),
        why=("The same queue, with a KV cache of 512 tokens for requests of 334 (270 prompt + 64 answer): 1.5 fit, so "
             "the engine runs one at a time whatever the replicas (the lab's kv-pressure scenario probed with the "
             "defaults). The cheap lever is the cache: gpu_memory_utilization, not replicas."),
        expect={"severity": "warning", "setting": "gpu_memory_utilization", "summary_contains": ["2.50 s"]},
    )
    write_case(
        name,
        "quiet-fast-admission",
        bundle(metrics=scrapes(("before", -0.1, empty), ("after", 30.0, fast))),
        why="38 of 40 requests waited <= 100 ms.",
    )
    write_case(
        name,
        "na-no-queue-histogram",
        bundle(
            metrics=metrics(
                ("before", -0.1, {"vllm:num_requests_running": 0}),
                ("after", 30.0, {"vllm:num_requests_running": 1}),
            )
        ),
        why="A scrape without the queue-time histogram.",
    )


def cases_replica_imbalance() -> None:
    name = "replica-imbalance"
    zero = {
        "vllm:num_requests_running": 0,
        "vllm:num_requests_waiting": 0,
        "vllm:kv_cache_usage_perc": 0.0,
        "vllm:request_success_total": {"stop": 0},
    }
    busy = {
        "vllm:num_requests_running": 8,
        "vllm:num_requests_waiting": 6,
        "vllm:kv_cache_usage_perc": 0.92,
        "vllm:request_success_total": {"stop": 46},
    }
    idle = {
        "vllm:num_requests_running": 1,
        "vllm:num_requests_waiting": 0,
        "vllm:kv_cache_usage_perc": 0.11,
        "vllm:request_success_total": {"stop": 5},
    }
    write_case(
        name,
        "fires-one-engine-does-the-work",
        bundle(
            metrics=scrapes(
                ("before", -0.1, two_engines(zero, zero)), ("after", 30.0, two_engines(busy, idle))
            )
        ),
        why="Two engines of model m: running 8 vs 1, finished 46 vs 5, KV 0.92 vs 0.11, a queue on one only.",
        expect={"severity": "warning", "setting": "load_balancing"},
    )
    even = {**busy, "vllm:num_requests_waiting": 0, "vllm:request_success_total": {"stop": 40}}
    write_case(
        name,
        "quiet-even-engines",
        bundle(
            metrics=scrapes(
                ("before", -0.1, two_engines(zero, zero)),
                (
                    "after",
                    30.0,
                    two_engines(
                        even,
                        {**even, "vllm:num_requests_running": 7, "vllm:request_success_total": {"stop": 38}},
                    ),
                ),
            )
        ),
        why="Two engines within 15 % of each other.",
    )
    write_case(
        name,
        "na-one-engine",
        bundle(metrics=metrics(("before", -0.1, zero), ("after", 30.0, busy))),
        why="One engine label: nothing to compare.",
    )


def cases_client_suspect() -> None:
    name = "client-suspect"
    lagging = probe()
    lagging.shape.concurrency = 8
    lagging.client = ClientHealth(
        loop_lag_p99_ms=85.0,
        loop_lag_max_ms=240.0,
        cpu_percent_max=100.0,
        cpu_count=2,
        suspect=True,
        transport="httpx+h11",
        reasons=["event-loop lag p99 85 ms > 20 ms"],
    )
    write_case(
        name,
        "fires-loop-lag",
        bundle(stream=lagging),
        why="The probe's self-check: event loop lag p99 85 ms, CPU 100 % of 2 cores at concurrency 8: a second "
            "client process would have no CPU beside the first and the parent, so half the concurrency.",
        expect={"severity": "info", "setting": "concurrency"},
    )
    healthy = probe()
    healthy.client = ClientHealth(
        loop_lag_p99_ms=1.2, loop_lag_max_ms=3.0, cpu_percent_max=35.0, cpu_count=2, transport="httpx+h11"
    )
    write_case(name, "quiet-client-kept-up", bundle(stream=healthy), why="Loop lag p99 1.2 ms, CPU 35 %.")
    stamped = probe()
    stamped.shape.concurrency = 64
    stamped.client = ClientHealth(
        loop_lag_p99_ms=14.0, loop_lag_max_ms=31.0, cpu_percent_max=97.0, cpu_count=2, transport="httpx+h11",
        stamp_clock="kernel", send_clock="kernel", kernel_gap_p99_ms=5.8, kernel_gap_max_ms=12.0,
        notes=["event-loop lag p99 14.0 ms > 10 ms: token stamps may be late",
               "client CPU reached 97 % of a core: the client was saturated"],
    )
    write_case(name, "quiet-busy-client-stamped-by-the-kernel", bundle(stream=stamped),
               why="A client at 97 % of a core whose loop lagged 14 ms at p99, but whose every read the kernel "
                   "stamped: the loop's lateness (5.8 ms at p99 after the kernel) is in no token stamp (issue 35).")
    write_case(
        name,
        "na-no-self-check",
        bundle(stream=probe()),
        why="An older bundle whose client health was not measured.",
    )
    diagnosis = RunRecord(command="diagnose")
    idle_host = HostEvidence(cpu_count_logical=8, cpu_percent=22.0, load_avg=[1.4, 1.2, 1.0])
    write_case(
        name,
        "fires-diagnosis-spreads-over-idle-cpus",
        bundle(run=diagnosis, stream=one_core_client(64), host=idle_host),
        why="diagnose at concurrency 64 read by one process at 100 % of a core on an 8-CPU host at 22 % CPU, "
            "load 1.4: the streams fit two workers and the host has CPUs to spare, so more client processes, "
            "not half the concurrency the user chose.",
        expect={"severity": "info", "setting": "client_workers"},
    )
    write_case(
        name,
        "fires-diagnosis-on-a-saturated-host",
        bundle(run=diagnosis, stream=one_core_client(64),
               host=HostEvidence(cpu_count_logical=8, cpu_percent=99.0, load_avg=[11.6, 10.2, 9.8])),
        why="The same diagnosis on a host at 99 % CPU, load 11.6 on 8 CPUs before the probe: more client "
            "processes would only compete for it, so a less loaded host or half the concurrency.",
        expect={"severity": "info", "setting": "concurrency", "summary_contains": ["CPU-saturated"]},
    )
    write_case(
        name,
        "fires-diagnosis-one-stream",
        bundle(run=diagnosis, stream=one_core_client(1), host=idle_host),
        why="A diagnosis at concurrency 1 on the idle 8-CPU host: one stream has nothing to spread over a "
            "second process, so the change is a less loaded host.",
        expect={"severity": "info", "setting": "concurrency"},
    )


def one_core_client(concurrency: int) -> StreamEvidence:
    """A probe at ``concurrency`` read by one process whose event loop lagged at 100 % of a core of 8."""
    out = probe()
    out.shape.concurrency = concurrency
    out.client = ClientHealth(
        loop_lag_p99_ms=42.0,
        loop_lag_max_ms=130.0,
        cpu_percent_max=100.0,
        cpu_count=8,
        suspect=True,
        transport="httpx+h11",
        reasons=["event-loop lag p99 42.0 ms > 10 ms: token stamps may be late",
                 "client CPU reached 100 % of a core: the client was saturated"],
    )
    return out


def main() -> None:
    write_all(sys.modules[__name__])


if __name__ == "__main__":
    main()
