"""The startup-log probe: stream a vLLM log (a path, ``-`` for stdin, gzip accepted) and
keep the lines the parser needs, in constant memory, as ``LogEvidence``.

Bad input never raises: an unreadable, empty, binary or corrupt log gives no evidence and a
fatal ``EvidenceError``; a truncated ``.gz`` or a log larger than ``max_bytes`` gives the
evidence read so far and a non-fatal ``cut`` error that says what was left out.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import stat
import sys
import threading
import zlib
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import ExitStack, suppress
from typing import BinaryIO

from doctor.evidence.errors import EvidenceError
from doctor.evidence.log import LogEvidence, LogLine
from doctor.foundation.redact import Redactor
from doctor.logscan.scanner import Scanner, probe
from doctor.probes.cpus import usable_cpus

CHUNK = 8 << 20  # large enough to amortise the per-chunk gate passes, small next to the RSS goal
# A plain file at least this large is split between processes, one per available CPU (up to
# MAX_WORKERS, ~30 MiB each, so that all of them stay under the 150 MB memory goal): the scan
# is CPU-bound, and the parts' results merge exactly (Scanner.join).
PARALLEL_MIN = 256 << 20
MAX_WORKERS = 4
_HEAD = 16 << 10  # first bytes of a part, where a wrapped line of the previous part may continue
_GZIP_READ = 64 << 10  # compressed bytes per decompression step: what a corrupt block can lose
_SNIFF = 64 << 10  # how much of the start is checked for binary content


def read_log(source: str, *, max_bytes: int | None = None) -> tuple[LogEvidence | None, list[EvidenceError]]:
    """Scan the log at ``source``; with ``max_bytes``, analyse only its last ``max_bytes``
    bytes (a plain file; earlier lines are only counted, so line numbers stay true) or its
    first ``max_bytes`` (stdin and compressed logs, which cannot seek)."""
    scanner = Scanner()
    errors: list[EvidenceError] = []
    damage: Exception | None = None  # a compressed log's truncation or corruption
    with ExitStack() as opened:
        try:
            stream, size = _open(source, opened)
        except OSError as exc:
            return None, [_refusal(source, exc)]
        try:
            parallel = None
            if max_bytes is None and size is not None and size >= PARALLEL_MIN and _workers() > 1 and _can_fork():
                with suppress(BrokenProcessPool):  # a worker was killed (memory, signal): read it here
                    parallel = _scan_parallel(source, stream, size, _workers())
                stream.seek(0)
            if parallel is not None:
                scanner = parallel
            else:
                errors += _scan(source, stream, size, scanner, max_bytes)
        except (EOFError, zlib.error) as exc:
            damage = exc
        except (_BadGzip, _Binary, OSError) as exc:
            return None, [_refusal(source, exc, opened=True)]
    scanner.finish()
    if damage is not None:
        errors.append(_error(source, "cut", f"the compressed log {source} is truncated or corrupt ({damage}); "
                                            f"analysed the {scanner.lines_total:,} lines before the damage", fatal=False))
    if scanner.bytes_total == 0 and not errors:
        return None, [_error(source, "malformed", f"the log {source} is empty")]
    if dropped := scanner.dropped():
        kinds = ", ".join(f"{n:,} {kind}" for kind, n in dropped.items())
        errors.append(_error(source, "cut", f"the log holds more than is kept in memory: dropped the oldest {kinds}",
                             fatal=False))
    redactor = Redactor()
    evidence = LogEvidence(
        source=source,
        lines_total=scanner.lines_total,
        bytes_total=scanner.bytes_total,
        matched=[LogLine(no, redactor.text(text.decode("utf-8", "replace").rstrip("\r")))
                 for no, text in scanner.kept()],
        truncated=scanner.truncated,
    )
    return evidence, errors


def unreadable(source: str) -> str | None:
    """Why ``source`` cannot be read as a log, or None: checked before the probe sends anything,
    so a typo or a binary file given to ``--log`` costs no probe run. Only the start is read."""
    if source == "-":
        return None  # stdin: nothing to check before it is read
    try:
        info = os.stat(source)
    except OSError as exc:
        return _refusal(source, exc).message
    if not stat.S_ISREG(info.st_mode) and not stat.S_ISDIR(info.st_mode):
        return None  # a pipe or a device: reading its start now would take it from read_log
    with ExitStack() as opened:
        try:
            stream, _ = _open(source, opened)
        except OSError as exc:
            return _refusal(source, exc).message
        try:
            _check_text(stream.read(_SNIFF))
        except (EOFError, zlib.error):
            return None  # damage after the start: read_log reads up to it and says so
        except (_BadGzip, _Binary, OSError) as exc:
            return _refusal(source, exc, opened=True).message
    return None


def _refusal(source: str, exc: Exception, *, opened: bool = False) -> EvidenceError:
    """The evidence error for a log that cannot be read at all (``opened``: it failed after opening)."""
    if isinstance(exc, _BadGzip):
        return _error(source, "malformed", f"{source} is not a readable gzip file ({exc})")
    if isinstance(exc, _Binary):
        return _error(source, "malformed", f"{source} {exc}")
    if isinstance(exc, IsADirectoryError):
        return _error(source, "unreadable", f"{source} is a directory, not a log file")
    reason = getattr(exc, "strerror", None) or exc
    if opened:
        return _error(source, "unreadable", f"reading the log {source} failed: {reason}")
    return _error(source, "unreadable", f"cannot open the log {source}: {reason}")


class _Binary(Exception):
    """The log is not text; the message says what it looks like instead."""


class _BadGzip(Exception):
    """The log starts like gzip but its first block does not decompress."""


class _Gunzip:
    """A gzip stream (one or more members) decompressed as it is read.

    Not ``gzip.GzipFile``: at a truncation it raises ``EOFError`` and drops the data it had
    decompressed in the same read, while ``zlib``'s decompressor hands out everything before the
    cut; a damaged block loses at most the output of one ``_GZIP_READ`` step.
    """

    def __init__(self, raw: BinaryIO) -> None:
        self._raw = raw
        self._inflate = zlib.decompressobj(wbits=31)  # 31: a gzip header and trailer
        self._input = b""
        self._member_open = False  # inside a member: the input may not end here
        self._started = False  # some output came: damage from here on is a cut, not a bad file
        self._cut = False

    def read(self, size: int) -> bytes:
        while not self._cut:
            if not self._input:
                self._input = self._raw.read(_GZIP_READ)
                if not self._input:
                    if not self._member_open:
                        return b""
                    self._cut = True
                    if out := self._inflate.flush():  # what the decompressor still holds
                        return out
                    break
            if not self._member_open:
                self._input = self._input.lstrip(b"\0")  # zero padding after a member
                if not self._input:
                    continue
                self._inflate, self._member_open = zlib.decompressobj(wbits=31), True
            try:
                out = self._inflate.decompress(self._input, size)
            except zlib.error as exc:
                if self._started:
                    raise
                raise _BadGzip(str(exc)) from exc
            if self._inflate.eof:  # the member ends; another may follow (``cat a.gz b.gz``)
                self._input, self._member_open = self._inflate.unused_data, False
            else:
                self._input = self._inflate.unconsumed_tail
            if out:
                self._started = True
                return out
        raise EOFError("compressed file ended before the end-of-stream marker was reached")


def _check_text(start: bytes) -> None:
    if start[:2] in (b"\xff\xfe", b"\xfe\xff"):
        raise _Binary("is UTF-16 text (as PowerShell's > writes it): convert it to UTF-8 first")
    if b"\x00" in start[:_SNIFF]:
        raise _Binary("looks binary (NUL bytes in its first 64 KiB), not a text log")


def _error(source: str, kind: str, message: str, fatal: bool = True) -> EvidenceError:
    return EvidenceError(source="log", target=source, action="read", kind=kind, message=message, fatal=fatal)


def _open(source: str, opened: ExitStack) -> tuple[BinaryIO, int | None]:
    """The byte stream of ``source`` and its size when it is a plain, seekable file.

    Compression is recognised by its magic bytes, not the name: ``kubectl logs | gzip`` piped
    in, or a rotated ``vllm.log.1`` that logrotate compressed, read like a ``.gz``.
    """
    if source == "-":
        stream = opened.enter_context(os.fdopen(os.dup(sys.stdin.fileno()), "rb"))
    else:
        stream = opened.enter_context(open(source, "rb"))  # noqa: SIM115 - the caller's ExitStack closes it
    if stream.peek(2)[:2] == b"\x1f\x8b":
        return _Gunzip(stream), None  # type: ignore[return-value]
    info = os.fstat(stream.fileno())
    return stream, info.st_size if stat.S_ISREG(info.st_mode) else None


def _can_fork() -> bool:
    """Whether worker processes may be forked: on Linux, and only with no other thread alive
    (a fork copies the locks other threads hold). ``spawn`` would avoid that but re-runs the
    caller's main module, which breaks any unguarded script that calls ``read_log``."""
    return sys.platform.startswith("linux") and threading.active_count() == 1


def _workers() -> int:
    return max(1, min(usable_cpus(), MAX_WORKERS))


def _scan_range(path: str, begin: int, end: int, headers: bool) -> tuple[Scanner, bytes]:
    """Scan ``path[begin:end]`` (whole lines) in a worker process; also return its first bytes."""
    scanner = Scanner(headers=headers)
    with open(path, "rb") as stream:
        stream.seek(begin)
        head = b""
        remaining = end - begin
        while remaining > 0:
            chunk = stream.read(min(CHUNK, remaining))
            if not chunk:
                break
            head = head or chunk[:_HEAD]
            scanner.feed(chunk)
            remaining -= len(chunk)
    scanner.finish()
    return scanner, head[: head.rfind(b"\n") + 1]


def _scan_parallel(source: str, stream: BinaryIO, size: int, workers: int) -> Scanner | None:
    """Scan a large plain file in ``workers`` processes, split at line boundaries, and merge;
    None for a log that a terminal wrapped, whose records are joined across lines in one pass."""
    stream.seek(0)
    start = stream.read(_SNIFF)
    _check_text(start)
    headers, wrap = probe(start, whole=len(start) == size)  # as one scanner would decide
    if wrap is not None:
        return None
    bounds = [0]
    for i in range(1, workers):
        stream.seek(max(size * i // workers, bounds[-1]))
        stream.readline()  # to the start of the next line
        bounds.append(min(stream.tell(), size))
    bounds.append(size)
    ranges = [(a, b) for a, b in itertools.pairwise(bounds) if b > a]
    with ProcessPoolExecutor(len(ranges), mp_context=multiprocessing.get_context("fork")) as pool:
        parts = list(pool.map(_scan_range, [source] * len(ranges), *zip(*ranges, strict=True), [headers] * len(ranges)))
    scanner = parts[0][0]
    for part, head in parts[1:]:
        scanner.join(part, head)
    return scanner


def _scan(source: str, stream: BinaryIO, size: int | None, scanner: Scanner, max_bytes: int | None) -> list[EvidenceError]:
    """Feed ``stream`` to ``scanner`` in this process, within ``max_bytes``; the cuts as errors."""
    errors: list[EvidenceError] = []
    budget = max_bytes
    if max_bytes is not None and size is not None and size > max_bytes:
        head = size - max_bytes
        while head > 0:
            chunk = stream.read(min(CHUNK, head))
            if not chunk:
                break
            scanner.skip(chunk)
            head -= len(chunk)
        errors.append(_error(source, "cut", f"the log is {_mib(size)}; analysed its last {_mib(max_bytes)} "
                                            f"(lines before {scanner.lines_total + 1:,} only counted)", fatal=False))
        budget = None
    first = True
    while True:
        chunk = stream.read(CHUNK if budget is None else min(CHUNK, budget))
        if not chunk:
            break
        if first:
            _check_text(chunk)
        first = False
        scanner.feed(chunk)
        if budget is not None:
            budget -= len(chunk)
            if budget <= 0:
                if stream.read(1):
                    errors.append(_error(source, "cut", f"analysed the first {_mib(scanner.bytes_total)} of the log only "
                                                        "(a stream cannot be read from its end)", fatal=False))
                break
    return errors


def _mib(n: int) -> str:
    if n < 1 << 20:
        return f"{n / 1024:.0f} KiB"
    return f"{n / 2**20:,.0f} MiB" if n >= 10 << 20 else f"{n / 2**20:.1f} MiB"
