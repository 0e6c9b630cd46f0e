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

Each server runs its own loop in its own thread (``doctor.lab.loop_server``, the lifecycle the
test servers share) so that a server that blocks its loop (the gateway's ``serialise`` mode does
so on purpose) never stalls the engine behind it.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from http import HTTPStatus

import h11

from doctor.lab.loop_server import LoopServer

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


class ThreadedServer(LoopServer):
    """Runs ``handler`` behind an h11 server on 127.0.0.1 in a private event loop thread.

    The engine starts extra coroutines on the loop with ``run_soon`` (its step loop). A short
    ``STOP_TIMEOUT_S``: the gateway's ``serialise`` mode blocks its loop on purpose, and a stop
    must not wait on it.
    """

    def __init__(self, handler: Handler, *, server_name: str, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__(name=f"lab-{server_name}", host=host, port=port, stop_timeout_s=STOP_TIMEOUT_S)
        self._handler = handler
        self._server_name = server_name

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
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
        except (h11.RemoteProtocolError, h11.LocalProtocolError):
            pass


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
