"""A TCP server on a private event loop thread: the one lifecycle every lab and test server shares.

The lab's engine and gateway need it at runtime (``doctor.lab.http`` puts h11 on top), and the
test servers (``tests/support/sse_server.py``, ``hostile_server.py``, ``gateway_personas.py``,
the framing tests' flooder) put their own raw bytes on the same loop, since an HTTP library will
not drip a status line or cut an event in half. A subclass writes only ``serve``, what one
connection gets: starting the loop's thread, binding, tracking connections and background tasks,
and stopping them all (cancelled, awaited, the loop closed) are here, once.

Each server has a loop of its own so that one that blocks its loop (the lab gateway's
``serialise`` mode does so on purpose) never stalls the server behind it; ``stop`` then gives up
waiting after ``stop_timeout_s`` and stops the loop anyway.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

log = logging.getLogger(__name__)

START_TIMEOUT_S = 10.0

_Server = TypeVar("_Server", bound="LoopServer")


class LoopServer:
    """Serves ``serve`` on ``host:port`` (0: any free port) from a private event loop thread.

    ``start``/``stop`` or a ``with`` block; ``url`` and ``port`` once started. ``setup`` and
    ``teardown`` run on the loop around the listening socket, for what a server holds open (an
    upstream client).
    """

    def __init__(self, *, name: str, host: str = "127.0.0.1", port: int = 0, backlog: int = 1024,
                 stop_timeout_s: float = 10.0) -> None:
        self.name = name
        self.host = host
        self.port = port
        self._backlog = backlog
        self._stop_timeout_s = stop_timeout_s
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._server: asyncio.AbstractServer | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[Any]] = set()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Answer one connection; it is closed when this returns (or raises a connection error)."""
        raise NotImplementedError

    async def setup(self) -> None:
        """Runs on the loop before the socket listens."""

    async def teardown(self) -> None:
        """Runs on the loop after every connection and background task has ended."""

    def start(self) -> None:
        self._thread.start()
        try:
            asyncio.run_coroutine_threadsafe(self._listen(), self.loop).result(timeout=START_TIMEOUT_S)
        except BaseException as exc:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=self._stop_timeout_s)
            if isinstance(exc, concurrent.futures.TimeoutError):
                raise RuntimeError(f"{self.name} did not start listening within {START_TIMEOUT_S:.0f} s") from exc
            raise

    def run_soon(self, coro: Coroutine[Any, Any, None]) -> None:
        """Schedule a coroutine on the server loop (thread-safe); it is cancelled at stop."""

        def _spawn() -> None:
            task: asyncio.Task[None] = self.loop.create_task(coro)
            self._tasks.add(task)
            task.add_done_callback(self._task_done)

        self.loop.call_soon_threadsafe(_spawn)

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        fut = asyncio.run_coroutine_threadsafe(self._shutdown(), self.loop)
        try:
            fut.result(timeout=self._stop_timeout_s)
        except (concurrent.futures.TimeoutError, RuntimeError) as exc:  # a blocked loop: stop it anyway below
            log.debug("%s: shutdown did not complete: %r", self.name, exc)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=self._stop_timeout_s)

    def __enter__(self: _Server) -> _Server:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- loop side -------------------------------------------------------------------------

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            for task in asyncio.all_tasks(self.loop):
                task.cancel()
            self.loop.run_until_complete(asyncio.sleep(0))
            self.loop.close()

    async def _listen(self) -> None:
        await self.setup()
        self._server = await asyncio.start_server(self._on_connection, self.host, self.port, backlog=self._backlog)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.teardown()

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("%s: background task failed", self.name, exc_info=task.exception())

    async def _on_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._writers.add(writer)
        self._tasks.add(task)
        try:
            await self.serve(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # the peer went away, or the server is stopping: ending quietly keeps asyncio from logging it
        finally:
            self._writers.discard(writer)
            self._tasks.discard(task)
            writer.close()
