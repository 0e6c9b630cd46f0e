"""The stream probe over client worker processes: how many, and a worker's side of the run.

At high concurrency one process's event loop becomes the bottleneck and stamps its own queueing
into every token's time, so a load run's streams are read by worker processes
(``doctor.probes.shard``: one clock, the concurrency cap respected, a self-check per worker). The
parent keeps the schedule and the run loop (``doctor.probes.stream.run``, ``Run._sharded``); each
worker reads its slots' streams through its own ``Requester`` and hands each finished trace back.
"""

from __future__ import annotations

import asyncio
import math
import socket

import anyio

from doctor.evidence import RequestTrace
from doctor.foundation.clock import Clock
from doctor.probes.plan import CollectConfig
from doctor.probes.schedule import Job
from doctor.probes.selfcheck import SelfCheck
from doctor.probes.shard import Link, choose_workers, worker_signals
from doctor.probes.stream.client import run_loop, tls_context, transport_name
from doctor.probes.stream.request import Requester
from doctor.probes.transport import skip_missing_sniffio_imports


def shard_workers(config: CollectConfig) -> int:
    """Worker processes to read ``config``'s streams (``doctor.probes.shard``): ``--client-workers``,
    else by the streams that may be in flight at once. Only a load run's one path is sharded: the
    paired paths of a diagnosis and its adaptive stop read every request in one process."""
    if len(config.probed()) != 1 or config.adaptive:
        return 1
    streams = min(config.concurrency, config.warmup + (config.requests or config.request_cap))
    if config.rate:  # open loop: --max-concurrency is a safety cap, not what flies
        streams = min(streams, poisson_streams(config))
    return choose_workers(streams, config.client_workers)


def poisson_streams(config: CollectConfig) -> int:
    """Streams in flight under Poisson arrivals when each request just meets its budgets (Little's
    law: arrival rate x end-to-end time, E2E = TTFT budget + (max_tokens - 1) x TPOT budget). A server
    slower than its budgets has more in flight, but then the run is over budget either way, and
    ``--client-workers`` says otherwise; sharding on the safety cap alone would split 8 requests/s
    over processes, where a small machine loses more to the split than it gains."""
    e2e = config.budgets.ttft_s + max(config.max_tokens - 1, 0) * config.budgets.tpot_s
    return max(1, math.ceil((config.rate or 0.0) * e2e))


def serve_shard(sock: socket.socket, shard: int, workers: int, config: CollectConfig, t0_ns: int, t0_wall: float) -> None:
    """A client worker process's entry point (``doctor.probes.shard.ShardPool``): the parent's clock, its own loop."""
    worker_signals()
    skip_missing_sniffio_imports()
    clock = Clock(t0_ns=t0_ns, t0_wall=t0_wall)
    mine: list[RequestTrace] = []
    requests = Requester(config, clock, tls_context(config), SelfCheck(clock), mine, shares=workers)
    run_loop(_serve(requests, sock, shard, workers))


async def _serve(requests: Requester, sock: socket.socket, shard: int, workers: int) -> None:
    """Run the parent's jobs on this process's own loop, self-check and slots (``shard``, ``shard +
    workers``, ...) until told to stop; then hand back the requests still in flight, cancelled."""
    await anyio.sleep(0)  # anyio's backend loaded before the first request, as in the parent
    link = await Link.open(sock)
    sampler = asyncio.ensure_future(requests.check.sample())
    clients = {slot: requests.client() for slot in range(shard, requests.config.concurrency, workers)}
    running: dict[asyncio.Future[None], RequestTrace] = {}
    mine = requests.traces

    async def one(job: Job, slot: int, trace: RequestTrace) -> None:
        await requests.measure(clients[slot], job, trace)
        link.send(("done", (job.path, job.index, job.warmup), (trace, requests.kept)))

    def forget(task: asyncio.Future[None]) -> None:
        running.pop(task, None)

    link.send(("ready",))
    try:
        with requests.check.measuring():  # a worker's whole life is one measured window: its collector stays off
            while (message := await link.receive()) is not None and message[0] == "job":
                _, job, scheduled, slot, requests.model, requests.drop_extensions = message
                trace = RequestTrace(index=job.index, path=job.path, warmup=job.warmup, t_scheduled=scheduled, shard=shard)
                mine.append(trace)
                task = asyncio.ensure_future(one(job, slot, trace))
                running[task] = trace
                task.add_done_callback(forget)
    finally:
        unfinished = {job_task: trace for job_task, trace in running.items() if not job_task.done()}  # done ones said so
        for job_task in unfinished:
            job_task.cancel()
        await asyncio.gather(*unfinished, return_exceptions=True)
        sampler.cancel()
        link.send(("final", (requests.check.health(transport_name(), mine), list(unfinished.values()), requests.kept)))
        await link.close()
        for client in clients.values():
            await client.aclose()
