"""The probe's HTTP client: httpx, with every socket read stamped the moment the loop makes it.

httpx hands a response body to its caller in decoded pieces (one per HTTP chunk), not in
socket reads: fifteen events that a buffering proxy delivered in one read come out as fifteen
pieces, and stamping each when the caller sees it smears one arrival over the time the caller
spends on the previous pieces. At high concurrency it is worse: the task reading a stream
wakes up only when the loop gets to it, so a stamp taken there includes the client's own
queueing.

So the probe gives httpcore a network backend of its own. On plain HTTP it polls the raw socket
(``loop.add_reader``) and reads it with ``recvmsg``, which hands over, with the bytes, the time
the kernel received them (``doctor.probes.kernel_stamps``): a read's stamp is then when its bytes
reached the host, whatever the event loop was doing, and the loop's own stamp, taken as the read
returns, is kept beside it only to measure how late the loop was (``ReadLog.gaps``, which the
self-check reports). Where the platform gives no kernel stamp, and on TLS (the record layer sits
between the socket and the bytes; asyncio's TLS transport reads the socket itself), the read is
stamped on asyncio's protocol API instead: the event loop calls ``data_received`` as soon as it has
read the socket, and that is where the read is stamped (``perf_counter_ns``), before any task
runs. Each request records which clock its reads came from (``RequestTrace.stamp_clock``).
``read()`` hands httpcore one socket read at a time, and records its stamp and size in the
``ReadLog`` of the request being served. The log is found through a context variable: httpcore
performs the reads of a response inside the task that iterates it, so each request task sees
only its own reads, on new and reused connections alike. This is hand-written rather than
httpcore's AnyIO backend because no library backend exposes the arrival time of a read, and it
is cheaper per read (no cancel scope per call), which is what lets the probe keep up at high
concurrency.

The send side is stamped the same way: the kernel's transmit stamp of the request's last byte
(``ReadLog.t_left``), else the moment the write that completed it returned.

httpx's ``AsyncHTTPTransport`` takes no network backend, so ``StampingTransport`` swaps in a
connection pool built with one (the same arguments httpx passes, plus ``network_backend``).
"""

from __future__ import annotations

import asyncio
import contextlib
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
from doctor.probes import kernel_stamps
from doctor.probes.drainer import Drainer

#: Stop reading the socket when this much is buffered and unread (httpcore reads as it parses).
_HIGH_WATER = 1 << 20
#: Transmit stamps kept while no request awaits one (``_SocketTransport._match_sent``).
_KEPT_SENT = 8
#: At most this much per ``recvmsg`` (httpcore reads 64 KiB at a time; a larger buffer costs an mmap per read).
_READ_BYTES = 1 << 16


class ReadLog:
    """Socket reads of one request: time (clock seconds) and bytes; events are added by the parser.

    ``phase`` sets the current phase's deadline (clock seconds, ``doctor.probes.deadlines``): once
    a byte of the phase came, a read waits no longer than it, whatever the per-read timeout, and
    one that reaches it fails with ``httpcore.ReadTimeout``. Checked here, where every read waits,
    so a server sending a byte at a time cannot stretch a phase, at the cost of one comparison a
    read. Silence stays the per-read timeout's, started when the client reads again: a client
    that froze must not time out a server that was not silent for that long.
    """

    __slots__ = ("_header_reads", "_phase_reads", "clock", "deadline", "gaps", "kernel_reads", "last_t", "left_clock",
                 "read_gaps", "reads", "t_left")

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.reads: list[ReadRecord] = []
        self.last_t: float | None = None
        self._header_reads = 0
        self.deadline: float | None = None
        self._phase_reads = 0
        self.kernel_reads = 0  # reads stamped by the kernel; the others by the loop
        #: per kernel-stamped read, seconds from the kernel's stamp to the loop's: what the loop's
        #: clock would have added to it (kept in memory for the self-check, not in the bundle)
        self.gaps: list[float] = []
        #: per kernel-stamped read the drain thread took (``doctor.probes.drainer``), seconds from the
        #: kernel's stamp (of the newest segment read) to that read: a floor of the reader's lateness
        self.read_gaps: list[float] = []
        #: when the request's last byte left (clock seconds) and by whose clock: "kernel" (its
        #: transmit stamp) or "loop" (the write returned); the last write's, on a request re-sent
        self.t_left: float | None = None
        self.left_clock: str | None = None

    def record(self, kernel_ns: int | None, loop_ns: int, nbytes: int, read_ns: int | None = None) -> None:
        """Log one read: stamped at ``kernel_ns`` (the kernel's ``CLOCK_REALTIME``) when there is one,
        else at ``loop_ns`` (``perf_counter_ns`` as the loop took it). A kernel stamp is never later
        than the loop's read of the same bytes; the clamp takes out the offset's own error (~1 us).
        ``read_ns``: when the drain thread read it (``perf_counter_ns``), where one did."""
        if kernel_ns is None:
            self.last_t = self.clock.at(loop_ns)
        else:
            ns = min(self.clock.from_realtime(kernel_ns), loop_ns)
            self.last_t = self.clock.at(ns)
            self.kernel_reads += 1
            self.gaps.append((loop_ns - ns) / 1e9)
            if read_ns is not None:
                self.read_gaps.append(max(0, read_ns - ns) / 1e9)
        self.reads.append(ReadRecord(t=self.last_t, nbytes=nbytes, events=0))

    def left(self, ns: int, kernel: bool) -> None:
        """The request's last byte left at ``ns`` (the kernel's ``CLOCK_REALTIME`` when ``kernel``, else ``perf_counter_ns``)."""
        self.t_left = self.clock.at(self.clock.from_realtime(ns) if kernel else ns)
        self.left_clock = "kernel" if kernel else "loop"

    def stamp_clock(self) -> str | None:
        """Whose clock stamped this request's reads: "kernel", "loop", "mixed", or None without a read."""
        if not self.reads:
            return None
        if self.kernel_reads == len(self.reads):
            return "kernel"
        return "loop" if self.kernel_reads == 0 else "mixed"

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
    """Queues (kernel ns or None, loop ns, bytes) per socket read; wakes the one reader waiting."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | _SocketTransport | None = None
        self.pieces: deque[tuple[int | None, int, bytes, int | None]] = deque()
        self.buffered = 0
        self.eof = False
        self.error: BaseException | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.paused = False
        self.drain_waiter: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.received(None, time.perf_counter_ns(), data)

    def received(self, kernel_ns: int | None, loop_ns: int, data: bytes, read_ns: int | None = None) -> None:
        """One socket read: the kernel's stamp of it (``CLOCK_REALTIME``) when there is one, the loop's,
        and the drain thread's when it read it (``doctor.probes.drainer``)."""
        self.pieces.append((kernel_ns, loop_ns, data, read_ns))
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


class _SocketTransport:
    """What ``_Stream`` needs of a transport, over a connected raw socket the loop polls, so that each
    read is a ``recvmsg`` carrying the kernel's receive stamp (``doctor.probes.kernel_stamps``).

    Hand-written because neither asyncio's transports nor uvloop's hand ancillary data over. Reads go
    to the same ``_Protocol`` as asyncio's would (``received``), one ``recvmsg`` per readiness; writes
    go to the socket at once, and what it does not take waits for writability (the protocol is told,
    as asyncio tells it). The kernel's transmit stamps come back on the socket's error queue, which
    also makes the socket readable (``EPOLLERR``): they are drained whenever a read finds no data, and
    while a request waits for its last byte's (``expect_sent``).
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket, protocol: _Protocol, stamping: bool) -> None:
        self._loop, self._sock, self._protocol = loop, sock, protocol
        self.stamping = stamping  # the kernel stamps this socket's reads and sends (``kernel_stamps.enable``)
        self._fd = sock.fileno()
        self._out = bytearray()
        self._closing = False
        self._reading = True
        self._written = 0  # bytes handed to the kernel since stamping began: the transmit stamps' key
        self._sent: list[tuple[int, int]] = []  # transmit stamps not yet matched with a request's last byte
        self._expect: tuple[int, ReadLog] | None = None  # (key of the last byte written, its request's log)
        # reads off the loop, as the bytes arrive (``doctor.probes.drainer``); the loop's own reader without epoll
        self._drainer = Drainer.of(loop)
        protocol.connection_made(self)  # type: ignore[arg-type]  # the protocol keeps whichever transport feeds it
        self._start_reading()

    def _start_reading(self) -> None:
        if self._drainer is not None:
            self._drainer.add(self._sock, self)
        else:
            self._loop.add_reader(self._fd, self._on_readable)

    def drained(self, kernel_ns: int | None, read_ns: int, data: bytes) -> None:
        """One read the drainer took at ``read_ns`` (``Sink``), stamped by the loop as it takes it, as its own reader would."""
        if not self._closing:
            self._protocol.received(kernel_ns, time.perf_counter_ns(), data, read_ns)

    def drained_eof(self) -> None:
        if not self._closing:
            self._reading = False
            self._protocol.eof_received()

    def drained_error(self, exc: OSError) -> None:
        if not self._closing:
            self._lost(exc)

    def drained_sent(self, stamps: list[tuple[int, int]]) -> None:
        self._match_sent(stamps)

    def _on_readable(self) -> None:
        if self._expect is not None:
            self._drain_sent()
        try:
            data, ancillary, _, _ = self._sock.recvmsg(_READ_BYTES, kernel_stamps.ANCILLARY)
        except (BlockingIOError, InterruptedError):
            if self.stamping:
                self._drain_sent()  # woken by the error queue: a send's stamp, not data
            return
        except OSError as exc:
            self._lost(exc)
            return
        loop_ns = time.perf_counter_ns()
        if not data:
            self._stop_reading()
            self._protocol.eof_received()
            return
        self._protocol.received(kernel_stamps.receive_stamp(ancillary), loop_ns, data)

    def _drain_sent(self) -> None:
        try:
            stamps = kernel_stamps.sent_stamps(self._sock)
        except OSError:
            return  # the socket's own error: the next read reports it
        self._match_sent(stamps)

    def _match_sent(self, stamps: list[tuple[int, int]]) -> None:
        """Transmit stamps (byte count, ns), read here or by the drainer: the awaited request's, when among them."""
        self._sent.extend(stamps)
        if self._expect is not None:
            key, log = self._expect
            done = [ns for count, ns in self._sent if count >= key]
            if done:
                log.left(done[0], kernel=True)
                self._expect = None
            self._sent = [(count, ns) for count, ns in self._sent if count >= key and not done]
        else:  # no request awaits its stamp (a write with no request's log bound): keep only the newest
            del self._sent[:-_KEPT_SENT]

    def expect_sent(self, log: ReadLog) -> None:
        """The write just made completed a request: its kernel transmit stamp, once it comes, is when it left."""
        self._expect = (self._written - 1, log)
        self._drain_sent()  # on loopback the stamp is queued by the send itself

    def write(self, data: bytes) -> None:
        if self._closing:
            return
        self._written += len(data)
        if not self._out:
            try:
                sent = self._sock.send(data)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError as exc:
                self._lost(exc)
                return
            if sent == len(data):
                return
            data = data[sent:]
            self._loop.add_writer(self._fd, self._on_writable)
            self._protocol.pause_writing()
        self._out += data

    def _on_writable(self) -> None:
        try:
            sent = self._sock.send(self._out)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._lost(exc)
            return
        del self._out[:sent]
        if not self._out:
            self._loop.remove_writer(self._fd)
            self._protocol.resume_writing()

    def pause_reading(self) -> None:
        self._stop_reading()

    def resume_reading(self) -> None:
        if not self._reading and not self._closing:
            self._reading = True
            self._start_reading()

    def _stop_reading(self) -> None:
        if self._reading:
            self._reading = False
            if self._drainer is not None:
                self._drainer.remove(self._sock)
            else:
                self._loop.remove_reader(self._fd)

    def is_closing(self) -> bool:
        return self._closing

    def detach(self) -> socket.socket:
        """Hand the socket over (to asyncio's TLS transport), stamping off: its error queue must stay
        empty, or asyncio would be woken for it again and again."""
        self._stop_reading()
        self._loop.remove_writer(self._fd)
        self._closing = True
        with contextlib.suppress(OSError):
            self._sock.setsockopt(socket.SOL_SOCKET, kernel_stamps.SO_TIMESTAMPING, 0)
            kernel_stamps.sent_stamps(self._sock)
        return self._sock

    def close(self) -> None:
        if not self._closing:
            self._lost(None)

    def _lost(self, exc: Exception | None) -> None:
        """Closed by us (``exc`` None) or by a socket error: the protocol hears it as asyncio's would."""
        self._closing = True
        self._stop_reading()
        self._loop.remove_writer(self._fd)
        self._sock.close()
        self._protocol.connection_lost(exc)

    def get_extra_info(self, name: str) -> Any:
        if name == "socket":
            return self._sock
        if name in ("sockname", "peername"):
            with contextlib.suppress(OSError):
                return self._sock.getsockname() if name == "sockname" else self._sock.getpeername()
        return None


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
    def __init__(self, transport: asyncio.Transport | _SocketTransport, protocol: _Protocol) -> None:
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
        kernel_ns, ns, data, read_ns = p.pieces.popleft()
        if len(data) > max_bytes:  # hand over the rest later, with the same arrival time
            p.pieces.appendleft((kernel_ns, ns, data[max_bytes:], read_ns))
            data = data[:max_bytes]
        p.buffered -= len(data)
        if p.buffered <= _HIGH_WATER // 2 and not p.eof:
            self._transport.resume_reading()
        if log is not None:
            log.record(kernel_ns, ns, len(data), read_ns)
        return data

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:  # h11's end of a sized body: nothing leaves, and the request's last byte already did
            return
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
        log = _READS.get()
        if log is not None:  # the write returned: the loop's stamp of its leaving, until the kernel's comes
            log.left(time.perf_counter_ns(), kernel=False)
            if isinstance(self._transport, _SocketTransport) and self._transport.stamping:
                self._transport.expect_sent(log)

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
            plain = self._transport
            if isinstance(plain, _SocketTransport):  # TLS reads the socket itself: asyncio's transport, the loop's stamps
                plain = (await loop.create_connection(lambda: self._protocol, sock=plain.detach()))[0]
            transport = await asyncio.wait_for(
                loop.start_tls(plain, self._protocol, ssl_context, server_hostname=server_hostname), timeout)
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


async def _connected_socket(loop: asyncio.AbstractEventLoop, host: str, port: int, local: str | None) -> socket.socket:
    """A non-blocking TCP socket connected to ``host:port``, each address of the name in turn (as
    ``loop.create_connection`` does, which would wrap the socket in a transport that hides the
    kernel's stamps)."""
    error: OSError | None = None
    for family, kind, proto, _, address in await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM):
        sock = socket.socket(family, kind, proto)
        try:
            sock.setblocking(False)
            if local:
                sock.bind((local, 0))
            await loop.sock_connect(sock, address)
        except OSError as exc:
            sock.close()
            error = exc
            continue
        except BaseException:
            sock.close()
            raise
        return sock
    raise error if error is not None else OSError(f"no address for {host}")


class _StampingBackend(httpcore.AsyncNetworkBackend):
    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                          local_address: str | None = None, socket_options: Any = None) -> httpcore.AsyncNetworkStream:
        if not 0 <= port <= 65535:  # httpx's URL parser lets it through; uvloop would wrap it round to another port
            raise httpcore.ConnectError("OverflowError: connect(): port must be 0-65535.")  # asyncio's own words
        loop = asyncio.get_running_loop()
        local = (local_address, 0) if local_address else None
        transport: asyncio.Transport | _SocketTransport
        try:
            if kernel_stamps.supported():
                sock = await asyncio.wait_for(_connected_socket(loop, host, port, local_address), timeout)
                protocol = _Protocol()
                stamping = kernel_stamps.enable(sock)
                transport = _SocketTransport(loop, sock, protocol, stamping)
            else:
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
