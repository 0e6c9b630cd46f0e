"""A deliberately hostile OpenAI-compatible server, for the hardening tests.

An on-call engineer points llm-doctor at a server that is misbehaving by definition; these are
the answers that once cost a run (a traceback, no report, a deadline ignored, gigabytes of
memory). The mode is chosen by a path prefix, so one server serves every case and the probes'
ordinary paths (``/version``, ``/v1/models``, ``/metrics``, ``/v1/chat/completions``) follow it::

    http://127.0.0.1:PORT/m/drip/v1/chat/completions

Modes:

- ``flood``: an SSE stream of tiny events written as fast as the socket takes them (bounded by
  ``FLOOD_EVENTS``, so a test can never run forever).
- ``drip``: every answer's status line and headers dripped one byte per ``DRIP_S`` seconds: a
  server that never lets a plain GET finish unless the client enforces its own deadline.
- ``trickle``: a stream's head at once, then one byte of an SSE comment per ``DRIP_S`` seconds and
  never a token: bytes that must not keep the first-token deadline from firing.
- ``mute``: a stream's head at once, then nothing, the connection held open (for ``MUTE_S``): a
  gateway that answers its head and never forwards a token.
- ``huge``: a normal stream whose usage claims ``completion_tokens: 10000000000``, with
  ``prompt_tokens: true`` and a non-string ``finish_reason``.
- ``surrogates``: lone surrogates (``"\\ud800"``, legal JSON, illegal UTF-8) in the stream text,
  the model id, ``/version`` and the error strings.
- ``cut``: the connection closed in the middle of an event, after a few tokens.
- ``deep``: ``/version`` and ``/v1/models`` answer JSON nested far deeper than Python's recursion
  limit; ``/metrics`` carries a 310-digit sample.

Raw asyncio sockets on ``doctor.lab.loop_server``'s loop thread, as ``tests/support/sse_server.py``,
because an HTTP library will not drip its own status line or cut an event in half.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from doctor.lab.loop_server import LoopServer

MODES = ("flood", "drip", "trickle", "mute", "huge", "surrogates", "cut", "deep")
#: Upper bound of one flood, so the server's own loop is bounded (a client that keeps reading
#: stops it here; one that stops reading stops it sooner).
FLOOD_EVENTS = 2_000_000
DRIP_S = 1.0
MUTE_S = 600.0
DEPTH = 100_000
MODEL = "hostile-model"


class HostileServer(LoopServer):
    """Serves on 127.0.0.1 from a private event loop thread (``LoopServer``); ``base(mode)`` once started."""

    def __init__(self) -> None:
        super().__init__(name="hostile-server")
        self.requests: list[str] = []  # "METHOD path" of every request read, in order

    def base(self, mode: str) -> str:
        assert mode in MODES, mode
        return f"{self.url}/m/{mode}"

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.LimitOverrunError:
            return
        method, target = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ")[:2]
        length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        if length:
            await reader.readexactly(length)
        self.requests.append(f"{method} {target}")
        mode, _, path = target.removeprefix("/m/").partition("/")
        await self._respond(writer, mode, "/" + path)

    async def _respond(self, writer: asyncio.StreamWriter, mode: str, path: str) -> None:
        if mode == "drip":
            head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nx-drip: " + b"d" * 600 + b"\r\n\r\n"
            for i in range(len(head)):
                writer.write(head[i:i + 1])
                await writer.drain()
                await asyncio.sleep(DRIP_S)
            return
        if path == "/v1/models":
            model = "\\ud800" if mode == "surrogates" else MODEL
            body = _deep() if mode == "deep" else '{"object":"list","data":[{"id":"' + model + '","object":"model"}]}'
            await _send(writer, "application/json", body.encode())
        elif path == "/version":
            body = _deep() if mode == "deep" else ('{"version":"0.9\\udfff"}' if mode == "surrogates" else '{"version":"0.9.0"}')
            await _send(writer, "application/json", body.encode())
        elif path == "/health":
            await _send(writer, "text/plain", b"")
        elif path == "/metrics":
            value = "1" + "0" * 309 if mode == "deep" else "1"
            await _send(writer, "text/plain; version=0.0.4",
                        f'vllm:num_requests_running{{model_name="{MODEL}"}} {value}\n'.encode())
        elif path.startswith("/v1/"):
            await self._stream(writer, mode)
        else:
            await _send(writer, "text/plain", b"not found", status="404 Not Found")

    async def _stream(self, writer: asyncio.StreamWriter, mode: str) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n")
        if mode == "trickle":
            for _ in range(600):
                writer.write(b":")
                await writer.drain()
                await asyncio.sleep(DRIP_S)
            return
        if mode == "mute":
            await writer.drain()
            await asyncio.sleep(MUTE_S)
            return
        if mode == "flood":
            event = b'data: {"choices":[{"index":0,"delta":{"content":"x"}}]}\n\n'
            batch = event * 512
            for _ in range(FLOOD_EVENTS // 512):
                writer.write(batch)
                await writer.drain()
            writer.write(b"data: [DONE]\n\n")
            return
        text = "\\ud800 tok" if mode == "surrogates" else "tok"
        for _ in range(4):
            writer.write(_event('{"choices":[{"index":0,"delta":{"content":"' + text + '"},"finish_reason":null}]}'))
            await writer.drain()
            await asyncio.sleep(0.01)
        if mode == "cut":
            writer.write(b'data: {"choices":[{"index":0,"del')
            await writer.drain()
            return
        if mode == "huge":
            last = ('{"choices":[{"index":0,"delta":{},"finish_reason":7}],'
                    '"usage":{"prompt_tokens":true,"completion_tokens":10000000000}}')
        else:
            last = '{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"model":"\\udc00"}'
        writer.write(_event(last) + b"data: [DONE]\n\n")
        await writer.drain()


def _event(data: str) -> bytes:
    return b"data: " + data.encode() + b"\n\n"


def _deep() -> str:
    return '{"data":' * DEPTH + "1" + "}" * DEPTH


async def _send(writer: asyncio.StreamWriter, ctype: str, body: bytes, status: str = "200 OK") -> None:
    writer.write(f"HTTP/1.1 {status}\r\ncontent-type: {ctype}\r\ncontent-length: {len(body)}\r\n"
                 f"connection: close\r\n\r\n".encode() + body)
    await writer.drain()


@contextmanager
def silent_port() -> Iterator[str]:
    """A port on 127.0.0.1 that accepts every connection and never sends a byte (a hung server or gateway)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                held.append(listener.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.close()
        for conn in held:
            conn.close()


@contextmanager
def blackholed_port() -> Iterator[int]:
    """A port on 127.0.0.1 whose connection attempts go unanswered, as an engine address that drops
    packets: a listener that never accepts, its one-slot accept queue filled, so the kernel drops
    every further SYN and a connect waits until its own timeout."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    filler = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        yield port
    finally:
        filler.close()
        listener.close()
