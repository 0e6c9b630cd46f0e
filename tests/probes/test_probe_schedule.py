"""The probe's request schedule: each path's load is its own.

Open loop (``--rate``), a path whose slots are all busy must not hold back the other path's
requests: a slow gateway would otherwise make the direct path look slow, and the comparison the
whole probe exists for would blame the engine for the gateway's latency. Real servers on
127.0.0.1; assertions compare the two paths with each other (ratios and orders), never with a
time limit.
"""

from __future__ import annotations

import asyncio

import pytest

from doctor.collection.collector import CollectConfig
from doctor.derive.stream_stats import request_stats
from doctor.foundation.clock import Clock
from doctor.probes.schedule import Job, _Slots, dispatch
from doctor.probes.stream import run_stream_probe
from tests.support.sse_server import SseServer


@pytest.fixture(scope="module")
def server():
    with SseServer() as srv:
        yield srv


@pytest.mark.slow
def test_a_slow_gateway_does_not_queue_the_direct_requests(server):
    # direct answers in ~25 ms, the gateway in ~0.5 s; at 10 req/s on one slot the gateway's
    # requests pile up behind each other, the direct ones (served 20x faster) must not
    config = CollectConfig(engine=server.base(ttft=0.02, itl=0.001, n=3), gateway=server.base(ttft=0.02, itl=0.05, n=10),
                           route="chat", requests=6, warmup=0, rate=10.0, concurrency=1)
    evidence, errors = run_stream_probe(config, Clock(), lambda _msg: None)
    assert evidence is not None and errors == []
    traces = {path: sorted((t for t in evidence.requests if t.path == path), key=lambda t: t.index)
              for path in ("direct", "gateway")}
    assert all(t.ok for ts in traces.values() for t in ts)
    queue = {path: sum(request_stats(t).client_queue for t in ts) for path, ts in traces.items()}
    assert queue["direct"] < 0.1 * queue["gateway"]
    ttft = {path: max(request_stats(t).ttft for t in ts) for path, ts in traces.items()}
    assert ttft["direct"] < 0.25 * ttft["gateway"]
    for ts in traces.values():  # each path still sends first come, first served
        assert [t.t_sent for t in ts] == sorted(t.t_sent for t in ts)


class _Recorder:
    """A ``Send`` that holds each request until the test releases it, logging starts and slots."""

    def __init__(self) -> None:
        self.started: list[tuple[str, int, int]] = []
        self.gates: dict[tuple[str, int], asyncio.Event] = {}

    async def __call__(self, job: Job, scheduled: float, slot: int) -> None:
        self.started.append((job.path, job.index, slot))
        gate = self.gates.setdefault((job.path, job.index), asyncio.Event())
        await gate.wait()

    def release(self, path: str, index: int) -> None:
        self.gates.setdefault((path, index), asyncio.Event()).set()


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_open_loop_requests_wait_for_their_own_path_first_come_first_served():
    async def scenario() -> _Recorder:
        send = _Recorder()
        jobs = [Job(k, path, False, 0.0) for k in range(3) for path in ("gateway", "direct")]
        run = asyncio.ensure_future(dispatch(jobs, 1, send, Clock()))
        await _settle()
        # the gateway's first request holds its only slot; every direct request still goes out
        # as soon as the one before it ends, and the gateway's queue keeps its order
        assert send.started == [("gateway", 0, 0), ("direct", 0, 0)]
        send.release("direct", 0)
        await _settle()
        send.release("direct", 1)
        await _settle()
        assert [s for s in send.started if s[0] == "direct"] == [("direct", 0, 0), ("direct", 1, 0), ("direct", 2, 0)]
        assert [s for s in send.started if s[0] == "gateway"] == [("gateway", 0, 0)]
        for k in range(3):
            send.release("direct", k)
            send.release("gateway", k)
            await _settle()
        await asyncio.wait_for(run, 5)
        return send

    send = asyncio.run(scenario())
    assert [s[1] for s in send.started if s[0] == "gateway"] == [0, 1, 2]


def test_closed_loop_keeps_the_pairs_in_step():
    async def scenario() -> _Recorder:
        send = _Recorder()
        jobs = [Job(k, path, False) for k in range(2) for path in ("gateway", "direct")]
        run = asyncio.ensure_future(dispatch(jobs, 1, send, Clock()))
        await _settle()
        send.release("direct", 0)
        await _settle()
        # closed loop schedules the next pair when a slot frees, in pair order: the direct
        # path's second request waits for the gateway's
        assert send.started == [("gateway", 0, 0), ("direct", 0, 0)]
        send.release("gateway", 0)
        await _settle()
        assert send.started[2:] == [("gateway", 1, 0), ("direct", 1, 0)]
        send.release("gateway", 1)
        send.release("direct", 1)
        await asyncio.wait_for(run, 5)
        return send

    asyncio.run(scenario())


def test_cancelling_the_dispatch_cancels_queued_and_running_requests():
    async def scenario() -> _Recorder:
        send = _Recorder()
        jobs = [Job(k, "direct", False, 0.0) for k in range(3)]
        run = asyncio.ensure_future(dispatch(jobs, 1, send, Clock()))
        await _settle()
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        return send

    send = asyncio.run(scenario())
    assert send.started == [("direct", 0, 0)]  # the queued two were never sent


def test_a_waiter_cancelled_as_its_slot_is_released_ends_cancelled_and_frees_the_slot():
    async def race() -> tuple[type[BaseException] | None, list[int]]:
        slots = _Slots(1)
        slot = await slots.acquire()
        waiter = asyncio.ensure_future(slots.acquire())
        await asyncio.sleep(0)
        waiter.cancel()  # cancelled first, then the holder releases before the waiter resumes
        slots.release(slot)
        try:
            await waiter
        except BaseException as exc:  # noqa: BLE001 - which exception is the point
            return type(exc), list(slots._free)
        return None, list(slots._free)

    ended, free = asyncio.run(race())
    assert ended is asyncio.CancelledError and free == [0]


def test_the_measured_schedule_is_drawn_as_it_is_sent():
    """``--requests 99999999999`` once built every job up front: 24 GB and no first request."""
    from itertools import islice

    from doctor.evidence import ProbePath
    from doctor.probes.schedule import plan

    warm, measured = plan([ProbePath.DIRECT, ProbePath.GATEWAY], 10**6, 1, 2.0)
    assert iter(measured) is measured  # an iterator, not a list of two million jobs
    first = list(islice(measured, 4))
    assert [(j.index, j.path) for j in warm] == [(0, ProbePath.DIRECT), (0, ProbePath.GATEWAY)]
    assert [(j.index, j.path) for j in first] == [(1, ProbePath.GATEWAY), (1, ProbePath.DIRECT),
                                                  (2, ProbePath.DIRECT), (2, ProbePath.GATEWAY)]
    assert first[0].offset == first[1].offset == 0.0 and first[2].offset > 0
