"""The probe's HTTP client: httpx, with every socket read stamped the moment the loop makes it.

httpx hands a response body to its caller in decoded pieces (one per HTTP chunk), not in
socket reads: fifteen events that a buffering proxy delivered in one read come out as fifteen
pieces, and stamping each when the caller sees it smears one arrival over the time the caller
spends on the previous pieces. At high concurrency it is worse: the task reading a stream
wakes up only when the loop gets to it, so a stamp taken there includes the client's own
queueing.

So the probe gives httpcore a network backend of its own, on asyncio's protocol API: the
event loop calls ``data_received`` as soon as it has read the socket, and that is where the
read is stamped (``perf_counter_ns``), before any task runs. ``read()`` then hands httpcore
one socket read at a time, and records its stamp and size in the ``ReadLog`` of the request
being served. The log is found through a context variable: httpcore performs the reads of a
response inside the task that iterates it, so each request task sees only its own reads, on
new and reused connections alike. This is hand-written rather than httpcore's AnyIO backend
because no library backend exposes the arrival time of a read, and it is cheaper per read
(no cancel scope per call), which is what lets the probe keep up at high concurrency.

httpx's ``AsyncHTTPTransport`` takes no network backend, so ``StampingTransport`` swaps in a
connection pool built with one (the same arguments httpx passes, plus ``network_backend``).
"""

from __future__ import annotations

import asyncio
import contextvars
import importlib.util
import os
import socket
import ssl
import sys
import time
from collections import deque
from typing import Any

import httpcore
import httpx

from doctor.evidence import ReadRecord
from doctor.foundation.clock import Clock

#: Stop reading the socket when this much is buffered and unread (httpcore reads as it parses).
_HIGH_WATER = 1 << 20


class ReadLog:
    """Socket reads of one request: time (clock seconds) and bytes; events are added by the parser.

    ``phase`` sets the current phase's deadline (clock seconds, ``doctor.probes.deadlines``): once
    a byte of the phase came, a read waits no longer than it, whatever the per-read timeout, and
    one that reaches it fails with ``httpcore.ReadTimeout``. Checked here, where every read waits,
    so a server sending a byte at a time cannot stretch a phase, at the cost of one comparison a
    read. Silence stays the per-read timeout's, started when the client reads again: a client
    that froze must not time out a server that was not silent for that long.
    """

    __slots__ = ("_header_reads", "_phase_reads", "clock", "deadline", "last_t", "reads")

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.reads: list[ReadRecord] = []
        self.last_t: float | None = None
        self._header_reads = 0
        self.deadline: float | None = None
        self._phase_reads = 0

    def phase(self, deadline: float) -> None:
        """Start a phase (the response head, the next token) that must end by ``deadline``."""
        self.deadline = deadline
        self._phase_reads = len(self.reads)

    def wait_limit(self, timeout: float | None) -> float | None:
        """How long a read may wait: ``timeout``, or less when the phase's deadline comes first
        and the phase has had bytes (a trickle, not silence)."""
        if self.deadline is None or len(self.reads) == self._phase_reads:
            return timeout
        left = self.deadline - self.clock.now()
        return left if timeout is None else min(timeout, left)

    def bind(self) -> None:
        """Make this log receive the reads of the current task (and only of it)."""
        _READS.set(self)

    def mark_headers(self) -> float | None:
        """Note that the response headers are complete: the time of the read that completed them."""
        self._header_reads = len(self.reads)
        return self.last_t

    def first_body_t(self) -> float | None:
        """The time of the read that carried the first body data; call it when that data is handed over.

        httpcore hands over body data the read that completed the headers carried before it reads
        again, so a body that began in that read is handed over with no read after it.
        """
        if len(self.reads) > self._header_reads:
            return self.reads[self._header_reads].t
        return self.last_t

    def add_events(self, n: int) -> None:
        """Credit the last read with ``n`` completed events: how many events each read carried shows buffering."""
        if self.reads:
            self.reads[-1].events += n


_READS: contextvars.ContextVar[ReadLog | None] = contextvars.ContextVar("doctor_probe_reads", default=None)


class _Protocol(asyncio.Protocol):
    """Queues (arrival ns, bytes) per socket read; wakes the one reader waiting."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.pieces: deque[tuple[int, bytes]] = deque()
        self.buffered = 0
        self.eof = False
        self.error: BaseException | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.paused = False
        self.drain_waiter: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.pieces.append((time.perf_counter_ns(), data))
        self.buffered += len(data)
        if self.buffered > _HIGH_WATER and self.transport is not None:
            self.transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        self.eof = True
        self._wake()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof = True
        self.error = exc
        self._wake()
        if self.drain_waiter is not None and not self.drain_waiter.done():
            self.drain_waiter.set_result(None)

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        if self.drain_waiter is not None and not self.drain_waiter.done():
            self.drain_waiter.set_result(None)

    def _wake(self) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)


async def _wait(fut: asyncio.Future[None], timeout: float | None, error: type[Exception]) -> None:
    """Await ``fut``, failing with ``error`` after ``timeout``; one timer, no extra task."""
    if timeout is None:
        await fut
        return
    loop = asyncio.get_running_loop()
    deadline = time.perf_counter() + timeout
    handle: asyncio.TimerHandle

    def expire() -> None:
        nonlocal handle
        if fut.done():
            return
        left = deadline - time.perf_counter()
        if left > 0:  # uvloop counts a timer from the start of its loop iteration: it can fire early
            handle = loop.call_later(left, expire)
            return
        fut.set_exception(error(f"no progress for {timeout:g} s"))

    handle = loop.call_later(timeout, expire)
    try:
        await fut
    finally:
        handle.cancel()


class _Stream(httpcore.AsyncNetworkStream):
    def __init__(self, transport: asyncio.Transport, protocol: _Protocol) -> None:
        self._transport = transport
        self._protocol = protocol
        # the read timeout: one timer per connection, not one per read (``_arm``)
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0  # perf_counter seconds when the armed timer fires
        self._waiting: asyncio.Future[None] | None = None  # the read waiting now
        self._deadline = 0.0  # its deadline (perf_counter seconds) and timeout
        self._timeout = 0.0

    def _arm(self, waiter: asyncio.Future[None], timeout: float) -> None:
        """Fail ``waiter`` with ``ReadTimeout`` after ``timeout``. A stream reads thousands of times
        a minute against a timeout of tens of seconds: the timer set by one read serves the next
        ones, re-set when it fires early, so a read costs no timer unless its deadline comes sooner."""
        self._waiting, self._timeout = waiter, timeout
        self._deadline = time.perf_counter() + timeout
        if self._timer is None or self._timer_at > self._deadline:
            if self._timer is not None:
                self._timer.cancel()
            self._timer_at = self._deadline
            self._timer = asyncio.get_running_loop().call_later(timeout, self._expire)

    def _expire(self) -> None:
        self._timer = None
        waiter = self._waiting
        if waiter is None or waiter.done():
            return  # no read waits: the next one sets a timer again
        left = self._deadline - time.perf_counter()
        if left > 0:  # a later read's deadline, or uvloop fired early (it counts from its iteration's start)
            self._timer_at = self._deadline
            self._timer = asyncio.get_running_loop().call_later(left, self._expire)
            return
        waiter.set_exception(httpcore.ReadTimeout(f"no progress for {self._timeout:g} s"))

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        p = self._protocol
        log = _READS.get()
        if not p.pieces:
            if p.eof:
                if p.error is not None:
                    raise httpcore.ReadError(str(p.error))
                return b""
            if log is not None:
                timeout = log.wait_limit(timeout)
                if timeout is not None and timeout <= 0:
                    raise httpcore.ReadTimeout("the phase's deadline passed")
            p.waiter = waiter = asyncio.get_running_loop().create_future()
            if timeout is not None:
                self._arm(waiter, timeout)
            try:
                await waiter
            finally:
                p.waiter = self._waiting = None
            if not p.pieces:
                if p.error is not None:
                    raise httpcore.ReadError(str(p.error))
                return b""
        ns, data = p.pieces.popleft()
        if len(data) > max_bytes:  # hand over the rest later, with the same arrival time
            p.pieces.appendleft((ns, data[max_bytes:]))
            data = data[:max_bytes]
        p.buffered -= len(data)
        if p.buffered <= _HIGH_WATER // 2 and not p.eof:
            self._transport.resume_reading()
        if log is not None:
            log.last_t = log.clock.at(ns)
            log.reads.append(ReadRecord(t=log.last_t, nbytes=len(data), events=0))
        return data

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        p = self._protocol
        if (p.eof and p.error is not None) or self._transport.is_closing():
            raise httpcore.WriteError("the connection is closed")
        self._transport.write(buffer)
        if p.paused:
            p.drain_waiter = asyncio.get_running_loop().create_future()
            try:
                await _wait(p.drain_waiter, timeout, httpcore.WriteTimeout)
            finally:
                p.drain_waiter = None

    async def aclose(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._transport.close()

    async def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                        timeout: float | None = None) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        if self._timer is not None:  # the new stream reads with timers of its own
            self._timer.cancel()
        try:
            transport = await asyncio.wait_for(
                loop.start_tls(self._transport, self._protocol, ssl_context, server_hostname=server_hostname), timeout)
        except asyncio.TimeoutError:
            raise httpcore.ConnectTimeout(f"no TLS handshake within {timeout:g} s") from None
        except (OSError, ssl.SSLError) as exc:
            raise httpcore.ConnectError(str(exc)) from exc
        return _Stream(transport, self._protocol)  # type: ignore[arg-type]

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable":  # httpcore: an idle keep-alive connection the server closed
            return bool(self._protocol.pieces) or self._protocol.eof
        name = {"ssl_object": "ssl_object", "client_addr": "sockname", "server_addr": "peername", "socket": "socket"}.get(info)
        return self._transport.get_extra_info(name) if name else None


class _StampingBackend(httpcore.AsyncNetworkBackend):
    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                          local_address: str | None = None, socket_options: Any = None) -> httpcore.AsyncNetworkStream:
        if not 0 <= port <= 65535:  # httpx's URL parser lets it through; uvloop would wrap it round to another port
            raise httpcore.ConnectError("OverflowError: connect(): port must be 0-65535.")  # asyncio's own words
        loop = asyncio.get_running_loop()
        local = (local_address, 0) if local_address else None
        try:
            transport, protocol = await asyncio.wait_for(
                loop.create_connection(_Protocol, host, port, local_addr=local), timeout)
        except asyncio.TimeoutError:
            raise httpcore.ConnectTimeout(f"no connection within {timeout:g} s") from None
        except OSError as exc:  # socket.gaierror (DNS) is an OSError: kept as the cause
            raise httpcore.ConnectError(str(exc)) from exc
        sock = transport.get_extra_info("socket")
        for option in socket_options or ():
            sock.setsockopt(*option)
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return _Stream(transport, protocol)

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Any = None) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        transport, protocol = await asyncio.wait_for(loop.create_unix_connection(_Protocol, path), timeout)
        return _Stream(transport, protocol)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class StampingTransport(httpx.AsyncHTTPTransport):
    """``httpx.AsyncHTTPTransport`` whose connections stamp every read (HTTP/1.1 only)."""

    def __init__(self, *, ssl_context: ssl.SSLContext, limits: httpx.Limits) -> None:
        super().__init__(verify=ssl_context, limits=limits)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=_StampingBackend(),
        )


async def speaks_plain_http(host: str, port: int, timeout_s: float) -> bool:
    """Whether ``host:port`` answers a plain-text HTTP request with a status line.

    Asked once per path after an https:// URL's TLS handshake failed: the commonest cause is the
    wrong scheme, and saying so in one line beats an OpenSSL reason (``WRONG_VERSION_NUMBER``) or
    a handshake timeout read as capacity.
    """
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout_s)
    except (OSError, asyncio.TimeoutError):
        return False
    try:
        writer.write(f"GET / HTTP/1.0\r\nHost: {host}\r\n\r\n".encode("ascii", "replace"))
        head = await asyncio.wait_for(reader.readexactly(5), timeout_s)
        return head == b"HTTP/"
    except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError):
        return False
    finally:
        writer.close()


async def speaks_tls(host: str, port: int, timeout_s: float) -> bool:
    """Whether ``host:port`` completes a TLS handshake (any certificate): asked once per path after
    an http:// URL's connection closed before any answer, the signature of a TLS port."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port, ssl=context), timeout_s)
    except (OSError, asyncio.TimeoutError, ssl.SSLError):
        return False
    writer.close()
    return True


#: How long asking a port which scheme it speaks may take, at most (it is asked after a failure).
SCHEME_ASK_S = 2.0


async def other_scheme(url: str, timeout_s: float) -> str | None:
    """``"http"`` when an https:// ``url``'s port answers plain HTTP, ``"https"`` when an http:// one's
    completes a TLS handshake; None otherwise. Asked once after a failure that a wrong scheme explains
    (a failed or timed-out handshake; a connection closed before any answer), by the stream probe
    and the endpoints probe alike, so the first failure says it in one line."""
    parsed = httpx.URL(url)
    if parsed.scheme not in ("http", "https") or not parsed.host:
        return None
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    timeout = min(timeout_s, SCHEME_ASK_S)
    if parsed.scheme == "https":
        return "http" if await speaks_plain_http(parsed.host, port, timeout) else None
    return "https" if await speaks_tls(parsed.host, port, timeout) else None


def scheme_line(url: str, spoken: str) -> str:
    """The one line that says a URL has the wrong scheme for its port."""
    parsed = httpx.URL(url)
    host = f"[{parsed.host}]" if ":" in parsed.host else parsed.host
    where = f"{parsed.scheme}://{host}" + (f":{parsed.port}" if parsed.port else "")  # never its credentials
    return (f"TLS handshake failed: {where} speaks plain HTTP; use http://" if spoken == "http"
            else f"no HTTP answer: {where} speaks TLS; use https://")


def skip_missing_sniffio_imports() -> None:
    """Make httpcore's repeated ``import sniffio`` fail at once when sniffio is not installed.

    httpcore imports sniffio each time it sets up a lock (several per request) and treats an
    ImportError as "asyncio". Without sniffio installed, every such import searches sys.path
    again: measured ~0.5 ms of CPU per request, all of it spent while requests are being sent,
    which delays the sends of a burst. A ``None`` entry in ``sys.modules`` is Python's own
    negative cache for an import; it changes nothing else (the module is absent either way).
    """
    if "sniffio" not in sys.modules and importlib.util.find_spec("sniffio") is None:
        sys.modules["sniffio"] = None  # type: ignore[assignment]


def make_client(context: ssl.SSLContext, connect_timeout_s: float, stall_timeout_s: float) -> httpx.AsyncClient:
    """A client of one connection, kept alive between requests (the probe keeps one per slot).

    The read timeout is the stall timeout: no byte for that long fails the request as a stall.
    ``trust_env=False``: a probe must reach the URL it was given, not a proxy from the environment.
    """
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    timeout = httpx.Timeout(connect=connect_timeout_s, read=stall_timeout_s, write=connect_timeout_s, pool=None)
    return httpx.AsyncClient(transport=StampingTransport(ssl_context=context, limits=limits), timeout=timeout, trust_env=False)


def ssl_context(verify: bool | str) -> ssl.SSLContext:
    """``--insecure`` (False), ``--ca-cert PATH`` (a file or directory) or the default trust store.

    Raises ``OSError`` / ``ssl.SSLError`` for an unreadable CA bundle.
    """
    if isinstance(verify, str):
        if os.path.isdir(verify):
            return ssl.create_default_context(capath=verify)
        return ssl.create_default_context(cafile=verify)
    return httpx.create_ssl_context(verify=verify)
