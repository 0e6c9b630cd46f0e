"""The lab gateway: a streaming reverse proxy in front of the lab engine, with the known ways to
hold a token stream back.

Modes:

- ``pass``: every upstream read is written to the client as it comes (nginx with
  ``proxy_buffering off``, or a chunked upstream behind ``proxy_http_version 1.1``).
- ``buffer``: output is held until ``buffer_size`` bytes are accumulated or the upstream ends,
  then flushed in ``buffer_size`` pieces; the response headers go out with the first flush.
  This is what nginx's default ``proxy_buffering on`` did to a close-delimited upstream in
  fixtures/real-vllm/nginx/relay-default.chat.jsonl: 4104-byte reads (4 KiB + chunk framing)
  of ~15 events each, and headers arriving with the first burst.
- ``compress``: gzip ``Content-Encoding`` on ``text/event-stream`` when the client accepts it,
  with a compressor that emits output only when ``buffer_size`` compressed bytes are ready or
  at the end, as nginx's gzip filter does behind buffering: a short answer compresses to less
  than one buffer, so it arrives whole at the end (first token = last token).
- ``serialise``: a blocking upstream call inside the async edge. The handler uses a synchronous
  HTTP client on the event loop, so while one stream is relayed no other connection is even
  read: each request waits for the ones before it and TTFT grows with concurrency, while each
  relayed stream itself flows token by token.

``overhead_ms`` adds a constant delay before each request is forwarded (auth, an extra hop).

The gateway says which product it plays in its ``Server`` header (``SERVER_NAMES``): nginx, whose
defaults the buffering and compression modes reproduce, and a Python (ASGI) edge for ``serialise``.
An incident's gateway names itself too (nginx, Caddy, Envoy do), so the demo reads as one would:
``proxy_buffering off`` in nginx's terms, not the generic list for an unidentified gateway.
"""

from __future__ import annotations

import asyncio
import time
import zlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx

from doctor.lab.http import HttpService, Request, Responder, ThreadedServer

MODES = ("pass", "buffer", "compress", "serialise")
#: mode -> the ``Server`` header: the product the mode plays (nginx unless named here).
SERVER_NAMES = {"serialise": "uvicorn (llm-doctor lab)"}
PLAYED = "nginx (llm-doctor lab)"
# Hop-by-hop or re-framed headers: the gateway writes its own framing, date and server.
_DROP = {"connection", "keep-alive", "transfer-encoding", "content-length", "date", "server", "content-encoding"}


@dataclass
class GatewayConfig:
    """How the lab gateway relays: the ``mode`` (one of ``MODES``, see the module docstring) and its
    knobs; checked on construction so a scenario with a typo fails before any server starts.
    """

    mode: str = "pass"
    buffer_size: int = 4096  # bytes held per flush in "buffer" and "compress" modes (4k, 8k, 16k)
    overhead_ms: float = 0.0
    connect_timeout_s: float = 5.0
    read_timeout_s: float = 60.0  # nginx's proxy_read_timeout default

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"unknown gateway mode {self.mode!r}; expected one of {', '.join(MODES)}")
        if self.buffer_size < 1:
            raise ValueError("buffer_size must be >= 1")


def _forwarded_headers(request: Request) -> dict[str, str]:
    return {k: v for k, v in request.headers.items() if k not in _DROP and k not in ("host", "accept-encoding")}


def _response_headers(upstream: httpx.Response) -> list[tuple[str, str]]:
    return [(k, v) for k, v in upstream.headers.items() if k.lower() not in _DROP]


class _Flusher:
    """Holds bytes and releases them in ``size`` pieces; sends headers with the first piece."""

    def __init__(self, responder: Responder, status: int, headers: list[tuple[str, str]], size: int) -> None:
        self._responder = responder
        self._status = status
        self._headers = headers
        self._size = size
        self._held = bytearray()

    async def add(self, data: bytes) -> None:
        self._held += data
        while len(self._held) >= self._size:
            await self._emit(bytes(self._held[: self._size]))
            del self._held[: self._size]

    async def finish(self) -> None:
        if self._held or not self._responder.started:
            await self._emit(bytes(self._held))
            self._held.clear()
        await self._responder.end()

    async def _emit(self, data: bytes) -> None:
        if not self._responder.started:
            await self._responder.start(self._status, self._headers)
        await self._responder.send(data)


class LabGateway(HttpService):
    """The lab's gateway server: relays every request to ``upstream`` (the lab engine) and holds the
    stream back as its config's mode says, so the proxy checks have a known cause to find.
    """

    def __init__(self, upstream: str, config: GatewayConfig | None = None, port: int = 0) -> None:
        self.upstream = upstream.rstrip("/")
        self.config = config or GatewayConfig()
        self.server = ThreadedServer(self._handle, server_name=SERVER_NAMES.get(self.config.mode, PLAYED), port=port)
        self._timeout = httpx.Timeout(self.config.read_timeout_s, connect=self.config.connect_timeout_s)
        self._client: httpx.AsyncClient | None = None
        self._sync_client: httpx.Client | None = None

    def start(self) -> None:
        self.server.start()

    def stop(self) -> None:
        self.server.stop()
        if self._sync_client is not None:
            self._sync_client.close()

    async def _handle(self, request: Request, responder: Responder) -> None:
        if self.config.mode == "serialise":
            self._relay_blocking(request, responder)
            await responder.end()
            return
        if self.config.overhead_ms:
            await asyncio.sleep(self.config.overhead_ms / 1000)
        if self._client is None:
            limits = httpx.Limits(max_connections=None, max_keepalive_connections=256)
            self._client = httpx.AsyncClient(timeout=self._timeout, limits=limits)
        upstream_request = self._client.build_request(
            request.method, self.upstream + request.target, headers=_forwarded_headers(request), content=request.body
        )
        try:
            upstream = await self._client.send(upstream_request, stream=True)
        except httpx.HTTPError as exc:
            await responder.send_full(502, f"upstream error: {type(exc).__name__}".encode(), "text/plain")
            return
        try:
            await self._relay(request, upstream, responder)
        except httpx.HTTPError as exc:  # the upstream failed mid-answer: cut the client's too
            raise ConnectionResetError(f"upstream failed: {type(exc).__name__}") from exc
        finally:
            await upstream.aclose()

    async def _relay(self, request: Request, upstream: httpx.Response, responder: Responder) -> None:
        mode = self.config.mode
        headers = _response_headers(upstream)
        is_stream = upstream.headers.get("content-type", "").startswith("text/event-stream")
        chunks: AsyncIterator[bytes] = upstream.aiter_raw()
        if mode == "compress" and is_stream and "gzip" in request.headers.get("accept-encoding", ""):
            headers += [("content-encoding", "gzip"), ("vary", "Accept-Encoding")]
            chunks = _gzip(chunks)
        elif mode == "pass" or (mode == "compress" and not is_stream):
            await responder.start(upstream.status_code, headers)
            async for chunk in chunks:
                await responder.send(chunk)
            await responder.end()
            return
        flusher = _Flusher(responder, upstream.status_code, headers, self.config.buffer_size)
        async for chunk in chunks:
            await flusher.add(chunk)
        await flusher.finish()

    def _relay_blocking(self, request: Request, responder: Responder) -> None:
        """The anti-pattern on purpose: synchronous I/O on the event loop, one request at a time."""
        if self.config.overhead_ms:
            time.sleep(self.config.overhead_ms / 1000)
        if self._sync_client is None:
            self._sync_client = httpx.Client(timeout=self._timeout)
        try:
            with self._sync_client.stream(
                request.method,
                self.upstream + request.target,
                headers=_forwarded_headers(request),
                content=request.body,
            ) as upstream:
                responder.write_head_now(upstream.status_code, _response_headers(upstream))
                for chunk in upstream.iter_raw():
                    responder.write_now(chunk)  # the transport sends at once while the loop is blocked
        except httpx.HTTPError as exc:
            if not responder.started:
                responder.write_head_now(502, [("content-type", "text/plain")])
            responder.write_now(f"upstream error: {type(exc).__name__}".encode())


async def _gzip(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """Gzip without sync flushes: compressed bytes appear only as the deflate window fills."""
    compressor = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    async for chunk in chunks:
        out = compressor.compress(chunk)
        if out:
            yield out
    yield compressor.flush()
