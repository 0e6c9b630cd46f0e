"""Benchmark: the untrusted-input paths on pathological inputs, at two sizes; fails on super-linear growth.

Each case once took time quadratic in its input (issue 13): a headerless log of blank lines or
of one long line of digits, capitals or block elements, ``Error: `` repeated on one line, the
URL-credentials redaction rule on ``a.a.a...``, an HTML page with many unclosed ``<script>``
tags; and (issue 22, found by fuzzing) a vLLM stats line ending in a run of letters, the
redactor on ``authorization: `` and many masks, a TGI ``Args {`` line of one long word, a
repeated llama.cpp ``build info |``, a gateway response of many headers, a scrape line of
escaped quotes (prometheus_client's label parser, bounded per line before it); and (issue 30,
found by fuzzing) a vLLM stats line of a long run of digits, a box-bordered line of blanks. Each is timed at ``--size`` and at ``--factor`` times that (best of ``--repeat`` runs,
after one warm-up); a case whose time grows more than ``--limit`` times as fast as its input
fails, and the script exits 1.

    .venv/bin/python bench/pathological.py                  # 256 KiB and 1 MiB inputs
    .venv/bin/python bench/pathological.py --size 1M --only log-blank-lines

Not a test: timings are for a person to read, on a quiet machine. Results: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from doctor.bundle import EMBED_ID, BundleError, load_path  # noqa: E402
from doctor.derive.gateway import identify  # noqa: E402
from doctor.engine_metrics.metric_names import ExpositionError, parse_exposition  # noqa: E402
from doctor.engine_readers.logs import parse_engine_log  # noqa: E402
from doctor.engine_readers.vllm import parse_lines  # noqa: E402
from doctor.foundation.redact import Redactor  # noqa: E402
from doctor.probes.logfile import read_log  # noqa: E402

HEADER = b"INFO 01-01 00:00:00 [api_server.py:1] "
STATS_HEADER = "INFO 01-01 00:00:00 [loggers.py:1] "
STATS = (STATS_HEADER + "Avg prompt throughput: 1.0 tokens/s, "
         "Avg generation throughput: 2.0 tokens/s, Running: 3 reqs, ")
BUILD_INFO = "INFO [            main] build info |"


def _log(data: bytes) -> Callable[[], object]:
    """Read and parse ``data`` as a log file, the way ``--log`` does."""
    def run() -> object:
        with tempfile.NamedTemporaryFile(suffix=".log", delete=False) as f:
            f.write(data)
        try:
            evidence, _ = read_log(f.name)
            return parse_lines(evidence.matched, f.name) if evidence else None
        finally:
            os.unlink(f.name)
    return run


def _engine_log(data: bytes) -> Callable[[], object]:
    """Read ``data`` as a log file and parse it with the parser of the engine it names."""
    def run() -> object:
        with tempfile.NamedTemporaryFile(suffix=".log", delete=False) as f:
            f.write(data)
        try:
            evidence, _ = read_log(f.name)
            return parse_engine_log(evidence.matched, f.name) if evidence else None
        finally:
            os.unlink(f.name)
    return run


def _headers(n: int) -> Callable[[], object]:
    """The gateway view of two responses of ``n // 16`` headers each (about 16 bytes a header)."""
    headers = {f"x-envoy-{i}": "1" for i in range(n // 16)} | {"server": "nginx"}
    return lambda: identify([headers, headers])


def _scrape(text: str) -> Callable[[], object]:
    def run() -> object:
        try:
            return parse_exposition(text)
        except ExpositionError as exc:
            return exc
    return run


def _redact(text: str) -> Callable[[], object]:
    return lambda: Redactor(["not-in-the-text"]).text(text)


def _page(text: str) -> Callable[[], object]:
    def run() -> object:
        with tempfile.NamedTemporaryFile("w", suffix=".html", delete=False) as f:
            f.write(text)
        try:
            return load_path(f.name)
        except BundleError as exc:
            return exc
        finally:
            os.unlink(f.name)
    return run


def _repeat(unit: str, n: int) -> str:
    return (unit * (n // len(unit) + 1))[:n]


#: name -> (what it is, builder of the case for an input of about n bytes)
CASES: dict[str, tuple[str, Callable[[int], Callable[[], object]]]] = {
    "log-blank-lines": ("headerless log of blank lines", lambda n: _log(b"\n" * n)),
    "log-one-long-line": ("headerless log: one line of letters", lambda n: _log(b"a" * n)),
    "log-digits-line": ("headerless log: one line of digits", lambda n: _log(b"7" * n)),
    "log-capitals-line": ("headerless log: one line of capitals and spaces", lambda n: _log(_repeat("AB ", n).encode())),
    "log-spaces-lines": ("headerless log: lines of 1,000 spaces", lambda n: _log(_repeat(" " * 999 + "\n", n).encode())),
    "log-block-chars": ("banner line: a run of block elements", lambda n: _log(HEADER + _repeat("█", n // 3).encode() + b"\n")),
    "log-block-chars-wrapped": ("headerless lines of block elements", lambda n: _log(_repeat("█" * 300 + "\n", n // 3).encode())),
    "log-error-hits": ("'Error: ' repeated on one line", lambda n: _log(_repeat("Error: ", n).encode())),
    "log-error-lines": ("'Error: ' repeated, lines of 60 KiB", lambda n: _log(_repeat(_repeat("Error: ", 60_000) + "\n", n).encode())),
    "log-wrapper-dict": ("a wrapper's engine-argument dict of many items",
                         lambda n: _log(("x with following model config: {" + _repeat("'a': 1, ", n) + "}\n").encode())),
    "log-pasted-openings": ("headerless lines of same-width pasted messages",
                            lambda n: _log(_repeat("GPU blocks: 1, # CPU blocks: 2 " + "x" * 60 + "\n", n).encode())),
    "redact-dots": ("redaction of a.a.a...", lambda n: _redact(_repeat("a.", n))),
    "redact-schemes": ("redaction of a://a://...", lambda n: _redact(_repeat("a://", n))),
    "redact-query": ("redaction of &token=&token=...", lambda n: _redact(_repeat("&token", n))),
    "redact-headers": ("redaction of authorization: x y z...", lambda n: _redact("authorization: " + _repeat("x ", n))),
    "vllm-stats-letters": ("vLLM stats lines ending in 60 KiB of letters",
                           lambda n: _log(_repeat(STATS + "a" * 60_000 + "\n", n).encode())),
    "redact-masks": ("redaction of authorization: [REDACTED]a[REDACTED]a...",
                     lambda n: _redact("authorization: " + _repeat("[REDACTED]a", n))),
    "tgi-args-word": ("TGI Args { lines of one 60 KiB word",
                      lambda n: _engine_log(_repeat("INFO text_generation_launcher: Args { " + "a" * 60_000 + "\n", n).encode())),
    "llamacpp-build-info": ("llama.cpp: lines of 'build info |' repeated",
                            lambda n: _engine_log(_repeat(BUILD_INFO * 1800 + "\n", n).encode())),
    "gateway-headers": ("gateway view of responses with many x-envoy-* headers", _headers),
    "scrape-quotes": ("scrape lines of 60 KiB of escaped quotes",
                      lambda n: _scrape(_repeat('vllm:num_requests_running{a="' + '\\"' * 30_000 + '"} 1\n', n))),
    "scrape-long-line": ("a scrape of one line of escaped quotes (refused)",
                         lambda n: _scrape('vllm:num_requests_running{a="' + '\\"' * (n // 2) + '"} 1\n')),
    "vllm-stats-digits": ("vLLM stats lines: 60 KiB of digits after 'Avg prompt throughput: '",
                          lambda n: _log(_repeat(STATS_HEADER + "Avg prompt throughput: " + "7" * 60_000 + "\n", n).encode())),
    "log-box-blanks": ("stats lines ending in a border, 60 KiB of blanks and a letter",
                       lambda n: _log(_repeat(STATS + "│" + " " * 60_000 + "x\n", n).encode())),
    "html-unclosed-scripts": ("report page with many unclosed script tags",
                              lambda n: _page("<html>" + _repeat(f'<script type="application/json" id="{EMBED_ID}">', n))),
}


def _size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20}
    return int(float(text[:-1]) * units[text[-1].upper()]) if text[-1].upper() in units else int(text)


def best(fn: Callable[[], object], repeat: int) -> float:
    fn()  # warm-up: imports, caches, the page cache
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", default="256K", help="the smaller input size (bytes, or with K/M)")
    ap.add_argument("--factor", type=int, default=4, help="the larger input is this many times the smaller")
    ap.add_argument("--limit", type=float, default=2.0,
                    help="fail when time grows more than this many times faster than the input")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", action="append", help="run only these cases (repeatable)")
    args = ap.parse_args()
    small = _size(args.size)
    failed = []
    print(f"{'case':26} {'small':>10} {'large':>10} {'growth':>7}  (input x{args.factor}, limit x{args.factor * args.limit:g})")
    for name, (what, build) in CASES.items():
        if args.only and name not in args.only:
            continue
        t_small = best(build(small), args.repeat)
        t_large = best(build(small * args.factor), args.repeat)
        # A floor of 1 ms: below it, the growth of a constant-time case is noise.
        growth = max(t_large, 1e-3) / max(t_small, 1e-3)
        bad = growth > args.factor * args.limit
        failed += [name] if bad else []
        print(f"{name:26} {t_small * 1e3:8.1f}ms {t_large * 1e3:8.1f}ms {growth:6.1f}x  {'SUPER-LINEAR' if bad else 'ok'}  {what}")
    if failed:
        print(f"super-linear: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
