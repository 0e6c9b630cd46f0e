"""The probe's reads stamped with the kernel's receive time (``doctor.probes.kernel_stamps``).

A real server on 127.0.0.1 sends, in a thread of its own, while the probe's transport reads on
the event loop (asyncio's and uvloop's); the server notes ``perf_counter_ns`` after each send,
the run's clock. Orders and ratios only: no stamp is held to a number of milliseconds.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from doctor.foundation.clock import Clock
from doctor.probes import kernel_stamps
from doctor.probes.transport import ReadLog, _StampingBackend

pytestmark = pytest.mark.skipif(not kernel_stamps.supported(), reason="the kernel's stamps are Linux's")


def _runners() -> list[Any]:
    runners: list[Any] = [pytest.param(asyncio.run, id="asyncio")]
    try:  # uvloop is optional: where it is installed, the probe runs on it
        import uvloop as uv
    except ImportError:
        return runners
    return [*runners, pytest.param(uv.run, id="uvloop")]


class _Sender:
    """A TCP server that accepts ``conns`` connections, then sends ``plan[i]`` = [(delay s, bytes)]
    on connection i, all from one thread, noting the clock after each send; ``finished`` is set once
    the last send returned."""

    def __init__(self, conns: int, plan: Callable[[int], list[tuple[float, bytes]]]) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.conns, self.plan = conns, plan
        self.sent: list[list[int]] = [[] for _ in range(conns)]
        self.go = threading.Event()
        self.finished = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        accepted = []
        for _ in range(self.conns):
            conn, _ = self.listener.accept()
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            accepted.append(conn)
        self.go.wait(10)
        steps = sorted((delay, i, data) for i in range(self.conns) for delay, data in self.plan(i))
        start = time.perf_counter()
        for delay, i, data in steps:
            time.sleep(max(0.0, start + delay - time.perf_counter()))
            accepted[i].sendall(data)
            self.sent[i].append(time.perf_counter_ns())
        self.finished.set()
        time.sleep(0.2)
        for conn in accepted:
            conn.close()
        self.listener.close()


async def _read_all(sender: _Sender, block: bool, clock: Clock) -> list[ReadLog]:
    """Connect the sender's streams, start it, block the loop inside a callback until it has sent
    everything (``block``), then read every stream to its end, each in a task with its own log."""
    port, conns, go = sender.port, sender.conns, sender.go
    backend = _StampingBackend()
    streams = [await backend.connect_tcp("127.0.0.1", port, timeout=5) for _ in range(conns)]
    logs = [ReadLog(clock) for _ in streams]

    async def drain(stream: Any, log: ReadLog) -> None:
        log.bind()
        while await stream.read(65536, timeout=5):
            pass

    go.set()
    if block:  # a client busy elsewhere until every event was sent: no read meanwhile
        asyncio.get_running_loop().call_soon(sender.finished.wait, 10)
    await asyncio.gather(*(drain(s, log) for s, log in zip(streams, logs, strict=True)))
    for stream in streams:
        await stream.aclose()
    return logs


def _run(runner: Callable[[Coroutine[Any, Any, Any]], Any], sender: _Sender, block: bool) -> tuple[Clock, list[ReadLog]]:
    clock = Clock()
    logs = runner(_read_all(sender, block, clock))
    sender.thread.join(10)
    return clock, logs


@pytest.mark.parametrize("runner", _runners())
def test_a_reads_kernel_stamp_precedes_its_loop_stamp(runner):
    sender = _Sender(1, lambda _i: [(0.01 * k, b"data: %d\n\n" % k) for k in range(20)])
    clock, (log,) = _run(runner, sender, False)
    assert log.stamp_clock() == "kernel" and len(log.reads) == len(log.gaps) > 0
    assert all(gap >= 0 for gap in log.gaps)  # the kernel had the bytes no later than the loop read them
    assert sum(r.nbytes for r in log.reads) == sum(len(b"data: %d\n\n" % k) for k in range(20))
    # each read stamped before the server's send of it returned (loopback receives inside the send)
    assert log.reads[-1].t <= clock.at(sender.sent[0][-1])


@pytest.mark.parametrize("runner", _runners())
def test_a_blocked_loop_moves_the_loops_stamps_not_the_kernels(runner):
    """Six streams each get one event, 40 ms apart, while the loop is blocked in a callback until the
    server has sent them all: read after the block, the loop's stamps collapse into a moment, the kernel's keep the server's spacing."""
    conns, spacing = 6, 0.04
    sender = _Sender(conns, lambda i: [(0.05 + i * spacing, b"data: token\n\n")])
    clock, logs = _run(runner, sender, True)
    kernel = [log.reads[0].t for log in logs]
    loop = [log.reads[0].t + log.gaps[0] for log in logs]
    server = [clock.at(sent[0]) for sent in sender.sent]
    server_span = server[-1] - server[0]
    assert kernel == sorted(kernel)  # the order the server sent in
    assert 0.8 < (kernel[-1] - kernel[0]) / server_span < 1.25
    assert (max(loop) - min(loop)) / server_span < 0.25  # read one after another once the loop woke
    assert min(loop) > max(kernel)  # every loop stamp after the block, every kernel stamp inside it


def test_segments_that_wait_unread_take_the_stamp_of_the_last():
    """Why the probe reads off its loop (``doctor.probes.drainer``): TCP merges a segment into the
    unread one before it and keeps the newest stamp, so a socket read late, even for exactly the first
    segment's bytes, is stamped at the second's arrival (docs/benchmarks.md). A raw socket, no probe."""
    sender = _Sender(1, lambda _i: [(0.02, b"data: one\n\n"), (0.12, b"data: two\n\n")])
    client = socket.create_connection(("127.0.0.1", sender.port))
    assert kernel_stamps.enable(client)
    sender.go.set()
    sender.finished.wait(10)
    data, ancillary, _, _ = client.recvmsg(len(b"data: one\n\n"), kernel_stamps.ANCILLARY)
    stamp = kernel_stamps.receive_stamp(ancillary)
    client.close()
    sender.thread.join(10)
    clock = Clock()
    first, second = (clock.at(ns) for ns in sender.sent[0])
    assert data == b"data: one\n\n" and stamp is not None
    assert clock.at(clock.from_realtime(stamp)) - first > 0.5 * (second - first)  # the second's arrival, not the first's


@pytest.mark.parametrize("runner", _runners())
def test_a_blocked_loop_no_longer_merges_two_events_each_keeps_its_arrival(runner):
    """The drainer reads each event as it arrives, whatever the loop does: two events sent 100 ms apart
    while the loop is blocked until both were sent come as two reads, each stamped at its own arrival,
    and the loop's stamps (kernel stamp + gap) both after the block."""
    sender = _Sender(1, lambda _i: [(0.02, b"data: one\n\n"), (0.12, b"data: two\n\n")])
    clock, (log,) = _run(runner, sender, True)
    first, second = (clock.at(ns) for ns in sender.sent[0])
    assert len(log.reads) == 2
    assert log.reads[0].t - first < 0.25 * (second - first) < log.reads[1].t - first
    loop = [read.t + gap for read, gap in zip(log.reads, log.gaps, strict=True)]
    assert min(loop) >= clock.at(sender.sent[0][-1])  # the loop took both after the block


@pytest.mark.parametrize("runner", _runners())
def test_a_request_leaves_on_the_kernels_transmit_stamp(runner):
    """The last byte of a request is stamped as it left (the kernel's transmit stamp), no later than
    the write's return, and that stamp keys on the LAST write: the headers' own does not count."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        conn, _ = listener.accept()
        got = b""
        while not got.endswith(b"body"):
            got += conn.recv(100)
        conn.sendall(b"ok")
        conn.close()
        listener.close()

    threading.Thread(target=serve, daemon=True).start()

    async def main() -> tuple[ReadLog, float]:
        stream = await _StampingBackend().connect_tcp("127.0.0.1", port, timeout=5)
        log = ReadLog(Clock())
        log.bind()
        await stream.write(b"POST / HTTP/1.1\r\n\r\n")
        await stream.write(b"body")
        returned = log.clock.now()
        while await stream.read(100, timeout=5):
            pass
        await stream.aclose()
        return log, returned

    log, returned = runner(main())
    assert log.left_clock == "kernel" and log.t_left is not None
    assert log.t_left <= returned
    assert log.t_left <= log.reads[0].t  # it left before its answer came


def test_a_tls_stream_keeps_the_loops_clock():
    """TLS reads the socket itself: the socket goes to asyncio's transport with its stamping off (its
    reads are then the loop's); a peer that speaks no TLS still fails the handshake as it did."""
    import ssl

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:  # a peer that never completes a handshake: the client's fallback is what is tested
        conn, _ = listener.accept()
        conn.sendall(b"not tls\n")
        time.sleep(0.3)
        conn.close()
        listener.close()

    threading.Thread(target=serve, daemon=True).start()

    async def main() -> str:
        stream = await _StampingBackend().connect_tcp("127.0.0.1", port, timeout=5)
        context = ssl.create_default_context()
        try:
            await stream.start_tls(context, "127.0.0.1", timeout=5)
        except Exception as exc:  # noqa: BLE001 - the handshake must fail on a plain peer
            return type(exc).__name__
        return "handshake"

    assert asyncio.run(main()) == "ConnectError"


def test_drain_threads_of_successive_runs_restore_the_switch_interval_and_let_their_loops_go():
    """One loop per run, several runs a process (a benchmark, the tests): each run's drain thread
    lowers the interpreter's switch interval while it reads, the last to end puts the process's own
    back, and none keeps its loop or sockets once its loop closed."""
    import sys

    from doctor.probes.drainer import Drainer

    def ended() -> bool:  # a drain thread notices its loop closed within its idle wait
        deadline = time.monotonic() + 5
        while (Drainer._of or Drainer._running) and time.monotonic() < deadline:
            time.sleep(0.05)
        return not Drainer._of and Drainer._running == 0

    assert ended()  # the earlier tests' threads
    before = sys.getswitchinterval()
    for _ in range(3):
        sender = _Sender(1, lambda _i: [(0.01, b"data: one\n\n")])
        _run(asyncio.run, sender, False)
    assert ended()
    assert sys.getswitchinterval() == before
