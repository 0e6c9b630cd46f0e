"""One stream request: its body, its send, and the reading of its events into a ``RequestTrace``.

``Requester`` holds what every request of one process shares (the URLs and headers, the model,
whether vLLM's extensions are dropped, the events and reads kept against the caps, the direct
path's latest answer that bounds a gateway request) and nothing of the run around it: the
probe's own process and each client worker (``doctor.probes.stream.shards``) send through one.
Each request is timed from its scheduled send through connection, response head, first body
byte, first event, every token-bearing event (stamped at the read that carried its first byte,
see ``doctor.probes.sse``) to the stream's final event; every socket read is kept with its size
and the events it completed (``doctor.probes.transport``). Whatever goes wrong becomes the
trace's outcome (``doctor.probes.stream.failures``), never an exception, except cancellation.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import ssl
from collections.abc import AsyncIterator, Coroutine
from typing import Any

import anyio
import httpx

from doctor.evidence import ProbePath, RequestTrace, TokenEvent
from doctor.evidence.stream import CANCELLED
from doctor.foundation.clock import Clock
from doctor.probes import payload as payloads
from doctor.probes.deadlines import HeadBound, gateway_head_bound, silent_head_bound
from doctor.probes.framing import StreamDecoder
from doctor.probes.http import join_url
from doctor.probes.plan import CollectConfig
from doctor.probes.schedule import Job
from doctor.probes.selfcheck import SelfCheck
from doctor.probes.sse import Chunk
from doctor.probes.stream.failures import BoundPassed, check_scheme, failure
from doctor.probes.transport import ReadLog, make_client

#: How long the probe reads on after a stream's final event ([DONE], ``response.completed``)
#: for the end of the HTTP body, which lets the connection serve the next request. The end
#: normally follows at once; a server that holds the connection open longer gets it closed.
END_GRACE_S = 0.25

EXCERPT_BYTES = 2048
EXCERPT_CHARS = 500
TEXT_EXCERPT_CHARS = 200

#: Per request, the events and socket reads the reader keeps before it stops (``truncated``): a
#: real answer has at most a few thousand of each, and a flood of tiny events (a million a
#: second) must not be kept until the run runs out of memory.
MAX_EVENTS = 100_000
MAX_READS = 100_000
#: Over the whole probe, the events and reads kept (every request's together) before it stops
#: reading and sending: a flood on many concurrent requests, each under its own caps, must end
#: bounded too (about 100 bytes each, in memory and in the bundle).
MAX_PROBE_EVENTS = 1_000_000


def request_id(clock: Clock, path: ProbePath, index: int | str) -> str:
    """The ``x-request-id`` of a probe request: unique per run, so server logs can be joined."""
    return f"llm-doctor-{clock.t0_ns:x}-{path}-{index}"


def traceparent(trace: RequestTrace) -> str:
    """A new W3C ``traceparent`` for ``trace`` (version 00, sampled), its ids recorded on the trace.

    One trace per request and a span id for the client's request: vLLM makes its ``llm_request``
    span a child of it, as does any gateway that traces, so the join finds every hop of this request
    by its trace id. The header is one fixed format (W3C Trace Context, level 1), written here rather
    than through the OpenTelemetry SDK, which the probe would otherwise not need.
    """
    trace.trace_id, trace.span_id = secrets.token_hex(16), secrets.token_hex(8)
    return f"00-{trace.trace_id}-{trace.span_id}-01"


class Requester:
    """Sends the requests of one process and reads their answers; what they share lives here."""

    def __init__(self, config: CollectConfig, clock: Clock, context: ssl.SSLContext, check: SelfCheck,
                 traces: list[RequestTrace], shares: int = 1) -> None:
        self.config = config
        self.clock = clock
        self.context = context
        self.check = check  # a read timeout asks it whether the client itself froze
        self.traces = traces  # the run's requests so far: a gateway request's bound reads its direct path's
        route = config.gateway_route
        #: path -> the URL its requests go to (for a templated gateway route: the template, as the user wrote it)
        self.urls = {path: join_url(base, payloads.ROUTES[config.route]) if path != ProbePath.GATEWAY or route is None
                     else route.url(base, "{prompt}", config.max_tokens).replace("%7Bprompt%7D", "{prompt}")
                     for path, base in config.probed().items()}
        self.headers = {**config.http.request_headers(), "accept": "text/event-stream"}
        self.model = config.model
        self.drop_extensions = False  # the server rejected vLLM's extensions (``learn``)
        self.kept = 0  # events and reads kept over every request (``MAX_PROBE_EVENTS``)
        self.cap = MAX_PROBE_EVENTS  # over the whole probe
        self.event_cap = MAX_PROBE_EVENTS // shares  # of this process: a worker's share of it when sharded
        #: set, then replaced, each time a direct request answers: a gateway request waiting for its
        #: head re-reads the bound its direct path sets (``_within_head_bound``)
        self.direct_news = asyncio.Event()
        #: in a client worker: the bound the parent computed over every worker's direct answers
        #: (``told``), which this process alone does not see; None there until told
        self.parent_bound: HeadBound | None = None
        self.bound_from_parent = False
        #: path -> the scheme its port really speaks when the URL's was wrong, once asked (``failures.check_scheme``)
        self.schemes: dict[ProbePath, str | None] = {}

    def client(self) -> httpx.AsyncClient:
        """A client of one connection, for one slot (a pool scans all its connections per request)."""
        return make_client(self.context, self.config.http.timeout_s, self.config.stall_timeout_s)

    def learn(self, trace: RequestTrace) -> None:
        """What a finished request changes for later ones, in the process that schedules them."""
        if (trace.outcome == "http-status" and trace.status == 400 and self.config.payload is None
                and not self.drop_extensions and payloads.mentions_extension(trace.body_excerpt or "")):
            self.drop_extensions = True  # the server rejects vLLM's extensions: later requests go without
        if trace.path == ProbePath.DIRECT and trace.ok:
            self.direct_news.set()
            self.direct_news = asyncio.Event()

    def told(self, bound: HeadBound | None) -> None:
        """In a client worker: the parent's bound over every worker's direct answers so far; a gateway
        request waiting for its head re-reads it at once, as it does a direct answer in one process."""
        self.bound_from_parent, self.parent_bound = True, bound
        self.direct_news.set()
        self.direct_news = asyncio.Event()

    def head_bound(self, path: ProbePath) -> HeadBound | None:
        """The bound a request's head (and a gateway's first token) is held to now: a gateway's from its
        direct path (``gateway_head_bound``), a hung target's from the endpoints probe
        (``silent_head_bound``), the shorter of the two when both apply."""
        bounds: list[HeadBound] = []
        if path in self.config.silent:
            bounds.append(silent_head_bound(self.config.silent[path], path))
        if path == ProbePath.GATEWAY and ProbePath.DIRECT in self.urls:
            direct = self.parent_bound if self.bound_from_parent else gateway_head_bound(self.traces, self.config.budgets.ttft_s)
            bounds += [direct] if direct is not None else []
        return min(bounds, key=lambda b: b.seconds, default=None)

    # -- the body --------------------------------------------------------------------------

    def body(self, job: Job) -> dict[str, Any]:
        """The JSON body of ``job``: the application's ``--payload`` (or its unconstrained twin), else ours."""
        config = self.config
        if config.payload is not None:
            body = payloads.user_body(config.payload, config.route, self.model)
            return payloads.unconstrained(body) if job.control else body
        prompt_tokens, max_tokens = config.request_lengths().for_index(job.index)
        body = payloads.default_body(config.route, self.model, prompt_tokens, max_tokens, self._nonce(job))
        return payloads.without_extensions(body) if self.drop_extensions else body

    def _request(self, job: Job) -> tuple[str, str, bytes | None, str | None]:
        """(method, URL, body, content type) of one request: the engine's route, or the application's on the gateway."""
        config, route = self.config, self.config.gateway_route
        if job.path != ProbePath.GATEWAY or route is None:
            return "POST", self.urls[job.path], json.dumps(self.body(job)).encode(), "application/json"
        # the same prompt and length the direct path's request of this index carries
        prompt_tokens, max_tokens = config.request_lengths().for_index(job.index)
        prompt = payloads.prompt_text(prompt_tokens, self._nonce(job))
        base = config.targets()[job.path]
        content, content_type = route.content(prompt, max_tokens)
        return route.method, route.url(base, prompt, max_tokens), content, content_type

    def _nonce(self, job: Job) -> int:
        """A per-request number at the head of each prompt: no prefix cache serves one path's prompt to the other."""
        return job.index * len(self.urls) + list(self.urls).index(job.path)

    # -- the send --------------------------------------------------------------------------

    async def measure(self, client: httpx.AsyncClient, job: Job, trace: RequestTrace) -> None:
        """Send ``job`` and read its answer into ``trace``; every failure becomes its outcome."""
        log = ReadLog(self.clock)
        log.bind()  # this task's reads only: the task runs in its own copy of the context
        released = asyncio.Event()  # the direct path's bound no longer applies (``_within_head_bound``)
        try:
            if job.path in self.config.silent or (job.path == ProbePath.GATEWAY and ProbePath.DIRECT in self.urls):
                await self._within_head_bound(self._stream(client, job, trace, log, released), trace, released)
            else:
                await self._stream(client, job, trace, log, released)
        except (asyncio.CancelledError, KeyboardInterrupt):
            # the deadline (``Run._at_deadline`` relabels it) or Ctrl-C: what came so far is kept below
            trace.outcome = CANCELLED
            trace.error = "still streaming when the probe was stopped"
            raise
        except Exception as exc:  # noqa: BLE001 - every failure is a recorded outcome, never a crash
            trace.outcome, trace.error = failure(exc, trace, log, self.config, self.check)
            await check_scheme(self.config, self.schemes, job.path, trace)
        finally:
            if not trace.ok and trace.t_failed is None:
                trace.t_failed = self.clock.now()  # e.g. when a cut connection closed: no read records that
            trace.reads = log.reads
            trace.stamp_clock = log.stamp_clock()
            trace.t_request_left, trace.send_clock = log.t_left, log.left_clock
            self.check.note_gaps(log.gaps, log.read_gaps)
            if trace.tokens:  # also for a failed stream: what came before the failure is evidence
                trace.t_first_token, trace.t_last_token = trace.tokens[0].t, trace.tokens[-1].t
            if trace.t_end is None:
                trace.t_end = self.clock.now()
    async def _stream(self, client: httpx.AsyncClient, job: Job, trace: RequestTrace, log: ReadLog,
                      released: asyncio.Event) -> None:
        """Send ``job`` and read its answer; ``released`` is set at the first token, or at an answer
        that is no stream (an error status, a JSON body: its own outcome, however slow its body)."""
        clock = self.clock

        async def on_trace(name: str, info: dict[str, Any]) -> None:
            if name in ("connection.connect_tcp.complete", "connection.start_tls.complete"):
                trace.t_connected, trace.connection_reused = clock.now(), False
            elif name == "http11.send_request_headers.started" and trace.connection_reused is None:
                trace.t_connected, trace.connection_reused = clock.now(), True
            elif name == "http11.send_request_body.complete":
                trace.t_request_written = clock.now()
            elif name == "http11.receive_response_headers.complete":
                t = log.mark_headers()
                trace.t_headers = t if t is not None else clock.now()

        headers = {**self.headers, "x-request-id": request_id(self.clock, job.path, f"control{job.index}" if job.control else job.index)}
        method, url, content, content_type = self._request(job)
        if content_type:
            headers["content-type"] = content_type
        if self.config.trace_context:
            headers["traceparent"] = traceparent(trace)
        trace.t_sent = clock.now()
        log.phase(trace.t_sent + self.config.stall_timeout_s)  # the response head's (doctor.probes.deadlines)

        async def opening() -> httpx.Response:
            request = client.build_request(method, url, content=content, headers=headers, extensions={"trace": on_trace})
            try:
                return await client.send(request, stream=True)
            except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError):
                if not trace.connection_reused or trace.t_headers is not None:
                    raise
            # The kept-alive connection was closed as this request went into it, before any answer:
            # llama.cpp's llama-server closes after every stream without saying so, and its close can
            # reach us just after the next request left. Sent once more on a new connection, as HTTP
            # clients do (RFC 9112, 9.3.1); the lost attempt stays in this request's time from t_sent.
            trace.connection_reused = trace.t_connected = trace.t_request_written = None
            request = client.build_request(method, url, content=content, headers=headers, extensions={"trace": on_trace})
            return await client.send(request, stream=True)

        response = await opening()
        if job.path in self.config.silent:
            released.set()  # a hung target that answers a head after all: its first token is the engine's, however slow
        log.phase((trace.t_headers or clock.now()) + self.config.stall_timeout_s)  # the first token's
        try:
            trace.status = response.status_code
            trace.http_version = response.http_version
            trace.headers = dict(response.headers)
            content_type = response.headers.get("content-type", "")
            if response.status_code >= 400:
                released.set()
                trace.outcome, trace.error = "http-status", f"HTTP {response.status_code} {response.reason_phrase}".strip()
                trace.body_excerpt = await _excerpt(response, trace, log)
            elif response.status_code != 200 or (_json_document(content_type) and self.config.framing != "ndjson"):
                released.set()
                trace.outcome = "not-a-stream"
                trace.error = f"asked for a stream, got HTTP {response.status_code} {content_type or 'without a content type'}"
                trace.body_excerpt = await _excerpt(response, trace, log)
            else:
                await self._read_events(response, trace, log, released)
        finally:
            await response.aclose()
            if trace.t_end is None:  # a stream's final event sets it: what came after is not the answer
                trace.t_end = log.last_t if log.last_t is not None else clock.now()

    async def _read_events(self, response: httpx.Response, trace: RequestTrace, log: ReadLog,
                           released: asyncio.Event) -> None:
        decoder = StreamDecoder(response.headers.get("content-type", ""), self.config.framing, self.config.text_field)
        ended = False
        counted = 0  # completion tokens already attributed (continuous usage stats)
        events = 0
        text: list[str] = []
        # aiter_raw skips httpx's decoder chain when there is nothing to decode (most streams)
        body = response.aiter_bytes() if response.headers.get("content-encoding") else response.aiter_raw()

        def take(items: list[tuple[float, Chunk]]) -> bool:
            """Record one read's items; True at the stream's final event or its first error."""
            nonlocal counted, ended
            # a read without per-token framing is credited with the tokens it is estimated to
            # carry, so events per read still shows a buffering edge's bursts
            log.add_events(sum(c.tokens if c.kind == "token" else 1 for _, c in items) if decoder.estimated else len(items))
            for t, chunk in items:
                if trace.t_first_event is None:
                    trace.t_first_event = t
                if chunk.kind == "error":
                    trace.outcome, trace.error = "stream-error", f"error inside the stream: {chunk.error}"
                    return True
                if chunk.prompt_tokens is not None:
                    trace.prompt_tokens = chunk.prompt_tokens
                if chunk.finish_reason:
                    trace.finish_reason = chunk.finish_reason
                tokens = chunk.tokens
                if chunk.completion_tokens is not None:
                    trace.completion_tokens = chunk.completion_tokens
                    if chunk.kind == "token" and chunk.completion_tokens > counted:
                        tokens, counted = chunk.completion_tokens - counted, chunk.completion_tokens
                if chunk.kind == "token":
                    released.set()
                    log.phase(t + self.config.stall_timeout_s)  # the next token's
                    trace.tokens.append(TokenEvent(t, tokens, len(chunk.text)))
                    if len(text) < TEXT_EXCERPT_CHARS:  # one character or more per token
                        text.append(chunk.text)
                elif chunk.kind == "end":
                    ended = True
                    trace.t_end = log.last_t  # the read that completed the final event
                    return True
            return False

        try:
            async for data in body:
                if trace.t_first_byte is None:
                    trace.t_first_byte = log.first_body_t()
                items = decoder.feed(data, log.last_t if log.last_t is not None else self.clock.now())
                events += len(items)
                self.kept += len(items) + 1
                if items and take(items):
                    break
                if events > MAX_EVENTS or len(log.reads) > MAX_READS:
                    trace.truncated = (f"stopped reading after {events} events in {len(log.reads)} reads "
                                       f"(caps: {MAX_EVENTS} events, {MAX_READS} reads per request)")
                    break
                if self.kept > self.event_cap:
                    trace.truncated = (f"stopped reading after {events} events in {len(log.reads)} reads: the probe "
                                       f"kept {self.cap:,} events and reads over all requests (its cap)")
                    break
            else:  # the body ended cleanly: the end of a framing without a terminator
                if not ended and trace.outcome == "ok":
                    take(decoder.close())
        finally:
            trace.framing = decoder.framing if decoder.framing != "sse" else "sse-text"
            trace.tokens_estimated = decoder.estimated
            if text:
                trace.text_excerpt = "".join(text)[:TEXT_EXCERPT_CHARS]
        if ended and trace.outcome == "ok":
            await _finish_body(body)
        if trace.outcome != "ok":
            return
        if trace.truncated is None and decoder.needs_terminator and (decoder.pending or not ended):
            trace.outcome = "cut"
            trace.error = "the stream ended before its last event ([DONE] or response.completed)"
        elif not trace.tokens:
            trace.outcome = "no-token"
            usage = " (usage only)" if trace.completion_tokens is not None else ""
            trace.error = f"the stream carried no token{usage}"

    async def _within_head_bound(self, work: Coroutine[Any, Any, None], trace: RequestTrace,
                                 released: asyncio.Event) -> None:
        """Run ``work``, a gateway request or one to a hung target, unless neither its response head nor
        (after a head) its first token comes within its ``head_bound``, from the send
        (``doctor.probes.deadlines``): then ``BoundPassed``. Unbounded once
        ``released`` (the first token, or an answer that is no stream). The bound is read again whenever
        a direct request answers, since the gateway's first request is sent beside the direct path's first.

        ``work`` runs in this very task and a watcher beside it cancels the task when the bound passes:
        a task of its own would start only after the direct request scheduled behind it had been sent,
        and the pair would lose its counterbalanced order (A B, B A)."""
        sent = self.clock.now()
        current = asyncio.current_task()
        assert current is not None  # a coroutine of the probe's event loop
        passed: list[HeadBound] = []

        async def watch() -> None:
            while not released.is_set():
                news = self.direct_news
                bound = self.head_bound(trace.path)
                start = trace.t_sent if trace.t_sent is not None else sent
                left = None if bound is None else start + bound.seconds - self.clock.now()
                if bound is not None and left is not None and left <= 0:
                    passed.append(bound)
                    current.cancel()
                    return
                waiters = {asyncio.ensure_future(news.wait()), asyncio.ensure_future(released.wait())}
                try:
                    await asyncio.wait(waiters, timeout=left, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    for waiter in waiters:
                        waiter.cancel()

        watcher = asyncio.ensure_future(watch())
        try:
            await work
        except asyncio.CancelledError:
            # the watcher's own cancellation becomes the bound; any other (the deadline, Ctrl-C) goes on
            uncancel = getattr(current, "uncancel", None)  # Python 3.11+: counts the task's cancel requests
            if passed and (uncancel is None or uncancel() == 0):
                raise BoundPassed(passed[0]) from None
            raise
        finally:
            watcher.cancel()


def _json_document(content_type: str) -> bool:
    """A JSON content type that is one document (``application/json``), not a stream of them (NDJSON)."""
    ctype = content_type.lower()
    return "json" in ctype and not any(s in ctype for s in ("ndjson", "jsonl", "json-seq", "stream"))


async def _finish_body(body: AsyncIterator[bytes]) -> None:
    """Read the rest of a body after its final event, for at most ``END_GRACE_S``.

    The stream is over at its final event, so a server that holds the connection open after it
    must not hold the probe's slot (closed loop: the next request would wait for it). Reading
    the end of the body when it follows at once keeps the connection for the next request;
    past the grace, ``_stream`` closes the unfinished response and httpcore the connection.
    """
    with anyio.move_on_after(END_GRACE_S):
        try:
            async for _ in body:
                pass
        except httpx.ReadTimeout:
            pass  # a stall timeout shorter than the grace: the same held-open connection
        except (httpx.RemoteProtocolError, httpx.ReadError):
            pass  # closed or reset after the final event, without the last chunk: the answer is complete


async def _excerpt(response: httpx.Response, trace: RequestTrace, log: ReadLog) -> str:
    """The first bytes of an error body (the collector redacts the bundle before it is stored)."""
    body = b""
    async for data in response.aiter_bytes():
        if trace.t_first_byte is None:
            trace.t_first_byte = log.first_body_t()
        body += data
        if len(body) >= EXCERPT_BYTES:
            break
    return body[:EXCERPT_BYTES].decode("utf-8", errors="replace")[:EXCERPT_CHARS]
