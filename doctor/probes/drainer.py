"""One thread that takes every probe socket's bytes off the kernel as soon as they arrive.

A kernel receive stamp is exact only for bytes read before the next segment of the same connection
arrives: TCP merges a segment into the unread one before it (``tcp_try_coalesce``), and the merged
buffer keeps the LATER segment's stamp (docs/benchmarks.md). At 256 streams on one core the event
loop reads a socket up to a token gap late, so a stream's first token, read together with its
second, took the second's stamp: TTFT stamp errors of 40-60 ms at p99.

So the reads leave the event loop: this thread waits on all the probe's sockets at once
(``select.epoll``, level-triggered) and drains each one that is readable (``recvmsg`` until it would
block), keeping each read's kernel stamp; the loop gets the reads in batches
(``call_soon_threadsafe``, one wake-up per batch) and hands them to the connection's protocol as it
did its own reads, stamped by the loop too as it takes them: how late the loop was (``ReadLog.gaps``)
is what the loop's clock alone would have added, and how late this thread read past the newest segment
it took (``ReadLog.read_gaps``), which the self-check reports too. That figure is a floor, not a bound:
a reader late by more than a token gap reads two tokens together and sees only its lateness past the
second; what merging costs is measured against a server's send log (``bench/probe_fidelity.py``).
The thread's work per read is one system call and a tuple, so it runs within the interpreter's
switch interval of the bytes' arrival, which is lowered while it runs
(``SWITCH_INTERVAL_S``: the loop's thread gives up the interpreter lock that often when the drainer
waits for it). The kernel's transmit stamps, which make a socket readable on its error queue, are
drained here too. Parsing, timers and writes stay on the loop.

Hand-written: neither asyncio, uvloop nor a library hands ancillary data over, let alone off the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import socket
import sys
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import ClassVar, Protocol

from doctor.probes import kernel_stamps

#: How often the loop's thread gives the interpreter lock to a waiting drainer while one runs
#: (CPython's default is 5 ms, longer than the 3 ms a first token's stamp may be late).
SWITCH_INTERVAL_S = 0.0002
#: At most this much per ``recvmsg``.
READ_BYTES = 1 << 16
#: How long the thread waits with nothing to read before it checks that its loop still runs.
IDLE_S = 0.5

_EVENTS = select.EPOLLIN | select.EPOLLERR | select.EPOLLHUP if hasattr(select, "epoll") else 0


class Sink(Protocol):
    """What a drained connection hears, on the loop's thread."""

    def drained(self, kernel_ns: int | None, read_ns: int, data: bytes) -> None: ...
    def drained_eof(self) -> None: ...
    def drained_error(self, exc: OSError) -> None: ...
    def drained_sent(self, stamps: list[tuple[int, int]]) -> None: ...


class Drainer:
    """The drain thread of one event loop: ``add`` a socket and its sink, ``remove`` it before closing it."""

    #: the running drainer of each loop; a drainer takes itself out when its thread ends
    _of: ClassVar[dict[asyncio.AbstractEventLoop, Drainer]] = {}
    _guard: ClassVar[threading.Lock] = threading.Lock()
    #: drainers running now, and the switch interval from before the first of them lowered it: the
    #: last one to end restores it, however their lives overlap (one loop per run, several runs a process)
    _running: ClassVar[int] = 0
    _interval: ClassVar[float] = 0.005

    @classmethod
    def of(cls, loop: asyncio.AbstractEventLoop) -> Drainer | None:
        """The loop's drainer, started on first use; None where the platform has no epoll."""
        if not _EVENTS:
            return None
        with cls._guard:
            drainer = cls._of.get(loop)
            if drainer is None or not drainer._thread.is_alive():
                drainer = cls._of[loop] = cls(loop)
            return drainer

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._epoll = select.epoll()
        self._lock = threading.Lock()  # held while a socket is read or removed: its fd cannot be reused meanwhile
        self._socks: dict[int, tuple[socket.socket, Sink]] = {}
        self._batch: list[Callable[[], None]] = []
        self._flushing = False
        self._thread = threading.Thread(target=self._run, name="llm-doctor-drainer", daemon=True)
        self._thread.start()

    def add(self, sock: socket.socket, sink: Sink) -> None:
        with self._lock:
            fd = sock.fileno()
            self._socks[fd] = (sock, sink)
            self._epoll.register(fd, _EVENTS)

    def remove(self, sock: socket.socket) -> None:
        """Stop reading ``sock`` (before it is closed: its fd may be reused at once); reads already taken
        may still reach its sink, which ignores them once closing."""
        with self._lock:
            fd = sock.fileno()
            if self._socks.pop(fd, None) is not None:
                with contextlib.suppress(OSError, ValueError):
                    self._epoll.unregister(fd)

    def _run(self) -> None:
        _above_the_loop()
        with Drainer._guard:
            if Drainer._running == 0:
                Drainer._interval = sys.getswitchinterval()
                sys.setswitchinterval(min(Drainer._interval, SWITCH_INTERVAL_S))
            Drainer._running += 1
        try:
            self._serve()
        except BaseException as exc:
            self._strand(exc)
            raise
        finally:
            with Drainer._guard:
                if Drainer._of.get(self._loop) is self:
                    del Drainer._of[self._loop]
                Drainer._running -= 1
                if Drainer._running == 0:
                    sys.setswitchinterval(Drainer._interval)
            with self._lock:
                self._socks.clear()
            self._epoll.close()

    def _serve(self) -> None:
        while not self._loop.is_closed():
            try:
                events = self._epoll.poll(IDLE_S)
            except InterruptedError:
                continue
            for fd, mask in events:
                self._drain(fd, mask)
            if self._batch and not self._post():
                return

    def _strand(self, exc: BaseException) -> None:
        """The thread is failing: every socket it reads hears an error, rather than waiting out its timeout."""
        with self._lock:
            sinks = [sink for _, sink in self._socks.values()]
            self._socks.clear()
            error = OSError(f"the probe's reader stopped: {exc!r}")
            self._batch += [partial(sink.drained_error, error) for sink in sinks]
        if self._batch:
            self._post()

    def _drain(self, fd: int, mask: int) -> None:
        with self._lock:
            entry = self._socks.get(fd)
            if entry is None:
                return
            sock, sink = entry
            while True:
                try:
                    data, ancillary, _, _ = sock.recvmsg(READ_BYTES, kernel_stamps.ANCILLARY)
                except (BlockingIOError, InterruptedError):
                    break
                except OSError as exc:
                    self._drop(fd)
                    self._batch.append(partial(sink.drained_error, exc))
                    return
                at = time.perf_counter_ns()
                if not data:
                    self._drop(fd)
                    self._batch.append(sink.drained_eof)
                    return
                stamp = kernel_stamps.receive_stamp(ancillary)
                self._batch.append(partial(sink.drained, stamp, at, data))
                if len(data) < READ_BYTES:
                    break
            if mask & select.EPOLLERR:
                with contextlib.suppress(OSError):
                    stamps = kernel_stamps.sent_stamps(sock)
                    if stamps:
                        self._batch.append(partial(sink.drained_sent, stamps))

    def _drop(self, fd: int) -> None:
        self._socks.pop(fd, None)
        with contextlib.suppress(OSError, ValueError):
            self._epoll.unregister(fd)

    def _post(self) -> bool:
        """Hand the batch to the loop (one wake-up while it has not taken the last); False once the loop is closed."""
        with self._lock:
            if self._flushing:
                return True
            self._flushing = True
        try:
            self._loop.call_soon_threadsafe(self._flush)
        except RuntimeError:  # the loop closed
            return False
        return True

    def _flush(self) -> None:
        with self._lock:
            batch, self._batch = self._batch, []
            self._flushing = False
        for deliver in batch:
            try:
                deliver()
            except Exception as exc:  # noqa: BLE001 - one connection's failure must not drop the others' reads
                self._loop.call_exception_handler({"message": "llm-doctor's drain thread: a read's delivery failed",
                                                   "exception": exc})


def _above_the_loop() -> None:
    """Under real-time scheduling (a benchmark pins the probe so), run this thread one priority above
    the loop's: threads of one real-time priority on one core take turns only when one blocks or its
    100 ms round-robin slice ends, so the drainer, woken, would wait out the loop's slice before it
    could even ask for the interpreter lock. Under the default scheduler a thread woken from a long
    wait runs soon on its own; nothing to do."""
    if not hasattr(os, "sched_getscheduler"):
        return
    with contextlib.suppress(OSError):
        policy = os.sched_getscheduler(0)  # this thread's, on Linux
        if policy in (os.SCHED_FIFO, os.SCHED_RR):
            priority = os.sched_getparam(0).sched_priority
            os.sched_setscheduler(0, policy, os.sched_param(min(priority + 1, os.sched_get_priority_max(policy))))
