"""HTTP shared by the probes: settings (credentials, TLS, headers, deadlines), the one client, bounded GETs.

The endpoints, /metrics and Prometheus probes all GET small documents under a deadline and
classify their failures the same way, so their client, the bounded read and the failure kinds
live here once. (The stream probe's client is ``transport.make_client``: it stamps every
socket read, which none of these need.)
"""

from __future__ import annotations

import re
import socket
import ssl
import threading
import time
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from doctor.probes.transport import ssl_context

#: The largest answer ``bounded_get`` keeps by default: a vLLM exposition is ~50 KB per engine,
#: a Prometheus range query a few MB; anything past this is not one worth keeping.
MAX_BODY_BYTES = 32 * 1024 * 1024

#: A header whose name holds one of these words carries a credential (``X-Custom-Auth``, ``X-Api-Key``...).
_CREDENTIAL_NAME = re.compile(r"(?i)auth|key|token|secret|cookie|session|signature|password|credential")


def credential_header(name: str) -> bool:
    """Whether a request header's name says its value is a credential (redacted wherever it appears)."""
    return bool(_CREDENTIAL_NAME.search(name))


@dataclass
class HttpOptions:
    """How to talk to the targets. The API key is held here only; the bundle never stores it."""

    api_key: str | None = None
    headers: dict[str, str] = field(default_factory=dict)  # --header values (redacted in output)
    verify: bool | str = True  # False for --insecure, a path for --ca-cert
    timeout_s: float = 10.0  # per-call deadline for the non-stream probes

    def request_headers(self) -> dict[str, str]:
        out = dict(self.headers)
        if self.api_key:
            out.setdefault("Authorization", f"Bearer {self.api_key}")
        return out

    def secrets(self) -> list[str]:
        """Literal values the redactor must remove wherever they appear.

        Only values of ``--header`` names that look like credentials: scrubbing every header
        value would turn a harmless ``Accept: text/event-stream`` into ``[REDACTED]`` all
        through the bundle, hiding the very content types the checks reason about.
        """
        values = [v for k, v in self.headers.items() if credential_header(k)]
        if self.api_key:
            values.append(self.api_key)
        return values


def join_url(base: str, path: str) -> str:
    """``http://h:8000`` or ``http://h:8000/v1`` + ``/v1/models`` -> ``http://h:8000/v1/models``.

    A trailing ``/v1`` is the OpenAI API prefix, not the server root: vLLM serves ``/version``,
    ``/health`` and ``/metrics`` beside it, so ``http://h:8000/v1`` + ``/health`` is ``http://h:8000/health``.
    """
    parts = urlsplit(base)
    root = parts.path.rstrip("/")
    if root.endswith("/v1"):
        root = root[: -len("/v1")]
    return urlunsplit((parts.scheme, parts.netloc, root + path, "", ""))


class DeadlineExceeded(Exception):
    """The whole request (connect, headers, body) took longer than its deadline."""


class Unanswered(DeadlineExceeded):
    """The request was sent on an accepted connection and no response head came before the deadline:
    a server that accepts connections and answers nothing (hung), told apart from one that could not
    be reached (a connect or TLS timeout) or that dripped its answer."""


class BodyTooLarge(Exception):
    """The answer is larger than the caller's bound: not the document the probe asked for."""


def http_client(headers: Mapping[str, str] | None, verify: bool | str, timeout_s: float) -> httpx.Client:
    """The client of the endpoints, /metrics and Prometheus probes; ``OSError`` / ``ssl.SSLError`` for a bad CA path.

    Redirects are followed: several vLLM versions mount /metrics so that it answers 307 -> /metrics/.
    ``trust_env=False``, as for the stream probe: a probe reaches the URL it was given, not a proxy
    from the environment (whose ``Server`` / ``Via`` headers would describe the proxy, not the target).
    No kept-alive connections: each GET opens its own (well under 1 ms locally), so no exchange
    starts on what another left; ``_Watchdog`` still counts and bounds a reused one per request.
    """
    return httpx.Client(
        headers=dict(headers or {}), verify=ssl_context(verify), timeout=timeout_s,
        follow_redirects=True, trust_env=False, limits=httpx.Limits(max_keepalive_connections=0),
    )


#: The ``_Watchdog`` of the exchange this thread is running, while it runs: a connection's reads are
#: counted (and its socket shut at the deadline) for the exchange that reads it, whichever opened it.
_exchange = threading.local()


class _Watchdog:
    """Shuts the sockets of one exchange down at its deadline, wherever the exchange is blocked.

    httpx bounds each connect and each read, not the exchange: response headers dripped one
    byte per second keep every read under its timeout and ``client.stream`` never returns, so a
    check inside the body loop comes too late. httpcore's ``trace`` extension reports every
    connection the exchange opens (redirects included); at the deadline a timer thread shuts
    them down, which wakes the blocked read with an error that ``bounded_get`` reports as the
    deadline. Hand-written because httpx has no whole-request timeout (encode/httpx#1450).

    ``received`` counts the bytes read during this exchange only: each connection's reads are
    counted for the exchange running in the reading thread (``_exchange``), not for the one that
    opened it, so a kept-alive connection reused by a later request counts that request's bytes
    from zero, and its socket is shut at that request's deadline too.
    """

    def __init__(self, deadline_s: float) -> None:
        self.expired = False
        self.sent = False  # the request went out on a connection (TCP and TLS done)
        self.received = 0  # bytes read back during this exchange
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(deadline_s, self._expire)
        self._timer.daemon = True

    def trace(self, event: str, info: dict[str, Any]) -> None:
        if event == "http11.send_request_headers.complete":
            self.sent = True
        elif event in ("connection.connect_tcp.complete", "connection.start_tls.complete"):
            _count(info["return_value"])
        if event in ("connection.connect_tcp.complete", "connection.connect_unix_socket.complete"):
            self.adopt(info["return_value"].get_extra_info("socket"))

    def adopt(self, sock: socket.socket | None) -> None:
        """Shut ``sock`` at this exchange's deadline (at once, when it already passed)."""
        with self._lock:
            if sock is None or sock in self._sockets:
                return
            self._sockets.append(sock)
            if self.expired:  # connected just after the deadline: shut at once
                self._shut(sock)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._sockets:
                self._shut(sock)

    @staticmethod
    def _shut(sock: socket.socket | None) -> None:
        if sock is not None:
            with suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def __enter__(self) -> _Watchdog:
        _exchange.watchdog = self
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()
        _exchange.watchdog = None


def _count(stream: Any) -> None:
    """Count the bytes read on ``stream`` (httpcore's network stream, plain or TLS) for the exchange
    reading it: a trace says when a head completes, never whether any byte of it came, which tells a
    server that answers nothing (``Unanswered``) from one that drips its head."""
    read = stream.read

    def counted(max_bytes: int, timeout: float | None = None) -> bytes:
        watchdog: _Watchdog | None = getattr(_exchange, "watchdog", None)
        if watchdog is not None:
            watchdog.adopt(stream.get_extra_info("socket"))  # a reused connection: this exchange's deadline
        data: bytes = read(max_bytes, timeout)
        if watchdog is not None:
            watchdog.received += len(data)
        return data

    stream.read = counted


def bounded_get(
    client: httpx.Client,
    url: str,
    *,
    deadline_s: float,
    params: Mapping[str, str] | None = None,
    max_bytes: int = MAX_BODY_BYTES,
) -> tuple[httpx.Response, str]:
    """GET ``url`` -> (response, decoded body), with a deadline on the *whole* exchange, not only on each read.

    httpx's timeouts bound every connect and every read, so a server that drips one byte per
    second would never time out: the body is read in chunks against a monotonic deadline, and
    ``_Watchdog`` shuts the connection at the deadline while the headers are still coming.
    Raises ``DeadlineExceeded`` (``Unanswered`` when the request went out and no response head came),
    ``BodyTooLarge`` or an ``httpx.HTTPError``.
    """
    return bounded_request(client, "GET", url, deadline_s=deadline_s, params=params, max_bytes=max_bytes)


def bounded_request(
    client: httpx.Client,
    method: str,
    url: str,
    *,
    deadline_s: float,
    params: Mapping[str, str] | None = None,
    json_body: Any = None,
    max_bytes: int = MAX_BODY_BYTES,
) -> tuple[httpx.Response, str]:
    """``bounded_get`` for any method, with an optional JSON body: the eval gate's whole (unstreamed) answers."""
    end = time.monotonic() + deadline_s
    late = DeadlineExceeded(f"no complete answer within {deadline_s:g} s")
    with _Watchdog(deadline_s) as watchdog:
        try:
            with client.stream(method, url, params=params, json=json_body, extensions={"trace": watchdog.trace}) as response:
                chunks: list[bytes] = []
                size = 0
                for chunk in response.iter_bytes():
                    size += len(chunk)
                    if size > max_bytes:
                        raise BodyTooLarge(f"body larger than {max_bytes // (1024 * 1024)} MiB")
                    chunks.append(chunk)
                    if time.monotonic() > end:
                        raise late
        except httpx.HTTPError as exc:
            silent = watchdog.sent and not watchdog.received
            if silent and (watchdog.expired or isinstance(exc, httpx.ReadTimeout)):
                raise Unanswered(f"the request was sent and not a byte of answer came within {deadline_s:g} s") from None
            if watchdog.expired:
                raise late from None
            raise
    text = b"".join(chunks).decode(response.charset_encoding or "utf-8", errors="replace")
    return response, text


def without_credentials(url: str) -> str:
    """``http://user:pass@host/metrics`` -> ``http://host/metrics``: what evidence and messages keep."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def error_kind(exc: BaseException) -> str:
    """The stable ``EvidenceError.kind`` for a transport failure, from the exception's cause chain."""
    if isinstance(exc, (httpx.TimeoutException, DeadlineExceeded)):
        return "timeout"
    if isinstance(exc, BodyTooLarge):
        return "malformed"
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, socket.gaierror):
            return "dns"
        if isinstance(cause, ssl.SSLError):
            return "tls"
        cause = cause.__cause__ or cause.__context__
    return "connect"
