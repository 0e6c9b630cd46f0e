"""The lab engine: vLLM's OpenAI-compatible HTTP API in front of the scheduler model.

One asyncio loop (in its own thread, see ``doctor.lab.http``) holds the HTTP connections and
the engine's step loop, as vLLM's API server and engine core do: the step loop sleeps each
step's modelled cost in real time, then hands each sequence's new tokens to its stream, which
writes every SSE event as its own HTTP chunk. Response headers go out at once (FastAPI's
``StreamingResponse`` does the same), chat's role-only chunk when the first prefill chunk is
done, tokens as they are sampled, grouped by ``stream_interval``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import os
import time
from typing import Any

from doctor.lab.http import HttpService, Request, Responder, ThreadedServer
from doctor.lab.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from doctor.lab.metrics import EngineMetrics
from doctor.lab.protocol import FORMATTERS, VLLM_VERSION, Formatter, ResponsesFormatter, StreamOptions, error_body
from doctor.lab.scheduler import FINISHED, EngineConfig, Output, Scheduler, Sequence
from doctor.lab.startup_log import EngineLog
from doctor.lab.text import chat_prompt, responses_prompt, tokenize

SERVER_NAME = "llm-doctor-lab-engine"
SSE_CONTENT_TYPE = "text/event-stream; charset=utf-8"
JSON = "application/json"
DEFAULT_MAX_TOKENS = {"/v1/completions": 16, "/v1/chat/completions": 256, "/v1/responses": 256}


@dataclasses.dataclass
class BackgroundLoad:
    """Requests the lab itself sends while probe streams decode: other users' long prompts.

    An arrival is sent only while a client stream is past its first token, so the prefill it
    causes lands inside running streams (prefill interference), as in the real trial where
    6000-token prompts arrived on 4 decoding streams; the next one comes ``interval_s`` after
    the previous one finished, so the load never outgrows the engine.
    """

    prompt_tokens: int = 6000
    max_tokens: int = 1
    interval_s: float = 1.0


class _BadRequest(Exception):
    def __init__(self, status: int, message: str, kind: str = "BadRequestError") -> None:
        super().__init__(message)
        self.status, self.message, self.kind = status, message, kind


class LabEngine(HttpService):
    """Start with ``start()``; ``url`` and ``port`` are set once it listens; ``stop()`` joins it."""

    def __init__(self, config: EngineConfig, log_path: str | os.PathLike[str] | None = None, port: int = 0) -> None:
        self.config = config
        self.scheduler = Scheduler(config)
        self.metrics = EngineMetrics(config)
        self.log = EngineLog(log_path) if log_path is not None else None
        self.server = ThreadedServer(self._handle, server_name=SERVER_NAME, port=port)
        self._streams: dict[Sequence, asyncio.Queue[Output]] = {}
        self._ids = itertools.count()
        self._wake: asyncio.Event | None = None

    def start(self, background: BackgroundLoad | None = None) -> None:
        self.server.start()
        if self.log is not None:
            self.log.startup(self.config, "127.0.0.1", self.port)
        self.server.run_soon(self._step_loop())
        if self.log is not None:
            self.server.run_soon(self._stats_loop())
        if background is not None:
            self.server.run_soon(self._background(background))

    def stop(self) -> None:
        self.server.stop()
        if self.log is not None:
            self.log.close()

    # -- engine side -------------------------------------------------------------------------

    def _submit(self, seq: Sequence) -> asyncio.Queue[Output]:
        """Queue ``seq`` for a client: its outputs arrive on the returned queue."""
        queue: asyncio.Queue[Output] = asyncio.Queue()
        self._streams[seq] = queue
        self._enqueue(seq)
        return queue

    def _enqueue(self, seq: Sequence) -> None:
        self.scheduler.add(seq)
        if self._wake is not None:
            self._wake.set()

    def _new_sequence(self, prompt_ids: list[int], max_tokens: int, request_id: str) -> Sequence:
        loop = asyncio.get_running_loop()
        return Sequence(request_id, prompt_ids, max_tokens, arrival=loop.time(), seed=next(self._ids))

    async def _step_loop(self) -> None:
        loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        sched = self.scheduler
        while True:
            if not sched.has_work:
                self._wake.clear()
                await self._wake.wait()
            start = loop.time()
            batch = sched.schedule(start)
            if not batch.scheduled:  # nothing fits until something changes
                self._wake.clear()
                await self._wake.wait()
                continue
            await asyncio.sleep(max(0.0, start + sched.step_seconds(batch) - loop.time()))
            now = loop.time()
            for out in sched.complete(batch, now):
                self._deliver(out, now)
            self.metrics.observe_step(
                batch.num_tokens, len(sched.running), len(sched.waiting), sched.pool.usage(), sched.counters
            )

    def _deliver(self, out: Output, now: float) -> None:
        seq = out.seq
        if out.new_text:
            if out.previous_token_t is None:
                self.metrics.observe_first_token(seq)
            else:
                self.metrics.observe_gap(now - out.previous_token_t)
        if out.finished:
            self.metrics.observe_finished(seq)
        queue = self._streams.get(seq)
        if queue is not None:
            queue.put_nowait(out)

    async def _stats_loop(self) -> None:
        """vLLM's periodic stats line: throughputs and hit rate over the last interval."""
        assert self.log is not None
        interval = self.config.stats_interval_s
        sched = self.scheduler
        last = dataclasses.replace(sched.counters)
        while True:
            await asyncio.sleep(interval)
            now = dataclasses.replace(sched.counters)
            queries = now.prefix_queries - last.prefix_queries
            self.log.stats(
                prompt_tps=(now.prompt_tokens - last.prompt_tokens) / interval,
                generation_tps=(now.generation_tokens - last.generation_tokens) / interval,
                running=len(sched.running),
                waiting=len(sched.waiting),
                kv_usage=sched.pool.usage(),
                prefix_hit_rate=(now.prefix_hits - last.prefix_hits) / queries if queries else 0.0,
            )
            last = now

    async def _background(self, load: BackgroundLoad) -> None:
        """Long-prompt arrivals straight into the scheduler, one at a time, ``interval_s`` apart."""
        for n in itertools.count():
            while not any(seq.first_token_t is not None for seq in self._streams):
                await asyncio.sleep(0.005)
            # A distinct first token per arrival so prefix caching cannot hide the prefill.
            prompt = [-(n + 1)] + [7] * (load.prompt_tokens - 1)
            seq = self._new_sequence(prompt, load.max_tokens, f"cmpl-background-{n}")
            self._enqueue(seq)
            while seq.status != FINISHED:
                await asyncio.sleep(0.005)
            await asyncio.sleep(load.interval_s)

    # -- HTTP side ---------------------------------------------------------------------------

    async def _handle(self, request: Request, responder: Responder) -> None:
        path = request.path
        if request.method == "POST" and path in FORMATTERS:
            await self._generate(request, responder)
        elif request.method in ("GET", "HEAD") and path in ("/health", "/ping"):
            await responder.send_full(200, b"", JSON)
        elif request.method == "GET" and path == "/version":
            await responder.send_full(200, json.dumps({"version": VLLM_VERSION}).encode(), JSON)
        elif request.method == "GET" and path == "/v1/models":
            await responder.send_full(200, json.dumps(self._models()).encode(), JSON)
        elif request.method == "GET" and path == "/metrics":
            await responder.send_full(200, self.metrics.exposition(), METRICS_CONTENT_TYPE)
        else:
            await responder.send_full(404, b'{"detail":"Not Found"}', JSON)

    def _models(self) -> dict[str, Any]:
        cfg = self.config
        card = {
            "id": cfg.model,
            "object": "model",
            "created": int(time.time()),
            "owned_by": "vllm",
            "root": cfg.model,
            "parent": None,
            "max_model_len": cfg.max_model_len,
        }
        return {"object": "list", "data": [card]}

    def _parse(self, request: Request) -> tuple[dict[str, Any], list[int], int]:
        """The body, prompt token ids and max_tokens of a generation request."""
        try:
            body = json.loads(request.body or b"{}")
        except ValueError as exc:
            raise _BadRequest(400, f"invalid JSON body: {exc}") from None
        if not isinstance(body, dict):
            raise _BadRequest(400, "the body must be a JSON object")
        model = body.get("model", self.config.model)
        if model != self.config.model:
            raise _BadRequest(404, f"The model `{model}` does not exist.", "NotFoundError")
        path = request.path
        if path == "/v1/completions":
            prompt = body.get("prompt", "")
            text = " ".join(map(str, prompt)) if isinstance(prompt, list) else str(prompt)
        elif path == "/v1/chat/completions":
            text = chat_prompt(body.get("messages"))
        else:
            text = responses_prompt(body)
        prompt_ids = tokenize(text) or [0]
        max_tokens = body.get("max_tokens") or body.get("max_completion_tokens") or body.get("max_output_tokens")
        if max_tokens is None:
            max_tokens = min(DEFAULT_MAX_TOKENS[path], self.config.max_model_len - len(prompt_ids))
        if not isinstance(max_tokens, int) or max_tokens < 1:
            raise _BadRequest(400, "max_tokens must be a positive integer")
        if len(prompt_ids) + max_tokens > self.config.max_model_len:
            raise _BadRequest(
                400,
                (
                    f"This model's maximum context length is {self.config.max_model_len} tokens. However, you "
                    f"requested {len(prompt_ids) + max_tokens} tokens ({len(prompt_ids)} in the messages, "
                    f"{max_tokens} in the completion). Please reduce the length of the messages or completion."
                ),
            )
        return body, prompt_ids, max_tokens

    async def _generate(self, request: Request, responder: Responder) -> None:
        try:
            body, prompt_ids, max_tokens = self._parse(request)
        except _BadRequest as exc:
            await responder.send_full(exc.status, error_body(exc.message, exc.status, exc.kind), JSON)
            return
        fmt = FORMATTERS[request.path](
            model=self.config.model, prompt_tokens=len(prompt_ids), options=StreamOptions.from_body(body)
        )
        if isinstance(fmt, ResponsesFormatter):
            fmt.max_output_tokens = max_tokens
        seq = self._new_sequence(prompt_ids, max_tokens, fmt.id)
        queue = self._submit(seq)
        try:
            if body.get("stream"):
                await self._stream(fmt, queue, responder)
            else:
                while not (await queue.get()).finished:
                    pass
                fmt.add("".join(seq.output), len(seq.output))
                await responder.send_full(200, json.dumps(fmt.full(seq.finish_reason or "length")).encode(), JSON)
        finally:
            self._streams.pop(seq, None)
            if seq.status != FINISHED:  # the client went away
                self.scheduler.abort(seq)
                self.metrics.observe_finished(seq)

    async def _stream(self, fmt: Formatter, queue: asyncio.Queue[Output], responder: Responder) -> None:
        await responder.start(200, [("content-type", SSE_CONTENT_TYPE)])
        for event in fmt.preamble():
            await responder.send(event)
        interval = self.config.stream_interval
        pending: list[str] = []
        sent_tokens = False
        while True:
            out = await queue.get()
            events = fmt.started() if out.first_chunk_done else []
            pending += out.new_text
            if pending and (not sent_tokens or out.finished or len(pending) >= interval):
                events += fmt.delta("".join(pending), out.seq.finish_reason if out.finished else None, len(pending))
                pending, sent_tokens = [], True
            for event in events:
                await responder.send(event)  # one SSE event per HTTP chunk, as uvicorn sends them
            if out.finished:
                break
        for event in fmt.closing(out.seq.finish_reason or "length"):
            await responder.send(event)
        await responder.end()
