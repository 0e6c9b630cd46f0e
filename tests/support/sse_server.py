"""A vLLM-shaped SSE server on a precise, known schedule, for the stream probe's tests and bench.

Why raw sockets and not h11 or the lab engine: the tests need framings a correct HTTP library
refuses to produce on demand (chunked to an HTTP/1.0 client, as uvicorn does for vLLM; a
close-delimited body to an HTTP/1.1 one, as a relay hop does), and broken answers (a body cut
mid-event, invalid UTF-8, an error object inside a 200 stream).

The behaviour is chosen per request by a path prefix, so one server serves every case and a
real nginx in front passes the choice through untouched::

    http://127.0.0.1:PORT/o/ttft=0.05,itl=0.01,framing=close/v1/chat/completions

Options (all optional): ``ttft`` seconds from the request to the first token, ``itl`` seconds
between tokens, ``n`` tokens (default: the request's max_tokens, else 16), ``framing`` =
``chunked`` (one event per HTTP chunk, default) or ``close`` (no chunking, the body ends when
the connection closes), ``xaccel=no`` (send ``X-Accel-Buffering: no``), ``ping=1`` (a keep-alive
comment before the first token), ``noevent=1`` (Responses API without ``event:`` lines),
``stall=K:S`` (pause S seconds before token K), ``per=P`` (P tokens per chunk; with
``continuous_usage_stats`` each chunk carries the running usage, as vLLM's does), ``burst=B`` (B
token events per write and ``itl`` between writes, what a buffering proxy delivers; a ``stall``
then at a multiple of B), ``tail=S`` (S seconds between the last token and the usage trailer),
``hold=S`` (S seconds between the final event and the end of the body: the connection held
open), ``unended=1`` (close the connection after the final event without ending the body, no
last chunk, as some proxies do), ``oneshot=1`` (after the answer, keep-alive advertised, the
connection is closed unanswered when its next request arrives: llama.cpp's ``llama-server``
closes after every stream, and a client that reuses the connection before the close reaches it
sends its next request into it; here that race is lost every time), ``max_model_len=N`` (announced
by ``/v1/models``, as vLLM does), ``strict=1`` (HTTP 400 to vLLM's extensions, as a non-vLLM server does), and one failure:
``fail=`` ``status`` (HTTP 500 with a JSON error), ``json`` (a JSON body where a stream was asked
for), ``error`` (an error object after 2 tokens), ``cut`` (close after 2 tokens, mid-event),
``utf8`` (invalid UTF-8 after 2 tokens), ``usage`` (a usage trailer and no token), ``hang``
(headers, then silence); with ``every=K`` only every K-th streamed request of those options fails
(the others answer: a gateway cutting some streams).

Engine faces: ``GET /health`` answers 200 and ``GET /metrics`` one vLLM-shaped exposition of what
the server really did (``Counts``): prompt tokens (38 per request, as in the usage trailer, counted
when its first token is sent: vLLM counts a prompt once prefilled), generated tokens, finished
requests by reason (``length`` when an answer completes, ``abort`` when its client went away
mid-answer; a ``fail=`` answer is neither), the TTFT, queue-time and inter-token histograms (this
observing ``itl``, the step the server keeps), and the ``running`` / ``waiting`` gauges (streams
answering, streams waiting for a ``slots`` slot), followed by prometheus_client's default registry
(the server process's real ``python_gc_collections_total`` and ``process_*``). A test then knows
exactly what the engine saw against what the probe sent (``received``: the streamed requests read). With ``fail=hang`` the counters stand still
while requests are in flight: a wedged engine behind a green /health (vllm#39863). ``pause=P:S``
freezes every stream of the server at once for S seconds every P seconds (on the server's clock,
whatever the request), each freeze starting with a real full ``gc.collect()``: an engine-wide
pause (GC, sglang PR#9241) with no prompt arriving and no preemption.

Load (``llm-doctor load`` / ``sweep`` tests): ``slots=K`` admits at most K streams at once, the
rest wait first come first served (vLLM's ``max_num_seqs``: a queue that adds to TTFT), and
``depth=D`` makes every gap ``itl x (1 + D x (streams running - 1))`` (batch depth raising TPOT).
Streams running are counted over the whole server, whatever their options. ``head=S`` holds the
response headers S seconds (a front end slow to start answering: a long prompt, a busy server),
which a gateway's read timeout counts, unlike the wait for a token after them.

Structured output: a request that constrains decoding (``response_format`` other than text,
``tools``, ``guided_json``) is answered as an engine with a grammar backend would: ``compile=S``
adds S seconds to the first token of the first request per distinct schema (the compile, cached
after), ``masked=F`` multiplies every constrained request's gaps by F (the per-step mask), and
``held=K:N`` holds tokens K+1..K+N-1 of a constrained request back and sends them with token K+N
in one event (a tool-call parser waiting for a whole argument; one token per chunk only).

Every chunk's send time (``time.perf_counter_ns`` right after the socket write) is logged per
``x-request-id`` in ``ServerLog``, the ground truth of the probe benchmark.
"""

from __future__ import annotations

import asyncio
import gc
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import REGISTRY, generate_latest

from doctor.lab.loop_server import LoopServer

MODEL = "/srv/models/tiny-llama"
WORD = " useful"


@dataclass
class Sent:
    """Send times (perf_counter_ns) of one streamed request: its request read, every chunk."""

    t_request: int = 0
    t_admitted: int = 0  # when a ``slots`` slot took it (its queue ended); ``t_request`` without slots
    traceparent: str | None = None  # the W3C trace context it carried (tests/support/engine_spans.py)
    chunks: list[int] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)  # the chunks that carried a token
    # when each token's chunk was ready, just before its write: what an engine stamps as the token's
    # time (the spans of tests/support/engine_spans.py); ``tokens`` is after the write, the benchmark's truth
    produced: list[int] = field(default_factory=list)


@dataclass
class ServerLog:
    requests: dict[str, Sent] = field(default_factory=dict)


@dataclass
class Counts:
    """What the server did, exposed at /metrics as vLLM names it: the one exposition of this server."""

    prompt_tokens: int = 0
    generation_tokens: int = 0
    finished: dict[str, int] = field(default_factory=lambda: {"length": 0, "abort": 0})
    ttft: list[float] = field(default_factory=list)
    itl: list[float] = field(default_factory=list)  # the engine's steps, not the gaps the client sees

    def exposition(self, running: int, waiting: int) -> bytes:
        model = f'model_name="{MODEL}"'
        lines = [
            "# TYPE vllm:prompt_tokens_total counter", f"vllm:prompt_tokens_total{{{model}}} {self.prompt_tokens}.0",
            "# TYPE vllm:generation_tokens_total counter",
            f"vllm:generation_tokens_total{{{model}}} {self.generation_tokens}.0",
            "# TYPE vllm:request_success_total counter",
            *(f'vllm:request_success_total{{finished_reason="{r}",{model}}} {n}.0' for r, n in self.finished.items()),
            "# TYPE vllm:num_requests_running gauge", f"vllm:num_requests_running{{{model}}} {running}.0",
            "# TYPE vllm:num_requests_waiting gauge", f"vllm:num_requests_waiting{{{model}}} {waiting}.0",
            "# TYPE vllm:time_to_first_token_seconds histogram",
        ]
        for le in (0.1, 1.0, 10.0):
            below = sum(1 for v in self.ttft if v <= le)
            lines.append(f'vllm:time_to_first_token_seconds_bucket{{le="{le}",{model}}} {below}.0')
        lines += [f'vllm:time_to_first_token_seconds_bucket{{le="+Inf",{model}}} {len(self.ttft)}.0',
                  f"vllm:time_to_first_token_seconds_count{{{model}}} {len(self.ttft)}.0",
                  f"vllm:time_to_first_token_seconds_sum{{{model}}} {sum(self.ttft)!r}",
                  "# TYPE vllm:inter_token_latency_seconds histogram",
                  *(f'vllm:inter_token_latency_seconds_bucket{{le="{le}",{model}}} {sum(1 for v in self.itl if v <= le)}.0'
                    for le in (0.01, 0.025, 0.05, 0.1, 1.0)),
                  f'vllm:inter_token_latency_seconds_bucket{{le="+Inf",{model}}} {len(self.itl)}.0',
                  f"vllm:inter_token_latency_seconds_count{{{model}}} {len(self.itl)}.0",
                  f"vllm:inter_token_latency_seconds_sum{{{model}}} {sum(self.itl)!r}",
                  # the queue-time histogram observes no wait (a ``slots`` wait shows in the waiting gauge)
                  "# TYPE vllm:request_queue_time_seconds histogram",
                  f'vllm:request_queue_time_seconds_bucket{{le="+Inf",{model}}} {len(self.ttft)}.0',
                  f"vllm:request_queue_time_seconds_count{{{model}}} {len(self.ttft)}.0",
                  f"vllm:request_queue_time_seconds_sum{{{model}}} 0.0"]
        return "\n".join(lines).encode() + b"\n" + generate_latest(REGISTRY)


class Pauses:
    """Engine-wide freezes on the server's clock: ``hold`` moves a due time past the freeze it falls in.

    A freeze lasts its length from whichever is later, its start or the end of its ``gc.collect()``:
    the collection runs in the probe's own process and stops the client too (the GIL), so on a
    loaded machine, where it takes a good part of the length, a freeze counted from its start was
    seen by the client as much shorter than it was.
    """

    def __init__(self) -> None:
        self.epoch = time.perf_counter()
        self.ends: dict[int, float] = {}  # freeze -> when it ends, once its gc.collect() ran

    def hold(self, due: float, spec: str | None) -> float:
        if not spec:
            return due
        every, length = (float(x) for x in spec.split(":"))
        k = int((due - self.epoch) // every)
        start = self.epoch + k * every
        if k > 0 and start <= due < self.ends.get(k, start + length):
            if k not in self.ends:
                gc.collect()
                self.ends[k] = max(start, time.perf_counter()) + length
            return self.ends[k]
        return due


def parse_options(path: str) -> tuple[dict[str, str], str]:
    """``/o/a=1,b=2/v1/x`` -> ({"a": "1", "b": "2"}, "/v1/x")."""
    if path.startswith("/o/"):
        spec, _, rest = path[3:].partition("/")
        opts = dict(item.split("=", 1) for item in spec.split(",") if "=" in item)
        return opts, "/" + rest
    return {}, path


class SseServer(LoopServer):
    """Serves on 127.0.0.1 from a private event loop thread (``LoopServer``); ``url`` once started."""

    def __init__(self, port: int = 0) -> None:
        super().__init__(name="sse-server", port=port, backlog=2048)
        self.received = 0  # streamed requests read
        self.waiting = 0  # streams waiting for a ``slots`` slot
        self.log = ServerLog()
        self._slots: dict[int, asyncio.Semaphore] = {}
        self.running = 0  # streams admitted and not finished
        self.counts = Counts()
        self.pauses = Pauses()
        self.compiled: set[str] = set()  # the schemas already "compiled" (``compile=S``)
        self._failures_due: dict[str, int] = {}  # requests read per option set with ``every=K``

    def base(self, **opts: Any) -> str:
        """The base URL that selects ``opts`` (what the probe gets as --engine)."""
        if not opts:
            return self.url
        return self.url + "/o/" + ",".join(f"{k}={v}" for k, v in opts.items())

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        first = await reader.read(1)
        if first == b"\x16":  # a TLS ClientHello: answer as a plain HTTP server does, then close
            writer.write(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
            await writer.drain()
            return
        spent = False  # the last answer was a oneshot: this connection answers nothing more
        while first:
            head = first + await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, target, version = lines[0].split(" ", 2)
            headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
            body = await reader.readexactly(int(headers.get("content-length", "0") or 0))
            if spent:
                return
            spent = parse_options(target.split("?", 1)[0])[0].get("oneshot") == "1"
            t_request = time.perf_counter_ns()
            if not await self._respond(writer, method, target, version, headers, body, t_request):
                return
            first = await reader.read(1)

    async def _respond(self, writer: asyncio.StreamWriter, method: str, target: str, version: str,
                       headers: dict[str, str], body: bytes, t_request: int) -> bool:
        """Answer one request; True when the connection stays open for the next one."""
        opts, path = parse_options(target.split("?", 1)[0])
        keep = version == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
        if path == "/v1/models":
            announced = {"max_model_len": int(opts["max_model_len"])} if "max_model_len" in opts else {}
            await _send_json(writer, 200, {"object": "list", "data": [{"id": MODEL, "object": "model", **announced}]}, keep)
            return keep
        if path == "/health" and method == "GET":
            await _send_json(writer, 200, {}, keep)
            return keep
        if path == "/metrics" and method == "GET":
            body = self.counts.exposition(self.running, self.waiting)
            writer.write(f"HTTP/1.1 200 OK\r\nserver: uvicorn\r\ncontent-type: text/plain; version=0.0.4; charset=utf-8\r\n"
                         f"content-length: {len(body)}\r\nconnection: {'keep-alive' if keep else 'close'}\r\n\r\n".encode() + body)
            await writer.drain()
            return keep
        route = {"/v1/completions": "completions", "/v1/chat/completions": "chat", "/v1/responses": "responses"}.get(path)
        if method != "POST" or route is None:
            await _send_json(writer, 404, {"detail": "Not Found"}, keep)
            return keep
        request = json.loads(body or b"{}")
        if opts.get("fail") and int(opts.get("every", 1)) > 1:
            key = ",".join(f"{k}={v}" for k, v in sorted(opts.items()))
            self._failures_due[key] = seen = self._failures_due.get(key, 0) + 1
            if seen % int(opts["every"]):
                opts = {k: v for k, v in opts.items() if k != "fail"}
        fail = opts.get("fail")
        if fail == "status":
            await _send_json(writer, 500, {"error": {"message": "EngineCore encountered an issue", "type": "InternalServerError", "code": 500}}, keep)
            return keep
        if fail == "json":
            await _send_json(writer, 200, {"id": "cmpl-1", "object": "chat.completion", "choices": [{"message": {"content": "hi"}}]}, keep)
            return keep
        stream_options = request.get("stream_options") or {}
        if opts.get("strict") == "1" and ({"ignore_eos", "min_tokens"} & set(request) or "continuous_usage_stats" in stream_options):
            await _send_json(writer, 400, {"error": {"message": "Extra inputs are not permitted: ignore_eos", "type": "BadRequestError", "code": 400}}, keep)
            return keep
        sent = self.log.requests.setdefault(headers.get("x-request-id", f"#{len(self.log.requests)}"), Sent())
        sent.t_request = sent.t_admitted = t_request
        sent.traceparent = headers.get("traceparent")
        self.received += 1
        slots = int(opts.get("slots", 0))
        if slots:
            self.waiting += 1
            try:
                await (semaphore := self._slots.setdefault(slots, asyncio.Semaphore(slots))).acquire()
            finally:
                self.waiting -= 1
            sent.t_admitted = time.perf_counter_ns()
            try:
                return await self._stream_answer(writer, opts, route, request, stream_options, keep, sent,
                                                 sent.t_admitted)
            finally:
                semaphore.release()
        return await self._stream_answer(writer, opts, route, request, stream_options, keep, sent, t_request)

    async def _stream_answer(self, writer: asyncio.StreamWriter, opts: dict[str, str], route: str, request: dict[str, Any],
                             stream_options: dict[str, Any], keep: bool, sent: Sent, t_admitted: int) -> bool:
        """Stream one answer, its first token ``ttft`` after ``t_admitted``; counted in ``running`` meanwhile."""
        self.running += 1
        try:
            return await self._answer(writer, opts, route, request, stream_options, keep, sent, t_admitted)
        except ConnectionError:  # its client went away mid-answer
            if opts.get("fail") is None:
                self.counts.finished["abort"] += 1
            raise
        finally:
            self.running -= 1

    async def _answer(self, writer: asyncio.StreamWriter, opts: dict[str, str], route: str, request: dict[str, Any],
                      stream_options: dict[str, Any], keep: bool, sent: Sent, t_request: int) -> bool:
        fail = opts.get("fail")
        chunked = opts.get("framing", "chunked") == "chunked"
        stream = _Stream(writer, chunked, sent)
        extra = "X-Accel-Buffering: no\r\n" if opts.get("xaccel") == "no" else ""
        framing = "Transfer-Encoding: chunked\r\n" if chunked else ""
        connection = "keep-alive" if keep and chunked else "close"
        await asyncio.sleep(float(opts.get("head", 0)))
        writer.write((f"HTTP/1.1 200 OK\r\nserver: uvicorn\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
                      f"{framing}{extra}connection: {connection}\r\n\r\n").encode())
        await writer.drain()
        n = int(opts.get("n") or request.get("max_tokens") or request.get("max_output_tokens") or 16)
        depth = float(opts.get("depth", 0))
        ttft, itl = float(opts.get("ttft", 0.05)), float(opts.get("itl", 0.01))
        schema = _schema(request)
        if schema is not None:
            if schema not in self.compiled:
                self.compiled.add(schema)
                ttft += float(opts.get("compile", 0))
            itl *= float(opts.get("masked", 1))
        schedule = _Schedule(t_request, ttft, itl, opts.get("stall"), depth=lambda: 1 + depth * max(self.running - 1, 0),
                             hold=lambda due: self.pauses.hold(due, opts.get("pause")))
        events = _Events(route, n, noevent=opts.get("noevent") == "1", usage=bool(stream_options.get("include_usage")),
                         continuous=bool(stream_options.get("continuous_usage_stats")))
        if fail == "hang":
            await asyncio.sleep(3600)
        for _, payload in events.before():
            await stream.send(payload)
        if opts.get("ping") == "1":
            await stream.send(b": ping\n\n")
        per, burst = int(opts.get("per", 1)), int(opts.get("burst", 1))
        chunks = -(-n // per)
        held: list[bytes] = []
        hold_at, hold_n = (int(x) for x in opts["held"].split(":")) if "held" in opts and schema is not None else (-1, 0)
        for k in range(0 if fail == "usage" else chunks):
            if k % burst == 0:
                await schedule.wait(k)
            if fail in ("error", "cut", "utf8") and k == 2:
                await stream.fail(fail)
                return False
            if k == 0:
                self.counts.prompt_tokens += 38
                self.counts.ttft.append(time.perf_counter() - t_request / 1e9)
            else:
                self.counts.itl.append(float(opts.get("itl", 0.01)))
            self.counts.generation_tokens += min(per, n - k * per)
            if hold_at < k < hold_at + hold_n and k != chunks - 1:
                continue  # generated, held back by the "parser"
            count = hold_n if k == hold_at + hold_n else min(per, n - k * per)
            held.append(events.token(k, last=k == chunks - 1, done=min((k + 1) * per, n), count=count))
            if len(held) == burst or k == chunks - 1:
                await stream.send(*held, token=True)
                held = []
        await asyncio.sleep(float(opts.get("tail", 0)))
        for payload in events.after():
            await stream.send(payload)
        if fail is None:
            self.counts.finished["length"] += 1  # finished as the engine counts it: with its last event
        try:
            await asyncio.sleep(float(opts.get("hold", 0)))
            if opts.get("unended") == "1":
                return False  # the connection closes with the body unended: no last chunk
            await stream.end()
        except ConnectionError:
            return False  # the client left after the whole answer: finished, not aborted
        return keep and chunked


def _schema(request: dict[str, Any]) -> str | None:
    """The request's constraint as a key (a schema, tools, a guided grammar); None for free text."""
    fmt = request.get("response_format")
    constraint = {"response_format": fmt if isinstance(fmt, dict) and fmt.get("type") != "text" else None,
                  "tools": request.get("tools") or None, "guided_json": request.get("guided_json")}
    return json.dumps(constraint, sort_keys=True) if any(constraint.values()) else None


class _Schedule:
    """Token 0 is due ttft after the request, token k > 0 itl after token k - 1 was sent (plus
    any stall before it).

    Relative, not absolute: a server that woke late (the probe shares its process and its two
    cores) must not send the tokens it fell behind on back to back, a burst the probe would
    rightly report as several events per read.
    """

    def __init__(self, t_request: int, ttft: float, itl: float, stall: str | None,
                 depth: Callable[[], float] = lambda: 1.0, hold: Callable[[float], float] = lambda due: due) -> None:
        self.last = t_request / 1e9
        self.ttft, self.itl, self.depth, self.hold = ttft, itl, depth, hold
        self.stall_at, self.stall_s = (int(stall.split(":")[0]), float(stall.split(":")[1])) if stall else (-1, 0.0)

    async def wait(self, k: int) -> None:
        due = self.hold(self.last + (self.ttft if k == 0 else self.itl * self.depth()) + (self.stall_s if k == self.stall_at else 0.0))
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        self.last = time.perf_counter()  # the send follows at once


class _Stream:
    def __init__(self, writer: asyncio.StreamWriter, chunked: bool, sent: Sent) -> None:
        self.writer, self.chunked, self.sent = writer, chunked, sent

    async def send(self, *payloads: bytes, token: bool = False) -> None:
        """Send events in one write (several: a burst, as from a buffering proxy)."""
        ready = time.perf_counter_ns()
        self.writer.write(b"".join(b"%x\r\n%s\r\n" % (len(p), p) if self.chunked else p for p in payloads))
        now = time.perf_counter_ns()
        self.sent.chunks.extend([now] * len(payloads))
        if token:
            self.sent.tokens.extend([now] * len(payloads))
            self.sent.produced.extend([ready] * len(payloads))
        await self.writer.drain()

    async def fail(self, how: str) -> None:
        if how == "error":
            await self.send(b'data: {"error": {"object": "error", "message": "The decoder prompt is too long", '
                            b'"type": "BadRequestError", "param": null, "code": 400}}\n\n')
            await self.send(b"data: [DONE]\n\n")
            await self.end()
        elif how == "utf8":
            await self.send(b'data: {"choices": [{"index": 0, "text": "\xff\xfe"}]}\n\n')
            await self.end()
        else:  # cut: half an event, then the connection closes without the chunked terminator
            self.writer.write(b"40\r\ndata: {\"id\": \"chatcmpl-cut\", \"choices\": [{\"ind" if self.chunked else b'data: {"id": "x", "ch')
            await self.writer.drain()
        self.writer.close()

    async def end(self) -> None:
        if self.chunked:
            self.writer.write(b"0\r\n\r\n")
            await self.writer.drain()


class _Events:
    """vLLM 0.32's event payloads for each route (ids and sizes as in the real samples)."""

    def __init__(self, route: str, n: int, *, noevent: bool, usage: bool, continuous: bool) -> None:
        self.route, self.n, self.noevent, self.usage, self.continuous = route, n, noevent, usage, continuous
        self.created = int(time.time())

    def _data(self, obj: dict[str, Any], event: str | None = None) -> bytes:
        line = b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"
        if event and not self.noevent:
            return b"event: " + event.encode() + b"\n" + line
        return line

    def _usage(self, done: int) -> dict[str, Any]:
        """vLLM's continuous_usage_stats: every chunk carries the running counts."""
        return {"usage": {"prompt_tokens": 38, "total_tokens": 38 + done, "completion_tokens": done}} if self.continuous else {}

    def _chat(self, delta: dict[str, Any], finish: str | None = None, done: int = 0) -> bytes:
        return self._data({"id": "chatcmpl-a7d59b286a868fe6", "object": "chat.completion.chunk", "created": self.created,
                           "model": MODEL, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                                        "finish_reason": finish, "token_ids": None}], **self._usage(done)})

    def before(self) -> list[tuple[str, bytes]]:
        if self.route == "chat":
            return [("role", self._chat({"role": "assistant", "content": ""}))]
        if self.route == "responses":
            resp = {"id": "resp_96f806f269981212", "created_at": self.created, "model": MODEL, "object": "response",
                    "output": [], "status": "in_progress", "usage": None}
            item = {"id": "msg_b4113c5de1d962d3", "content": [], "role": "assistant", "status": "in_progress", "type": "message"}
            return [
                ("pre", self._data({"response": resp, "sequence_number": 0, "type": "response.created"}, "response.created")),
                ("pre", self._data({"response": resp, "sequence_number": 1, "type": "response.in_progress"}, "response.in_progress")),
                ("pre", self._data({"item": item, "output_index": 0, "sequence_number": 2, "type": "response.output_item.added"},
                                   "response.output_item.added")),
                ("pre", self._data({"content_index": 0, "item_id": item["id"], "output_index": 0,
                                    "part": {"annotations": [], "text": "", "type": "output_text"}, "sequence_number": 3,
                                    "type": "response.content_part.added"}, "response.content_part.added")),
            ]
        return []

    def token(self, k: int, last: bool, done: int, count: int) -> bytes:
        """Chunk k, carrying ``count`` tokens, ``done`` tokens generated so far."""
        finish = "length" if last else None
        text = WORD * count
        if self.route == "chat":
            return self._chat({"content": text}, finish, done)
        if self.route == "completions":
            return self._data({"id": "cmpl-a566e84baa5f547e", "object": "text_completion", "created": self.created,
                               "model": MODEL, "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish,
                                                            "stop_reason": None, "prompt_token_ids": None, "token_ids": None}],
                               **self._usage(done)})
        return self._data({"content_index": 0, "delta": text, "item_id": "msg_b4113c5de1d962d3", "logprobs": [],
                           "output_index": 0, "sequence_number": 4 + k, "type": "response.output_text.delta"},
                          "response.output_text.delta")

    def after(self) -> list[bytes]:
        usage = {"prompt_tokens": 38, "total_tokens": 38 + self.n, "completion_tokens": self.n}
        if self.route == "responses":
            text = WORD * self.n
            seq = 4 + self.n
            return [
                self._data({"content_index": 0, "item_id": "msg_b4113c5de1d962d3", "output_index": 0, "sequence_number": seq,
                            "text": text, "type": "response.output_text.done"}, "response.output_text.done"),
                self._data({"response": {"id": "resp_96f806f269981212", "status": "completed", "usage": {
                    "input_tokens": 38, "output_tokens": self.n, "total_tokens": 38 + self.n}},
                    "sequence_number": seq + 1, "type": "response.completed"}, "response.completed"),
            ]
        out = []
        if self.usage:
            obj_type = "chat.completion.chunk" if self.route == "chat" else "text_completion"
            out.append(self._data({"id": "x", "object": obj_type, "created": self.created, "model": MODEL,
                                   "choices": [], "usage": usage}))
        return [*out, b"data: [DONE]\n\n"]


async def _send_json(writer: asyncio.StreamWriter, status: int, obj: dict[str, Any], keep: bool) -> None:
    body = json.dumps(obj).encode()
    reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 500: "Internal Server Error"}[status]
    writer.write(f"HTTP/1.1 {status} {reason}\r\nserver: uvicorn\r\ncontent-type: application/json\r\n"
                 f"content-length: {len(body)}\r\nconnection: {'keep-alive' if keep else 'close'}\r\n\r\n".encode() + body)
    await writer.drain()
