"""Write the fixture bundles of the router checks (LD311-LD314).

Run ``.venv/bin/python -m tests.support.make_check_fixtures_router``. Each case holds a router's
/metrics in vllm-router 0.1.17's own names and shape (``fixtures/routers/vllm-router/*.prom``,
taken from the real router), its replicas' vLLM /metrics, and the flags it was started with; the
real router in front of real vLLM replicas is ``tests/realvllm/test_router.py``.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping

from doctor.evidence import ReplicaScrapes, RouterEvidence, Scrape
from tests.support.bundles import bundle, exposition, request, stream
from tests.support.write_fixture import write_all, write_case

A, B = "http://10.0.0.1:8000", "http://10.0.0.2:8000"
WALL = 1_700_000_000.0


def router_text(per: Mapping[str, Mapping[str, float]], retries: float | None = None, policy: str = "cache_aware") -> str:
    """vllm-router's exposition: per worker its processed requests, running requests, health and breaker state."""
    families = (("vllm_router_processed_requests_total", "counter", "requests"),
                ("vllm_router_running_requests", "gauge", "running"),
                ("vllm_router_worker_health", "gauge", "health"),
                ("vllm_router_cb_state", "gauge", "cb"))
    lines = []
    for name, kind, key in families:
        lines.append(f"# TYPE {name.removesuffix('_total')} {kind}")
        lines += [f'{name}{{worker="{w}"}} {v[key]:g}' for w, v in per.items() if key in v]
    lines.append("# TYPE vllm_router_policy_decisions counter")
    lines += [f'vllm_router_policy_decisions_total{{policy="{policy}",worker="{w}"}} {v.get("requests", 0):g}' for w, v in per.items()]
    if retries is not None:
        lines += ["# TYPE vllm_router_retries counter", f'vllm_router_retries_total{{route="/v1/chat/completions"}} {retries:g}']
    return "\n".join(lines) + "\n"


def scrape(phase: str, t: float, text: str | None) -> Scrape:
    if text is None:
        return Scrape(phase=phase, t=t, wall=WALL + t, error="GET http://10.0.0.2:8000/metrics failed: timed out")
    return Scrape(phase=phase, t=t, wall=WALL + t, status=200, content_type="text/plain; version=0.0.4", text=text)


def engine(waiting: float, running: float) -> str:
    return exposition({"vllm:num_requests_waiting": waiting, "vllm:num_requests_running": running})


def router(before: Mapping[str, Mapping[str, float]], after: Mapping[str, Mapping[str, float]],
           replicas: Mapping[str, list[str | None]], *, args: str = "--policy cache_aware", retries: tuple[float, float] | None = None,
           metrics_text: str | None = None) -> RouterEvidence:
    """The router's scrapes before (t=-1), during (t=5, as ``after``) and after (t=10), and its replicas' three scrapes."""
    r0, r1 = (None, None) if retries is None else retries
    texts = [router_text(before, r0), router_text(after, r1), router_text(after, r1)]
    if metrics_text is not None:
        texts = [metrics_text] * 3
    phases = (("before", -1.0), ("during", 5.0), ("after", 10.0))
    return RouterEvidence(
        url="http://127.0.0.1:30000", metrics_url="http://127.0.0.1:29000/metrics",
        scrapes=[scrape(p, t, x) for (p, t), x in zip(phases, texts, strict=True)],
        workers_route="/workers", workers_answer='{"workers":[' + ",".join(f'{{"url":"{u}"}}' for u in replicas) + "]}",
        replicas=[ReplicaScrapes(url=u, scrapes=[scrape(p, t, x) for (p, t), x in zip(phases, texts_, strict=True)])
                  for u, texts_ in replicas.items()],
        args=args.split())


def idle(n: int = 3) -> list[str | None]:
    return [engine(0, 1)] * n


def paths(gateway_ttft: float, direct_ttft: float = 0.3, n: int = 6, refused: int = 0) -> object:
    reqs = [request("direct", i, ttft=direct_ttft, gaps=[0.05] * 4, start=i) for i in range(n)]
    reqs += [request("gateway", i, ttft=gateway_ttft, gaps=[0.05] * 4, start=i, outcome="http-status" if i < refused else "ok")
             for i in range(n)]
    return stream(reqs)


ZERO = {A: {"requests": 0, "health": 1, "cb": 0}, B: {"requests": 0, "health": 1, "cb": 0}}
EVEN = {A: {"requests": 10, "running": 1, "health": 1, "cb": 0}, B: {"requests": 10, "running": 1, "health": 1, "cb": 0}}
CAP = "--policy round_robin --max-concurrent-requests 2"


def _missing(name: str) -> None:
    write_case(name, "missing-no-router", bundle(), why="No router was read (--router): the check needs one.")


def cases_router_queue() -> None:
    name = "router-queue"
    write_case(name, "fires-cap-below-load", bundle(stream=paths(4.0), router=router(ZERO, EVEN, {A: idle(), B: idle()}, args=CAP)),
               why="TTFT 4 s through the router, 0.3 s direct, no replica waiting: --max-concurrent-requests 2 holds them.",
               expect={"severity": "critical", "setting": "--max-concurrent-requests"})
    write_case(name, "fires-queue-timeout-408", bundle(stream=paths(0.5, refused=2), router=router(ZERO, EVEN, {A: idle(), B: idle()}, args=CAP)),
               why="The router adds 0.2 s but refused 2 of 6 requests (its queue timed out: 408), none refused direct, replicas idle.",
               expect={"severity": "critical", "setting": "--max-concurrent-requests"})
    write_case(name, "quiet-replicas-full", bundle(stream=paths(4.0), router=router(ZERO, EVEN, {A: [engine(6, 4)] * 3, B: [engine(5, 4)] * 3}, args=CAP)),
               why="The router adds time but both replicas have requests waiting: the replicas are full.")
    write_case(name, "quiet-no-gap", bundle(stream=paths(0.35), router=router(ZERO, EVEN, {A: idle(), B: idle()}, args=CAP)),
               why="The router adds 50 ms.")
    write_case(name, "na-no-direct-path", bundle(stream=stream([request("gateway", i, ttft=4.0, gaps=[0.05] * 4) for i in range(6)]),
                                                 router=router(ZERO, EVEN, {A: idle(), B: idle()}, args=CAP)),
               why="No direct path: the router's share of the TTFT cannot be told.")
    _missing(name)


HOT = {A: {"requests": 30, "running": 8, "health": 1, "cb": 0}, B: {"requests": 2, "running": 0, "health": 1, "cb": 0}}


def cases_router_hot_spot() -> None:
    name = "router-hot-spot"
    write_case(name, "fires-cache-aware-prefix", bundle(router=router(ZERO, HOT, {A: [engine(0, 1), engine(6, 2), engine(6, 2)], B: [engine(0, 0)] * 3})),
               why="cache_aware sends 94 % of a shared prefix's requests to one replica, which queues 6 while the other idles.",
               expect={"severity": "warning", "setting": "--balance-abs-threshold"})
    write_case(name, "fires-consistent-hash", bundle(router=router(ZERO, HOT, {A: [engine(4, 2)] * 3, B: idle()}, args="--policy consistent_hash")),
               why="consistent_hash with one hot key: the remediation is a load-aware policy.",
               expect={"severity": "warning", "setting": "--policy"})
    write_case(name, "quiet-balanced", bundle(router=router(ZERO, EVEN, {A: idle(), B: idle()})), why="Even shares.")
    write_case(name, "na-few-requests", bundle(router=router(ZERO, {A: {"requests": 3, "health": 1}, B: {"requests": 0, "health": 1}}, {A: idle(), B: idle()})),
               why="Three requests routed: shares say nothing.")
    _missing(name)


def cases_router_dead_replica() -> None:
    name = "router-dead-replica"
    write_case(name, "fires-sigstopped", bundle(router=router(ZERO, EVEN, {A: idle(), B: [engine(0, 1), None, None]},
                                                             args="--policy round_robin --health-check-interval-secs 60")),
               why="Replica B stops answering mid-window (SIGSTOP); the router still counts it healthy and routes to it.",
               expect={"severity": "critical", "setting": "--health-check-interval-secs"})
    dead = {A: {"requests": 20, "health": 1, "cb": 0}, B: {"requests": 0, "health": 0, "cb": 0}}
    write_case(name, "fires-listed-unreachable", bundle(router=router(ZERO, dead, {A: idle(), B: [None, None, None]})),
               why="The worker list names a replica that never answered; the router counts it unhealthy and routes nothing: a risk.",
               expect={"severity": "warning", "setting": "--health-check-interval-secs"})
    write_case(name, "quiet-all-answer", bundle(router=router(ZERO, EVEN, {A: idle(), B: idle()})), why="Every replica answered.")
    write_case(name, "na-metrics-elsewhere", bundle(router=router(ZERO, EVEN, {A: idle(), B: idle()}, metrics_text=engine(0, 1))),
               why="The router's /metrics URL answered an engine's metrics (vllm-router serves its own on --prometheus-port).")
    _missing(name)


def cases_router_retries() -> None:
    name = "router-retries"
    failing = {A: {"requests": 10, "health": 1, "cb": 0}, B: {"requests": 9, "health": 1, "cb": 0}}
    write_case(name, "fires-failing-replica", bundle(router=router(ZERO, failing, {A: idle(), B: idle()}, retries=(0, 9))),
               why="Every request sent to B failed and was retried on A.", expect={"severity": "warning", "setting": "--retry-max-retries"})
    ejected = {A: {"requests": 18, "health": 1, "cb": 0}, B: {"requests": 2, "health": 1, "cb": 1}}
    write_case(name, "fires-ejected", bundle(router=router(ZERO, ejected, {A: idle(), B: idle()}, retries=(0, 0))),
               why="B's circuit breaker opened: its share went to A.", expect={"severity": "warning", "setting": "--cb-failure-threshold"})
    write_case(name, "quiet-no-retries", bundle(router=router(ZERO, EVEN, {A: idle(), B: idle()}, retries=(0, 0))), why="No retry.")
    write_case(name, "na-no-counter", bundle(router=router(ZERO, EVEN, {A: idle(), B: idle()})),
               why="The router wrote no retries counter (none happened since it started) and ejected nothing.")
    _missing(name)


if __name__ == "__main__":
    write_all(sys.modules[__name__])
