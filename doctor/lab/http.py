"""A small HTTP/1.1 server for the lab: asyncio streams + h11, one event loop per server thread.

Why asyncio streams and not ``http.server`` with threads: the engine must hold many concurrent
streams (a probe at concurrency 64 plus background load) and the scheduler must hand tokens to
all of them from one loop, as vLLM's API server does; a thread per connection would put the
timing of every stream at the mercy of the GIL scheduler instead of the model's step times.

Why h11: it is the HTTP/1.1 state machine behind uvicorn's pure-Python protocol (and already
installed: httpx's transport depends on it), so framing follows the rules a real vLLM answer
follows: ``Transfer-Encoding: chunked`` with each ``send`` becoming exactly one chunk (vLLM via
uvicorn sends one SSE event per chunk), keep-alive, ``Connection: close``. Parsing HTTP by hand
would be the first place a lab bug could hide a probe bug; the one case h11 frames differently
from uvicorn's default protocol (httptools), a chunked answer to an HTTP/1.0 peer, is handled in
``Responder``.

Each server runs its own loop in its own thread so that a server that blocks its loop (the
gateway's ``serialise`` mode does so on purpose) never stalls the engine behind it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import email.utils
import logging
import threading
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

import h11

log = logging.getLogger(__name__)

READ_SIZE = 65536
STOP_TIMEOUT_S = 0.8


@dataclass
class Request:
    """One parsed HTTP request as the lab servers' handlers receive it (body read whole: the lab's
    requests are small JSON).
    """

    method: str
    target: str
    headers: dict[str, str]  # lower-case names
    body: bytes = b""
    http_version: str = "1.1"

    @property
    def path(self) -> str:
        return self.target.split("?", 1)[0]


class Responder:
    """Writes one response on a connection; with chunked framing, each ``send`` is one HTTP chunk.

    HTTP/1.0 peers get a chunked body too, then the connection closes. h11 would answer them
    close-delimited, but uvicorn (vLLM's server) sends chunks to them, and the difference
    matters: nginx's default ``proxy_http_version 1.0`` relays a chunked vLLM stream token by
    token but buffers a close-delimited one. That one case is framed by hand here.
    """

    def __init__(
        self, conn: h11.Connection, writer: asyncio.StreamWriter, server_name: str, http_version: str = "1.1"
    ) -> None:
        self._conn = conn
        self._writer = writer
        self._server_name = server_name
        self._http10 = http_version == "1.0"
        self._raw_chunked = False  # framing by hand (an HTTP/1.0 peer, a chunked body)
        self.started = False
        self.ended = False

    async def start(self, status: int, headers: list[tuple[str, str]], *, chunked: bool = True) -> None:
        self.write_head_now(status, headers, chunked=chunked)
        await self._writer.drain()

    def write_head_now(self, status: int, headers: list[tuple[str, str]], *, chunked: bool = True) -> None:
        """Queue the response head without awaiting (see ``write_now``)."""
        names = {k.lower() for k, _ in headers}
        out = [("date", email.utils.formatdate(usegmt=True)), ("server", self._server_name), *headers]
        chunked = chunked and "content-length" not in names
        if chunked:
            out.append(("transfer-encoding", "chunked"))
        self.started = True
        if chunked and self._http10:
            self._raw_chunked = True
            lines = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}", *(f"{k}: {v}" for k, v in out)]
            self._write("\r\n".join([*lines, "connection: close", "", ""]).encode("latin-1"))
            return
        self._write(self._conn.send(h11.Response(status_code=status, headers=out)))

    def write_now(self, data: bytes) -> None:
        """Queue ``data`` as one chunk without awaiting: for callers that block the loop on purpose."""
        if not data:
            return
        if self._raw_chunked:
            self._write(b"%x\r\n%b\r\n" % (len(data), data))
        else:
            self._write(self._conn.send(h11.Data(data=data)))

    async def send(self, data: bytes) -> None:
        self.write_now(data)
        await self._writer.drain()

    async def end(self) -> None:
        # After a hand-framed body h11 still expects a response: the connection then closes.
        self._write(b"0\r\n\r\n" if self._raw_chunked else self._conn.send(h11.EndOfMessage()))
        self.ended = True
        await self._writer.drain()

    async def send_full(self, status: int, body: bytes, content_type: str, extra: tuple[tuple[str, str], ...] = ()) -> None:
        headers = [("content-type", content_type), ("content-length", str(len(body))), *extra]
        await self.start(status, headers, chunked=False)
        if body:
            await self.send(body)
        await self.end()

    def _write(self, data: bytes | None) -> None:
        if data:
            self._writer.write(data)


Handler = Callable[[Request, Responder], Awaitable[None]]


@dataclass
class _ServerState:
    server: asyncio.AbstractServer | None = None
    writers: set[asyncio.StreamWriter] = field(default_factory=set)
    tasks: set[asyncio.Task] = field(default_factory=set)


class ThreadedServer:
    """Runs ``handler`` behind an h11 server on 127.0.0.1 in a private event loop thread.

    Subclasses may start extra coroutines on the loop with ``run_soon`` (the engine's step loop).
    """

    def __init__(self, handler: Handler, *, server_name: str, host: str = "127.0.0.1", port: int = 0) -> None:
        self._handler = handler
        self._server_name = server_name
        self._host = host
        self._want_port = port
        self.port = 0
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=f"lab-{server_name}", daemon=True)
        self._state = _ServerState()
        self._ready = threading.Event()
        self._error: BaseException | None = None

    @property
    def url(self) -> str:
        return f"http://{self._host}:{self.port}"

    def start(self) -> None:
        self._thread.start()
        self._ready.wait(timeout=10)
        if self._error is not None:
            raise self._error
        if not self.port:
            raise RuntimeError(f"{self._server_name} did not start listening")

    def run_soon(self, coro: Coroutine[Any, Any, None]) -> None:
        """Schedule a coroutine on the server loop (thread-safe); it is cancelled at stop."""

        def _spawn() -> None:
            task: asyncio.Task[None] = self.loop.create_task(coro)
            self._state.tasks.add(task)
            task.add_done_callback(self._task_done)

        self.loop.call_soon_threadsafe(_spawn)

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        fut = asyncio.run_coroutine_threadsafe(self._shutdown(), self.loop)
        try:
            fut.result(timeout=STOP_TIMEOUT_S)
        except (concurrent.futures.TimeoutError, RuntimeError) as exc:  # a blocked loop: stop it anyway below
            log.debug("%s: shutdown did not complete: %r", self._server_name, exc)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=STOP_TIMEOUT_S)

    # -- loop side -------------------------------------------------------------------------

    def _task_done(self, task: asyncio.Task) -> None:
        self._state.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("%s: background task failed", self._server_name, exc_info=task.exception())

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self._listen())
        except BaseException as exc:  # noqa: BLE001 - reported to start()
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        try:
            self.loop.run_forever()
        finally:
            for task in asyncio.all_tasks(self.loop):
                task.cancel()
            self.loop.run_until_complete(asyncio.sleep(0))
            self.loop.close()

    async def _listen(self) -> None:
        server = await asyncio.start_server(self._on_connection, self._host, self._want_port, backlog=1024)
        self._state.server = server
        self.port = server.sockets[0].getsockname()[1]

    async def _shutdown(self) -> None:
        if self._state.server is not None:
            self._state.server.close()
        for writer in list(self._state.writers):
            writer.close()
        for task in list(self._state.tasks):
            task.cancel()
        await asyncio.sleep(0)

    async def _on_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._state.writers.add(writer)
        task = asyncio.current_task()
        if task is not None:
            self._state.tasks.add(task)
        conn = h11.Connection(h11.SERVER)
        try:
            while True:
                request = await _read_request(conn, reader)
                if request is None:
                    break
                responder = Responder(conn, writer, self._server_name, request.http_version)
                try:
                    await self._handler(request, responder)
                except (ConnectionError, asyncio.IncompleteReadError):
                    break
                except Exception as exc:  # answer 500 rather than drop the socket
                    log.exception("%s: handler failed for %s %s", self._server_name, request.method, request.target)
                    if responder.started:
                        break
                    body = f'{{"error":{{"message":"{type(exc).__name__}","type":"InternalServerError","code":500}}}}'
                    await responder.send_full(500, body.encode(), "application/json")
                if not responder.ended or conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                    break
                conn.start_next_cycle()
        except (ConnectionError, h11.RemoteProtocolError, h11.LocalProtocolError, asyncio.CancelledError):
            pass
        finally:
            self._state.writers.discard(writer)
            if task is not None:
                self._state.tasks.discard(task)
            writer.close()


async def _read_request(conn: h11.Connection, reader: asyncio.StreamReader) -> Request | None:
    """The next full request on the connection, or None when the peer closed it."""
    head: h11.Request | None = None
    body = bytearray()
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            data = await reader.read(READ_SIZE)
            conn.receive_data(data)  # b"" = the peer closed; h11 turns it into ConnectionClosed
            continue
        if isinstance(event, h11.Request):
            head = event
        elif isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, h11.EndOfMessage):
            assert head is not None
            return Request(
                method=head.method.decode(),
                target=head.target.decode(),
                headers={k.decode().lower(): v.decode("latin-1") for k, v in head.headers},
                body=bytes(body),
                http_version=head.http_version.decode(),
            )
        elif isinstance(event, (h11.ConnectionClosed, h11.PAUSED)):
            return None


class HttpService:
    """What the engine and the gateway share: a ``ThreadedServer`` and the address it bound."""

    server: ThreadedServer

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def port(self) -> int:
        return self.server.port
