"""Streaming scan of a log: keep the lines the parser may need, in bounded memory.

The scanner sees the log as byte chunks and never splits it into Python line objects: the gate
(``gate.MESSAGE_GATE`` and ``EXCEPTION_GATE``) is searched through the whole chunk in C, and
only the lines around a hit are cut out, numbered (by counting newlines, also in C) and kept.
That is what lets a multi-gigabyte log be read at a small multiple of ``grep``'s speed (see
``bench/log_parse.py``). A large file can be scanned in parts by several processes and the
parts joined (``join``), with the same result. A log that a terminal hard-wrapped (its start
shows it, ``probe``) is read line by line instead, its pieces joined into records before the
gate, so that a phrase the wrap cut in two is found whole, and kept joined.

Memory stays bounded whatever the log holds: the periodic stats lines keep their most recent
``max_stats``, preemption warnings and exception lines their most recent few hundred, and the
startup lines a byte budget (oldest dropped first, so the last startups survive a crash loop);
a line longer than ``max_line`` is cut, and only its first ``max_line`` bytes are searched, so
that the result does not depend on where the chunks happen to end. ``truncated`` says whether
anything was dropped.
"""

from __future__ import annotations

import re
import sys
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field

from doctor.logscan import gate
from doctor.logscan.prefixes import WRAP_MIN_WIDTH, Wrap, infer_wrap, is_continuation, strip_ansi

_REQUEST_LOG = re.compile(gate.REQUEST_LOG)
PROBE = 64 << 10  # bytes of the log's start that decide whether it has vLLM headers, and its wrap
#: First bytes that always start a new record (``prefixes._RECORD_START``), checked before the
#: line is decoded for ``is_continuation``.
_NEVER_CONTINUES = frozenset(b" \t\r\n([|*#`$>\x1b")


@dataclass
class _Bounded:
    """Most recent kept lines of one kind, bounded by count and by bytes."""

    max_lines: int
    max_bytes: int
    lines: deque[tuple[int, bytes]] = field(default_factory=deque)
    size: int = 0
    dropped: int = 0

    def add(self, no: int, text: bytes) -> None:
        self.lines.append((no, text))
        self.size += len(text)
        while len(self.lines) > self.max_lines or self.size > self.max_bytes:
            self.size -= len(self.lines.popleft()[1])
            self.dropped += 1


class Scanner:
    """Feed byte chunks in order, then ``finish()``; ``kept()`` gives ``(line number, text)``."""

    def __init__(
        self,
        *,
        max_stats: int = 2000,
        max_events: int = 500,
        max_startup_bytes: int = 16 << 20,
        max_line: int = 64 << 10,
        headers: bool | None = None,
    ) -> None:
        self.max_line = max_line
        self.lines_total = 0
        self.bytes_total = 0
        self.cut_lines = 0
        self._stats = _Bounded(max_stats, max_stats * max_line)
        self._preemptions = _Bounded(max_events, max_events * max_line)
        self._exceptions = _Bounded(max_events, max_events * max_line)
        self._startup = _Bounded(sys.maxsize, max_startup_bytes)
        self._carry = b""
        self._discarding = False  # inside an over-long line, or the partial line after a skip
        self._wrap_parent: bytes | None = None  # last kept line, when it ended a block
        self._last_kept = 0
        # Whether the log has vLLM headers, and the terminal width it was wrapped at: decided on
        # its first PROBE bytes unless given (a part of a log scanned in another process is told
        # what its start showed; only an unwrapped log is split between processes).
        self._headers = headers
        self._wrap: Wrap | None = None
        self._group: list[tuple[int, bytes]] = []  # physical lines of the wrapped record being read
        self._group_size = 0
        self._probe = b""

    @property
    def _buffers(self) -> tuple[_Bounded, ...]:
        return (self._stats, self._preemptions, self._exceptions, self._startup)

    @property
    def truncated(self) -> bool:
        return self.cut_lines > 0 or any(b.dropped for b in self._buffers)

    def dropped(self) -> dict[str, int]:
        """How many lines of each kind were dropped to bound memory, or cut to ``max_line``."""
        counts = {
            "stats lines": self._stats.dropped,
            "preemption warnings": self._preemptions.dropped,
            "exception lines": self._exceptions.dropped,
            "startup lines": self._startup.dropped,
            f"lines' ends past {self.max_line // 1024} KiB": self.cut_lines,
        }
        return {kind: n for kind, n in counts.items() if n}

    def skip(self, chunk: bytes) -> None:
        """Count the lines of a part of the log that is not analysed (``read_log(max_bytes=)``)."""
        self.bytes_total += len(chunk)
        self.lines_total += chunk.count(b"\n")
        self._discarding = not chunk.endswith(b"\n")

    def feed(self, chunk: bytes) -> None:
        self.bytes_total += len(chunk)
        if self._headers is None:
            self._probe += chunk
            if len(self._probe) < PROBE:
                return
            chunk, self._probe = self._decide(whole=False), b""
        begin = 0
        if self._discarding:
            begin = chunk.find(b"\n")
            if begin < 0:
                return
            self._discarding = False  # the cut line ends here; its head is in _carry
        if self._carry:
            # Complete the carried partial line on its own, so the chunk is never copied.
            first = chunk.find(b"\n", begin)
            if first < 0:
                self._carry += chunk[begin:]
                self._cut_carry()
                return
            line = self._carry + chunk[begin : first + 1]
            self._carry = b""
            self._scan(line, 0, len(line))
            begin = first + 1
        cut = chunk.rfind(b"\n", begin)
        if cut < 0:
            self._carry = chunk[begin:]
            self._cut_carry()
            return
        self._scan(chunk, begin, cut + 1)
        self._carry = chunk[cut + 1 :]

    def finish(self) -> None:
        if self._headers is None:  # a log shorter than PROBE
            probe, self._probe = self._decide(whole=True), b""
            self.bytes_total -= len(probe)  # counted when it was fed
            self.feed(probe)
        if self._carry:
            line = self._carry + b"\n"
            self._scan(line, 0, len(line))
            self._carry = b""
        self._flush_group()

    def kept(self) -> list[tuple[int, bytes]]:
        return sorted((item for buffer in self._buffers for item in buffer.lines), key=lambda item: item[0])

    def join(self, part: Scanner, head: bytes) -> None:
        """Append ``part``, the scan of the lines that follow in the same log.

        ``head`` holds the first lines of that part, where a line kept at the end of this one
        may continue (hard-wrapped); lines are renumbered and the bounds applied again.
        """
        offset = self.lines_total
        if self._wrap_parent is not None:
            parent, self._wrap_parent = self._wrap_parent, None
            self._keep_wrapped(head, 0, len(head), offset + 1, parent)
        already = self._last_kept  # continuation lines kept just now, which ``part`` may hold too
        for mine, theirs in zip(self._buffers, part._buffers, strict=True):
            for no, text in theirs.lines:
                if no + offset > already:
                    mine.add(no + offset, text)
            mine.dropped += theirs.dropped
        self.lines_total += part.lines_total
        self.bytes_total += part.bytes_total
        self.cut_lines += part.cut_lines
        self._wrap_parent = part._wrap_parent
        if part._last_kept:
            self._last_kept = part._last_kept + offset

    # -- internals --------------------------------------------------------------------------

    def _decide(self, whole: bool) -> bytes:
        """Decide the gate from the probed start of the log; return the probed bytes."""
        self._headers, self._wrap = probe(self._probe, whole)
        return self._probe

    def _cut_carry(self) -> None:
        if len(self._carry) > self.max_line:
            self._carry, self._discarding = self._carry[: self.max_line], True
            self.cut_lines += 1

    def _gate(self, block: bytes, begin: int, end: int) -> re.Pattern[bytes]:
        if not self._headers:
            return gate.ANYWHERE_GATE
        if block.find(b"\x1b", begin, end) >= 0:
            return gate.COLOURED_MESSAGE_GATE
        return gate.MESSAGE_GATE

    def _scan(self, block: bytes, begin: int, end: int) -> None:
        """Keep the gated lines of ``block[begin:end]``, which holds whole lines only."""
        if self._wrap is not None:
            self._scan_wrapped(block, begin, end)
            return
        starts: dict[int, int] = {}  # line start -> first gate hit in it
        for hit, start in _first_hits(self._gate(block, begin, end), block, begin, end):
            starts[start] = hit
        for hit, start in _first_hits(gate.EXCEPTION_GATE, block, begin, end):
            if start not in starts and not _REQUEST_LOG.search(block, start, hit):
                starts[start] = hit
        for hit, start in _first_hits(gate.WRAPPER_GATE, block, begin, end):
            starts.setdefault(start, hit)
        base = self.lines_total
        seen = 0  # newlines in block[begin:pos]
        pos = begin
        if self._wrap_parent is not None:
            parent, self._wrap_parent = self._wrap_parent, None
            self._keep_wrapped(block, begin, end, base + 1, parent)
        for start in sorted(starts):
            seen += block.count(b"\n", pos, start)
            pos = start
            no = base + seen + 1
            hit = starts[start]
            if no <= self._last_kept or hit - start >= self.max_line:
                continue
            stop = block.find(b"\n", start, end)
            line = block[start:stop]
            self._keep(no, line)
            self._keep_wrapped(block, stop + 1, end, no + 1, line)
        self.lines_total = base + seen + block.count(b"\n", pos, end)

    def _scan_wrapped(self, block: bytes, begin: int, end: int) -> None:
        """``_scan`` for a log that a terminal hard-wrapped: its physical lines are joined into
        records before the gate, so that a phrase cut by the wrap still opens its record.

        Line by line in Python, several times slower than ``_scan``: only logs whose start shows
        a wrap (``probe``) come here, and those are a terminal's output, not a server's log file.
        """
        no = self.lines_total
        while begin < end:
            stop = block.find(b"\n", begin, end)
            line = block[begin:stop]
            no += 1
            if self._group and not self._continues(self._group[-1][1], line):
                self._flush_group()
            self._group.append((no, line))
            self._group_size += len(line)
            begin = stop + 1
        self.lines_total = no

    def _continues(self, previous: bytes, line: bytes) -> bool:
        # A record longer than max_line is cut there, as an unwrapped line would be.
        if len(previous) < WRAP_MIN_WIDTH or self._group_size + len(line) > self.max_line:
            return False  # bytes, not characters: colours and UTF-8 only lengthen a line
        return is_continuation(_text(previous), _text(line), self._wrap)

    def _flush_group(self) -> None:
        """Keep the record just read, joined into one line numbered by its first, when the gate
        finds it worth keeping. Joined, it is redacted as a whole: a secret cut by the wrap
        would pass the redaction in two halves. A CRLF log's pieces each end in ``\\r``, which
        inside the record would read as a carriage-return overwrite (``split_records``)."""
        if not self._group:
            return
        *pieces, (_, last) = self._group
        record = b"".join(text.removesuffix(b"\r") for _, text in pieces) + last
        no = self._group[0][0]
        self._group, self._group_size = [], 0
        error = gate.EXCEPTION_GATE.search(record)
        if (self._gate(record, 0, len(record)).search(record) or gate.WRAPPER_GATE.search(record)
                or (error and not _REQUEST_LOG.search(record, 0, error.start()))):
            self._keep(no, record)

    def _keep_wrapped(self, block: bytes, start: int, end: int, no: int, parent: bytes) -> None:
        """Keep the hard-wrapped continuation lines of ``parent``, which start at ``start``."""
        # Bytes, not characters: colours and UTF-8 only lengthen a line. A line cut at max_line
        # is no terminal's wrap.
        while WRAP_MIN_WIDTH <= len(parent) < self.max_line:
            if start >= end:
                self._wrap_parent = parent
                return
            if block[start] in _NEVER_CONTINUES:
                return
            stop = block.find(b"\n", start, end)
            line = block[start:stop]
            if not is_continuation(_text(parent), _text(line)):
                return
            self._keep(no, line, like=parent)
            parent, start, no = line, stop + 1, no + 1

    def _keep(self, no: int, line: bytes, like: bytes | None = None) -> None:
        if len(line) > self.max_line:
            line = line[: self.max_line]
            self.cut_lines += 1
        self._buffer_of(like if like is not None else line).add(no, line)
        self._last_kept = no

    def _buffer_of(self, line: bytes) -> _Bounded:
        if any(mark in line for mark in gate.STATS_MARKS):
            return self._stats
        if any(mark in line for mark in gate.PREEMPTION_MARKS):
            return self._preemptions
        if b"Error" in line and b"KV cache" not in line:
            return self._exceptions
        return self._startup


def _first_hits(gate: re.Pattern[bytes], block: bytes, begin: int, end: int) -> Iterator[tuple[int, int]]:
    """(first hit, line start) of each line of ``block[begin:end]`` that ``gate`` finds.

    After a hit the search resumes at the next line: a line holding a million hits (8 MB of
    ``Error: ``) is found once, not searched back to its start once per hit (quadratic).
    """
    pos = begin
    while pos < end and (match := gate.search(block, pos, end)) is not None:
        hit = match.start()
        yield hit, block.rfind(b"\n", begin, hit) + 1 or begin
        pos = block.find(b"\n", hit, end) + 1 or end


def probe(start: bytes, whole: bool) -> tuple[bool, Wrap | None]:
    """Whether a log has vLLM headers and how a terminal wrapped it, from its first bytes
    (``whole``: they are the whole log, else the last line may be cut).

    A longer log is read line by line only when several lines show the same width: a wrapped
    startup cuts many records, and a guess from one line would slow a server's log down.
    """
    headers = gate.HEADER_PROBE.search(start, 0, PROBE) is not None
    lines = start[:PROBE].split(b"\n")
    if not whole:
        lines.pop()
    wrap = infer_wrap([(no, _text(line)) for no, line in enumerate(lines, 1)], headers)
    return headers, wrap if wrap is None or wrap.confirmed or whole else None


def _text(line: bytes) -> str:
    """A physical line as the parser sees it: decoded, without colours or ``\\r``."""
    return strip_ansi(line.decode("utf-8", "replace")).rstrip("\r")
