"""The stream probe over client worker processes: how many, and a worker's side of the run.

At high concurrency one process's event loop becomes the bottleneck and stamps its own queueing
into every token's time, so a run's streams may be read by worker processes
(``doctor.probes.shard``: one clock, the concurrency cap respected, a self-check per worker). The
parent keeps the schedule and the run loop (``doctor.probes.stream.run``, ``Run._sharded``) and
every decision; each worker reads its slots' streams through its own ``Requester`` and hands back,
with each finished trace, the freezes its self-check saw since its last answer. A diagnosis's
decisions read more than the finished traces, so its workers also hear and say:

- **the gateway's bound** (``Requester.told``): the parent computes it over every worker's direct
  answers and sends it to all of them, since a gateway request and its direct twin may be read by
  different workers;
- **the requests in flight** (``PULSE_S``): each worker says every ``PULSE_S`` when its requests in
  flight were sent and their last token, which the parent's wedge watchdog reads beside the
  finished traces (``doctor.probes.watchdog``);
- **the freezes** go to the adaptive stop, each worker's against its own requests only
  (``doctor.probes.sampling.conclusive``).
"""

from __future__ import annotations

import asyncio
import math
import socket

import anyio

from doctor.evidence import ProbePath, RequestTrace
from doctor.evidence.stream import TokenEvent
from doctor.foundation.clock import Clock
from doctor.probes import kernel_stamps
from doctor.probes.client_stack import run_loop, tls_context, transport_name
from doctor.probes.plan import CollectConfig
from doctor.probes.schedule import Job
from doctor.probes.selfcheck import SelfCheck
from doctor.probes.shard import Link, choose_workers, worker_signals
from doctor.probes.stream.request import Requester
from doctor.probes.transport import skip_missing_sniffio_imports
from doctor.probes.watchdog import POLL_S

#: How often a worker tells the parent's watchdog what it has in flight: as often as the watchdog looks.
PULSE_S = POLL_S
#: (path, index, warm-up): a job's name between the parent and its worker.
JobKey = tuple[ProbePath, int, bool]


def shard_workers(config: CollectConfig) -> int:
    """Worker processes to read ``config``'s streams (``doctor.probes.shard``): ``--client-workers``,
    else, for a load run, by the streams that may be in flight at once. A diagnosis (``diagnose``,
    ``collect``, ``watch``: the adaptive probe) stays in one process unless ``--client-workers`` asks
    for more: its paired paths, adaptive stop and watchdog are kept in the parent across workers,
    but one process is what every earlier diagnosis ran on. Never more workers than slots: slot
    ``s`` is worker ``s % workers``'s on every path."""
    if config.adaptive:
        return choose_workers(config.concurrency, config.client_workers or 1)
    if len(config.probed()) != 1:
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


def key_of(trace: RequestTrace) -> JobKey:
    """The job ``trace`` measures, by name."""
    return (trace.path, trace.index, trace.warmup)


def stand_in(key: JobKey, t_scheduled: float, t_sent: float, last_token: float | None) -> RequestTrace:
    """A request in flight in a worker as the parent's watchdog reads it: sent, and its last token so far."""
    path, index, warmup = key
    return RequestTrace(index=index, path=path, warmup=warmup, t_scheduled=t_scheduled, t_sent=t_sent,
                        tokens=[TokenEvent(t=last_token)] if last_token is not None else [])


def serve_shard(sock: socket.socket, shard: int, workers: int, config: CollectConfig, t0_ns: int, t0_wall: float,
                watched: bool = False) -> None:
    """A client worker process's entry point (``doctor.probes.shard.ShardPool``): the parent's clock, its own
    loop; ``watched``: the parent runs the wedge watchdog, so this worker says what it has in flight."""
    worker_signals()
    skip_missing_sniffio_imports()
    kernel_stamps.keep_on()  # the kernel stamps the first reads too
    clock = Clock(t0_ns=t0_ns, t0_wall=t0_wall)
    mine: list[RequestTrace] = []
    requests = Requester(config, clock, tls_context(config), SelfCheck(clock), mine, shares=workers)
    requests.told(None)  # the gateway's bound is the parent's, over every worker's direct answers
    run_loop(_serve(requests, sock, shard, workers, watched))


async def _pulse(link: Link, running: dict[asyncio.Future[None], RequestTrace]) -> None:
    """Every ``PULSE_S``, the requests in flight as ``("pulse", [(key, t_scheduled, t_sent, last token)])``."""
    while True:
        await asyncio.sleep(PULSE_S)
        link.send(("pulse", [(key_of(t), t.t_scheduled, t.t_sent, t.tokens[-1].t if t.tokens else None)
                             for t in running.values() if t.t_sent is not None and t.t_end is None]))


async def _serve(requests: Requester, sock: socket.socket, shard: int, workers: int, watched: bool) -> None:
    """Run the parent's jobs on this process's own loop, self-check and slots (``shard``, ``shard +
    workers``, ... of every path) until told to stop; then hand back the requests still in flight, cancelled."""
    await anyio.sleep(0)  # anyio's backend loaded before the first request, as in the parent
    link = await Link.open(sock)
    check = requests.check
    sampler = asyncio.ensure_future(check.sample())
    clients = {(path, slot): requests.client() for path in requests.urls
               for slot in range(shard, requests.config.concurrency, workers)}
    running: dict[asyncio.Future[None], RequestTrace] = {}
    pulse = asyncio.ensure_future(_pulse(link, running)) if watched else None
    mine = requests.traces
    told = 0  # freezes already handed back

    async def one(job: Job, slot: int, trace: RequestTrace) -> None:
        nonlocal told
        await requests.measure(clients[job.path, slot], job, trace)
        freezes, told = check.freezes[told:], len(check.freezes)
        link.send(("done", key_of(trace), (trace, requests.kept, freezes)))
        task = asyncio.current_task()
        if task is not None:
            running.pop(task, None)  # said done: out of the next pulse

    def forget(task: asyncio.Future[None]) -> None:
        running.pop(task, None)

    link.send(("ready",))
    try:
        with check.measuring():  # a worker's whole life is one measured window: its collector stays off
            while (message := await link.receive()) is not None and message[0] != "stop":
                if message[0] == "bound":
                    requests.told(message[1])
                    continue
                _, job, scheduled, slot, requests.model, requests.drop_extensions = message
                trace = RequestTrace(index=job.index, path=job.path, warmup=job.warmup, t_scheduled=scheduled, shard=shard)
                mine.append(trace)
                task = asyncio.ensure_future(one(job, slot, trace))
                running[task] = trace
                task.add_done_callback(forget)
    finally:
        if pulse is not None:
            pulse.cancel()
        unfinished = {job_task: trace for job_task, trace in running.items() if not job_task.done()}  # done ones said so
        for job_task in unfinished:
            job_task.cancel()
        await asyncio.gather(*unfinished, return_exceptions=True)
        sampler.cancel()
        link.send(("final", (requests.check.health(transport_name(), mine, requests.config.rate is None), list(unfinished.values()), requests.kept)))
        await link.close()
        for client in clients.values():
            await client.aclose()
