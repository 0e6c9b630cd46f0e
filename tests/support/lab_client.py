"""A minimal timing client for the lab tests.

It stamps each socket read and each token-bearing SSE event on one monotonic clock, like the
probe does, so the tests can compare orders and ratios between paths and requests. It is kept
apart from the probe on purpose: the lab is what the probe is tested against.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
import zlib
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import httpx

ROUTE_PATHS = {"completions": "/v1/completions", "chat": "/v1/chat/completions", "responses": "/v1/responses"}


@dataclass
class Trace:
    t_sent: float
    t_headers: float | None = None
    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    reads: list[tuple[float, int, int]] = field(default_factory=list)  # (t, bytes, events completed)
    tokens: list[float] = field(default_factory=list)  # time of each token-bearing event
    events: list[dict[str, Any]] = field(default_factory=list)
    t_end: float | None = None

    @property
    def ttft(self) -> float:
        return self.tokens[0] - self.t_sent

    @property
    def gaps(self) -> list[float]:
        return [b - a for a, b in pairwise(self.tokens)]

    @property
    def max_gap(self) -> float:
        return max(self.gaps, default=0.0)

    @property
    def median_gap(self) -> float:
        return statistics.median(self.gaps) if self.gaps else 0.0

    @property
    def tpot(self) -> float:
        return (self.tokens[-1] - self.tokens[0]) / max(len(self.tokens) - 1, 1)

    @property
    def events_per_read(self) -> float:
        reads = [r for r in self.reads if r[2]]
        return sum(r[2] for r in reads) / max(len(reads), 1)


def has_token(event: dict[str, Any]) -> bool:
    if event.get("type") == "response.output_text.delta":
        return bool(event.get("delta"))
    return any(choice.get("text") or (choice.get("delta") or {}).get("content") for choice in event.get("choices") or [])


async def stream_once(client: httpx.AsyncClient, url: str, body: dict[str, Any], t0: float) -> Trace:
    trace = Trace(t_sent=time.perf_counter() - t0)
    buf = b""
    inflate = None
    async with client.stream("POST", url, json=body, headers={"accept-encoding": "gzip"}) as response:
        trace.t_headers = time.perf_counter() - t0
        trace.status = response.status_code
        trace.headers = dict(response.headers)
        if response.headers.get("content-encoding") == "gzip":
            inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
        async for raw in response.aiter_raw():
            now = time.perf_counter() - t0
            buf += inflate.decompress(raw) if inflate else raw
            completed = 0
            while b"\n\n" in buf:
                block, buf = buf.split(b"\n\n", 1)
                data = [line[6:] for line in block.split(b"\n") if line.startswith(b"data: ")]
                completed += 1
                if not data or data[0] == b"[DONE]":
                    continue
                event = json.loads(data[0])
                trace.events.append(event)
                if has_token(event):
                    trace.tokens.append(now)
            trace.reads.append((now, len(raw), completed))
    trace.t_end = time.perf_counter() - t0
    return trace


async def _run(url: str, bodies: list[dict[str, Any]], concurrency: int, t0: float | None) -> list[Trace]:
    t0 = time.perf_counter() if t0 is None else t0
    slots = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency + 4)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:

        async def one(body: dict[str, Any]) -> Trace:
            async with slots:
                return await stream_once(client, url, body, t0)

        return await asyncio.gather(*(one(b) for b in bodies))


def run_streams(
    base_url: str, bodies: list[dict[str, Any]], concurrency: int, route: str = "chat", t0: float | None = None
) -> list[Trace]:
    """Closed loop: ``concurrency`` streams at a time, in order, from a fresh event loop.

    Times are seconds since ``t0`` (a ``time.perf_counter()`` value; default: the call)."""
    return asyncio.run(_run(base_url + ROUTE_PATHS[route], bodies, concurrency, t0))


def chat_body(prompt_words: int = 16, max_tokens: int = 16, **extra: Any) -> dict[str, Any]:
    text = " ".join(["word"] * prompt_words)
    return {"messages": [{"role": "user", "content": text}], "max_tokens": max_tokens, "stream": True, **extra}
