"""Benchmark: the stream reader on pathological input, at two sizes, failing on super-linear growth.

Not a test (timings are for a person to read, on an idle machine): it feeds the reader, in 64 KiB
reads as a socket delivers them, (1) one line without a newline (a server that never ends a
line; the SSE buffer used to be re-copied on every read: 64 MiB took 19 s of CPU), (2) a flood of
tiny OpenAI SSE events, (3) raw text chunks, each at SIZE and 4 x SIZE, and exits 1 when the
larger input costs more than ``--max-growth`` (default 6) times the smaller one's CPU time
(linear is 4).

    .venv/bin/python bench/stream_reader.py              # 16 MiB and 64 MiB
    .venv/bin/python bench/stream_reader.py --size 4     # 4 MiB and 16 MiB

Results: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from doctor.probes.framing import StreamDecoder
from doctor.probes.sse import SseParser

READ = 65536


def no_newline(total: int) -> None:
    parser = SseParser(max_line_bytes=total + 1)  # no cap: time the buffer itself
    block = b"x" * READ
    for _ in range(total // READ):
        parser.feed(block, 0.0)


def flood(total: int) -> None:
    event = b'data: {"choices":[{"delta":{"content":"x"}}]}\n\n'
    block = event * (READ // len(event))
    decoder = StreamDecoder("text/event-stream")
    for k in range(total // len(block)):
        decoder.feed(block, float(k))


def raw(total: int) -> None:
    decoder = StreamDecoder("text/event-stream")
    block = b" useful" * (READ // 7)
    for k in range(total // len(block)):
        decoder.feed(block, float(k))


CASES: dict[str, Callable[[int], None]] = {"line without newline": no_newline, "SSE event flood": flood, "raw text": raw}


def cpu(fn: Callable[[int], None], total: int) -> float:
    start = time.process_time()
    fn(total)
    return time.process_time() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=16, help="the smaller input in MiB (the larger is 4x)")
    parser.add_argument("--max-growth", type=float, default=6.0, help="largest CPU ratio for 4x the input")
    args = parser.parse_args()
    small = args.size << 20
    failed = False
    for name, fn in CASES.items():
        a, b = cpu(fn, small), cpu(fn, 4 * small)
        growth = b / a if a > 0 else float("inf")
        ok = growth <= args.max_growth
        failed |= not ok
        print(f"{name:22} {args.size:4d} MiB {a:7.3f} s   {4 * args.size:4d} MiB {b:7.3f} s   x{growth:4.1f} "
              f"({4 * small / b / 2**20:6.0f} MiB/s) {'ok' if ok else 'SUPER-LINEAR'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
