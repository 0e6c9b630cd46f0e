"""The stream probe's streams sharded over worker processes: one event loop per core.

One process reading every stream saturates its core near 256 streams (``docs/benchmarks.md``:
its token stamps fall 75 ms behind at p99), and a late stamp reads as a slow server. So at high
concurrency the probe keeps its schedule in the parent and hands each request to one of a few
worker processes, each with its own event loop, HTTP clients and ``SelfCheck``:

- **The schedule stays the parent's.** ``doctor.probes.schedule.dispatch`` runs in the parent
  as for one process: the pairs' order, the closed loop per slot, the Poisson arrivals drawn
  once up front, the global in-flight cap (its slots) and the stop rule. A request goes to the
  worker that owns its slot (slot ``s`` to worker ``s % workers``), with its scheduled time on
  the run's clock; the worker sends it at once and answers with its finished ``RequestTrace``,
  which frees the slot. The worker's time to receive the job is in the request's latency, as a
  late arrival is: latency counts from the schedule (no coordinated omission).
- **One clock.** Every process stamps ``time.perf_counter_ns`` against the parent's ``t0``: on
  Linux that is ``CLOCK_MONOTONIC``, one clock for every process, so the workers' stamps merge
  without translation (also so on macOS and Windows, whose counters are system-wide).
- **Each worker's self-check is its own** (``RequestTrace.shard``, ``ClientHealth.shards``): a
  freeze of one worker is taken out of its requests only, and any saturated worker makes the
  client suspect (``doctor.probes.selfcheck.merge``).
- **Stopping.** Ctrl-C reaches the whole process group, SIGTERM only the parent: the workers
  ignore SIGINT and stop when the parent says so (or when it is gone: their socket ends), so
  either stops them all at once through the parent, which cancels them, receives what each had
  measured so far, and writes the partial report.

Standard library only: ``multiprocessing`` with the ``spawn`` start method (``fork`` would copy
the locks of the collector's threads, the /metrics scraper's among them; ``spawn`` works the
same on every platform, and its start-up, a second or so, is paid before the measured phase),
and one ``socket.socketpair`` per worker carrying pickled messages framed by their length, read
by asyncio streams: the worker's writes never block its event loop (a full pipe would freeze
the very stamps this exists to keep), and the parent reads every worker on one loop without a
thread. ``concurrent.futures`` has no way to stream results back while a task runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import multiprocessing
import pickle
import signal
import socket
from collections.abc import Callable, Hashable
from multiprocessing.process import BaseProcess
from typing import Any

from doctor.probes.cpus import usable_cpus

#: Streams per worker when the count is chosen for the user: the most at which the benchmark's
#: one process kept its token stamps within 1 ms at p99 (``docs/benchmarks.md``; it saturates near 256).
STREAMS_PER_WORKER = 64
#: How long the workers may take to start (a spawned interpreter imports httpx and the probe).
START_TIMEOUT_S = 60.0
#: How long stopped workers may take to hand back what they measured before they are killed.
STOP_TIMEOUT_S = 15.0
_HEADER = 4  # bytes of each message's length, big-endian


def choose_workers(streams: int, requested: int | None = None, cpus: int | None = None) -> int:
    """Worker processes for ``streams`` in flight: ``requested`` (``--client-workers``; 1 = one
    process), else one per ``STREAMS_PER_WORKER`` streams, at most one per usable CPU; never
    more than the streams."""
    if requested is not None:
        return max(1, min(requested, streams))
    usable = cpus if cpus is not None else usable_cpus()
    return max(1, min(usable, math.ceil(streams / STREAMS_PER_WORKER), streams))


class ShardError(Exception):
    """The workers could not be started: the probe runs in one process instead, and says why."""


class ShardLost(Exception):
    """A worker ended before it answered: its requests in flight were not measured."""


class Link:
    """Pickled messages, each framed by its length, over one end of a socket pair (asyncio streams).

    Pickle is safe here: both ends are this program's own processes.
    """

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader, self._writer = reader, writer

    @classmethod
    async def open(cls, sock: socket.socket) -> Link:
        reader, writer = await asyncio.open_connection(sock=sock)
        return cls(reader, writer)

    def send(self, message: Any) -> None:
        """Queue ``message``; the loop writes it without blocking (dropped once the other end is gone)."""
        if not self._writer.is_closing():
            data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
            self._writer.write(len(data).to_bytes(_HEADER, "big") + data)

    async def receive(self) -> Any:
        """The next message, or None once the other end has closed."""
        try:
            size = int.from_bytes(await self._reader.readexactly(_HEADER), "big")
            return pickle.loads(await self._reader.readexactly(size))
        except (asyncio.IncompleteReadError, ConnectionError):
            return None

    async def close(self) -> None:
        """Write what is queued, then close."""
        with contextlib.suppress(ConnectionError):
            await self._writer.drain()
        self._writer.close()
        with contextlib.suppress(ConnectionError):
            await self._writer.wait_closed()


def worker_signals() -> None:
    """In a worker: ignore Ctrl-C (the parent stops it), then take the SIGINT it was started with blocked."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


#: What starting the workers raises when they cannot start, each a ``ShardError`` naming it (the run
#: goes on in one process and says so) rather than the end of the run: ``OSError`` (too many processes
#: or open files, no interpreter to spawn, the working directory gone); the target or its arguments
#: not pickling, which ``spawn`` does in the parent before the child exists (``pickle.PicklingError``;
#: ``TypeError`` "cannot pickle '_thread.lock' object"; ``AttributeError`` "Can't pickle local
#: object" before Python 3.14); ``ValueError`` (no ``spawn`` start method, a closed process);
#: ``RuntimeError`` (a process started while a spawned child still imports its main module, and
#: ``RecursionError`` pickling a structure too deep); and ``AssertionError``, which
#: ``multiprocessing`` raises in a daemonic process, a worker of ``multiprocessing.Pool`` or of
#: Celery's prefork pool, that may not have children. Other exceptions are this program's own
#: errors and propagate.
START_FAILURES = (OSError, pickle.PicklingError, TypeError, AttributeError, ValueError, RuntimeError, AssertionError)
#: A worker's entry point: ``target(sock, shard, workers, *args)``, a module-level function
#: (``spawn`` imports it by name). It answers ``("ready",)``, then ``("done", key, payload)`` per
#: job (and any notes of its own), and ``("final", payload)`` once told ``("stop",)`` or when the
#: parent's end closes.
Target = Callable[..., None]


class ShardPool:
    """The parent's side: start the workers, send each job to its slot's worker, stop them all.

    ``on_done(payload)`` receives every finished job's payload on the parent's loop, also of a
    job whose ``run`` was cancelled meanwhile (the deadline), so nothing measured is lost;
    ``on_note(shard, message)`` every other message a worker sends while it runs (a diagnosis's
    workers say what they have in flight, for the parent's watchdog).
    """

    def __init__(self, workers: int, target: Target, args: tuple[Any, ...], on_done: Callable[[Any], None],
                 on_note: Callable[[int, Any], None] | None = None) -> None:
        self.workers, self._target, self._args, self._on_done, self._on_note = workers, target, args, on_done, on_note
        self._procs: list[BaseProcess] = []
        self._links: list[Link] = []
        self._readers: list[asyncio.Task[None]] = []
        self._pending: dict[Hashable, tuple[int, asyncio.Future[None]]] = {}
        self.finals: list[Any] = [None] * workers
        self.lost: str | None = None  # why a worker ended before it was told to

    async def start(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Start every worker and wait until each is ready; ``ShardError`` (all stopped again) if one is not,
        naming what failed (``START_FAILURES``)."""
        ends: list[socket.socket] = []
        # started with SIGINT blocked: a Ctrl-C while a worker boots must not print its traceback
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT}) if hasattr(signal, "pthread_sigmask") else None
        try:
            context = multiprocessing.get_context("spawn")
            for shard in range(self.workers):
                mine, theirs = socket.socketpair()
                ends.append(mine)
                try:
                    proc = context.Process(target=self._target, args=(theirs, shard, self.workers, *self._args),
                                           name=f"llm-doctor-client-{shard}", daemon=True)
                    self._procs.append(proc)
                    proc.start()
                finally:
                    theirs.close()  # the worker holds its own copy once started; none is left to hold otherwise
        except BaseException as exc:
            self._kill()
            for end in ends:
                end.close()
            if isinstance(exc, START_FAILURES):  # on one line: some (spawn's RuntimeError) are a page of advice
                said = " ".join(str(exc).split())
                raise ShardError(f"cannot start {self.workers} client worker processes ({type(exc).__name__}: {said})") from exc
            raise
        finally:
            if blocked is not None:
                signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        try:
            self._links = [await Link.open(end) for end in ends]
            answers = await asyncio.wait_for(asyncio.gather(*(link.receive() for link in self._links)), timeout_s)
        except asyncio.TimeoutError:
            self._kill()
            raise ShardError(f"the {self.workers} client worker processes did not start within {timeout_s:g} s") from None
        except BaseException:
            self._kill()
            raise
        failed = [shard for shard, answer in enumerate(answers) if answer != ("ready",)]
        if failed:
            self._kill()
            raise ShardError(f"client worker {failed[0]} of {self.workers} ended as it started "
                             f"(exit code {self._procs[failed[0]].exitcode})")
        self._readers = [asyncio.ensure_future(self._read(shard, link)) for shard, link in enumerate(self._links)]

    async def run(self, slot: int, key: Hashable, message: Any) -> None:
        """Send ``message`` to the worker that owns ``slot``; return once it says ``key`` is done.
        ``ShardLost`` when a worker ended: nothing more is sent then."""
        if self.lost is not None:
            raise ShardLost(self.lost)
        shard = slot % self.workers
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending[key] = (shard, future)
        self._links[shard].send(message)
        try:
            await future
        finally:
            self._pending.pop(key, None)

    def broadcast(self, message: Any) -> None:
        """Send ``message`` to every worker (what the parent decided that each must know, e.g. a bound)."""
        for link in self._links:
            link.send(message)

    async def _read(self, shard: int, link: Link) -> None:
        """Deliver one worker's messages until its end closes; then fail what it left unanswered."""
        try:
            while (message := await link.receive()) is not None:
                if message[0] == "done":
                    self._on_done(message[2])
                    entry = self._pending.pop(message[1], None)
                    if entry is not None and not entry[1].done():
                        entry[1].set_result(None)
                elif message[0] == "final":
                    self.finals[shard] = message[1]
                elif self._on_note is not None:
                    self._on_note(shard, message)
        finally:
            if self.finals[shard] is None and self.lost is None:
                code = self._procs[shard].exitcode
                self.lost = f"client worker {shard} ended unexpectedly" + (f" (exit code {code})" if code is not None else "")
            for owner, future in list(self._pending.values()):
                if owner == shard and not future.done():
                    future.set_exception(ShardLost(self.lost or f"client worker {shard} stopped"))

    async def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> list[Any]:
        """Tell every worker to stop (those in flight are cancelled) and collect each one's final
        payload, by shard (None: it never sent one); the workers are gone when this returns."""
        for link in self._links:
            link.send(("stop",))
        try:
            if self._readers:
                await asyncio.wait_for(asyncio.gather(*self._readers, return_exceptions=True), timeout_s)
        except asyncio.TimeoutError:
            self.lost = self.lost or f"the client workers did not stop within {timeout_s:g} s"
        finally:
            for task in self._readers:
                task.cancel()
            for link in self._links:
                with contextlib.suppress(OSError):
                    await link.close()
            await asyncio.get_running_loop().run_in_executor(None, self._join, timeout_s)
        return self.finals

    def _join(self, timeout_s: float) -> None:
        for proc in self._procs:
            proc.join(timeout_s)
        self._kill()

    def _kill(self) -> None:
        """End every worker still alive (they hold nothing to keep by then)."""
        for proc in self._procs:
            if proc.pid is not None and proc.is_alive():
                proc.kill()
                proc.join(5.0)
