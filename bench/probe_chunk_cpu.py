"""Benchmark: the stream probe's CPU per token chunk, in one process, without the network.

Why: at 64 streams and more the probe's stamps wait behind its own work per chunk (issue 25), and
the fidelity bench (``bench/probe_fidelity.py``) measures that work only through a noisy total. This
runs the probe's real reading stack (``Requester.measure``, httpx, httpcore, h11, the stamping
transport, the SSE decoder) on the bench server's exact chat stream (vLLM's continuous usage, one
event per HTTP chunk), handed over by a fake network backend, and reports CPU per token chunk
(``time.process_time``, best of 5 rounds of 60 requests, the collector off):

- default: every piece queued before the first read, so no read waits: the Python stack alone;
- ``--wake``: one piece per loop iteration (a ``call_soon`` feeder), so every read waits and is
  woken as a socket read is: the stack plus the loop's wake-up and the read timeout;
- ``--without decode|classify|json``: that part replaced by a constant (the streams then count as
  cut), to see what it costs.

    .venv/bin/python bench/probe_chunk_cpu.py [--tokens 1000] [--wake] [--uvloop]

Results: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import ssl
import sys
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpcore

from doctor.collection.collector import CollectConfig
from doctor.evidence import ProbePath, RequestTrace
from doctor.foundation.clock import Clock
from doctor.probes import framing, sse, transport
from doctor.probes.schedule import Job
from doctor.probes.selfcheck import SelfCheck
from doctor.probes.stream.request import Requester
from tests.support.sse_server import _Events

HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\ntransfer-encoding: chunked\r\n\r\n"


def pieces(tokens: int) -> list[bytes]:
    """The socket reads of one answer: the head, one HTTP chunk per event, the last chunk."""
    events = _Events("chat", tokens, noevent=False, usage=True, continuous=True)
    body = [b for _, b in events.before()] + [events.token(k, k == tokens - 1, k + 1, 1) for k in range(tokens)] + events.after()
    return [HEAD] + [b"%x\r\n%s\r\n" % (len(p), p) for p in body] + [b"0\r\n\r\n"]


class _Transport:
    """What the stamping stream asks of an asyncio transport, doing nothing."""

    def write(self, data: bytes) -> None: ...
    def is_closing(self) -> bool: return False
    def close(self) -> None: ...
    def resume_reading(self) -> None: ...
    def pause_reading(self) -> None: ...
    def get_extra_info(self, name: str) -> Any: return None


def backend(reads: list[bytes], wake: bool) -> type[httpcore.AsyncNetworkBackend]:
    class Backend(httpcore.AsyncNetworkBackend):
        async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                              local_address: str | None = None, socket_options: Any = None) -> httpcore.AsyncNetworkStream:
            protocol = transport._Protocol()
            if not wake:
                for data in reads:
                    protocol.data_received(data)
                return transport._Stream(_Transport(), protocol)  # type: ignore[arg-type]
            loop, left = asyncio.get_running_loop(), iter(reads)

            def feed() -> None:  # a piece each time the reader waits, as a socket read wakes it
                if protocol.waiter is not None:
                    data = next(left, None)
                    if data is None:
                        return
                    protocol.data_received(data)
                loop.call_soon(feed)

            loop.call_soon(feed)
            return transport._Stream(_Transport(), protocol)  # type: ignore[arg-type]

        async def sleep(self, seconds: float) -> None:
            await asyncio.sleep(seconds)

    return Backend


def without(part: str) -> None:
    """Replace one part of the decoding by a constant."""
    if part == "decode":
        framing.StreamDecoder.feed = lambda self, data, t: []  # type: ignore[method-assign]
    elif part == "classify":
        chunk = sse.Chunk("token", text="x")
        framing.classify = lambda event: chunk  # type: ignore[assignment]
    elif part == "json":
        obj = sse.loads(pieces(1)[2].split(b"\r\n")[1][6:].decode())
        sse.loads = lambda text: obj  # type: ignore[assignment]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=1000, help="Token chunks per answer.")
    parser.add_argument("--wake", action="store_true", help="Wake the reader once per piece.")
    parser.add_argument("--uvloop", action="store_true", help="Run on uvloop (installed).")
    parser.add_argument("--without", choices=["decode", "classify", "json"])
    args = parser.parse_args()
    transport._StampingBackend = backend(pieces(args.tokens), args.wake)  # type: ignore[misc]  # make_client's pool builds it
    if args.without:
        without(args.without)
    config = CollectConfig(engine="http://127.0.0.1:9/", route="chat", model="bench", requests=1, warmup=0, concurrency=1,
                           max_tokens=args.tokens, stall_timeout_s=30, deadline_s=600, only_path=ProbePath.DIRECT)
    clock = Clock()

    async def requests(n: int) -> None:
        requester = Requester(config, clock, ssl.create_default_context(), SelfCheck(clock), [])
        for k in range(n):
            client = requester.client()
            trace = RequestTrace(index=k, path=ProbePath.DIRECT, t_scheduled=clock.now())
            await requester.measure(client, Job(k, ProbePath.DIRECT, False), trace)
            assert args.without or (trace.ok and len(trace.tokens) == args.tokens), (trace.outcome, trace.error)
            await client.aclose()

    run: Callable[[Coroutine[Any, Any, None]], None] = asyncio.run
    if args.uvloop:
        import uvloop
        run = uvloop.run
    gc.disable()  # as the probe keeps it inside a measured window
    run(requests(20))
    best = float("inf")
    for _ in range(5):
        start = time.process_time()
        run(requests(60))
        best = min(best, (time.process_time() - start) / (60 * args.tokens))
    print(f"{best * 1e6:.2f} µs of CPU per token chunk ({args.tokens} per answer, "
          f"{'woken per piece' if args.wake else 'pieces queued'}, {'uvloop' if args.uvloop else 'asyncio'}"
          f"{', without ' + args.without if args.without else ''})")


if __name__ == "__main__":
    main()
