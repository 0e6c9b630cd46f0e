"""From a physical log line to vLLM log records: prefixes, colours, glued and wrapped lines.

Real vLLM logs rarely reach us as vLLM wrote them. Container runtimes, journald, k9s panes,
TorchServe and fastchat wrap every line in their own prefix; vLLM itself prefixes the output
of child processes with ``(Name pid=N)`` (nested under Ray), colours it with ANSI codes, and
two records can end up glued on one line or one record hard-wrapped over several. Rather than
enumerate every wrapper, a record is found by vLLM's own header wherever it sits on the line
(``LEVEL MM-DD HH:MM:SS [file.py:N]``, with or without the brackets of releases before 0.8);
whatever precedes it is the prefix, from which only the process name and a dated timestamp
are kept. Lines without a header (tracebacks, ``ValueError: ...``) keep their text after the
known wrappers are peeled off.

A terminal (``script``, a tmux or k9s pane, a copied screen) cuts every line at its width,
wherever that falls: before a space, inside the header or the phrase a fact is read by. Such a
log has many lines exactly as long as its longest (``infer_wrap``), and after one of them the
next line continues the record unless it starts with a header of its own (``Wrap``).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")

#: vLLM's logger header; ``fileinfo`` is a bare file name, or a shortened path at DEBUG level.
HEADER = re.compile(
    r"(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL) (?P<ts>\d\d-\d\d \d\d:\d\d:\d\d)(?:[.,]\d+)? "
    r"\[?(?P<src>[^\s\]\[]+:\d+)\] ?"
)

#: ``(VllmWorkerProcess pid=1)``, ``(VllmWorker rank=0 pid=2)``, ``(RayWorkerWrapper pid=3, ip=10.0.0.1)``.
PROCESS = re.compile(r"\((?P<name>[^()]*?) pid=(?P<pid>\d+)(?:, ip=[^()]*)?\)")

#: A dated timestamp added by a wrapper (Docker/Kubernetes RFC 3339, TorchServe, fastchat).
DATED = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?")

# Wrappers peeled off a line that has no vLLM header, applied until none matches.
_WRAPPERS = re.compile(
    r"""^(?:
        \s*[│|]\s?                                        # k9s / TUI box border
      | \S*\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\S*\s+            # docker --timestamps / kubectl --timestamps
      | \d{4}-\d\d-\d\d\ \d\d:\d\d:\d\d(?:[.,]\d+)?\ \|\ \w+\ \|\ [\w.-]+\ \|\ ?   # fastchat
      | \S+\ +\d{1,2}\ \d\d:\d\d:\d\d\ \S+\ [^\s:\[]+(?:\[\d+\])?:\ ?         # journald, any locale
      | [\w.-]+\s+\|\ ?                                    # docker compose service-1  |
      | \((?:[^()]|\([^()]*\))*?\ pid=\d+[^()]*\)\ ?       # (Name pid=N), nested Ray actors
      | \[(?:rank\d+|Stage-\d+)\]:?\ ?                     # torch.distributed [rank0]: / vLLM-Omni [Stage-N]
    )""",
    re.VERBOSE,
)

# Starts after a non-space: unguarded, a search tried "\s*" from every blank of a long run before
# the border, each try to the run's end (quadratic on a line of blanks that holds a "│").
_BOX_RIGHT = re.compile(r"(?<!\s)\s*│\s*$")

#: vLLM messages that a paste shows without their header. Such a line starts a record unless
#: the line before ends where a terminal's cut before the phrase would leave it (a space, a
#: comma, a header's ``]``, a prefix's ``)``): after a long line it is not that line's rest, and
#: two lines of the same format whose numbers happen to be as wide are no terminal's wrap.
_PASTED_MESSAGE = re.compile(
    r"Loading model weights|Model loading took|Memory profiling|Maximum concurrency|# \w+ blocks: "
    r"|(?:GPU|CUDA|cuda) blocks: |The model's max seq len|Using max model len"
)

#: How a new record can start; a line that starts otherwise and follows a line of at least
#: ``WRAP_MIN_WIDTH`` is the rest of that line, hard-wrapped by a paste or an editor.
_RECORD_START = re.compile(
    r"""\s|$|[(\[│|*#`$>\x1b] | \{"
      | Traceback\b | \w*(?:Error|Exception|Warning)\b
      | (?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\b
      | \d{4}-\d\d-\d\d | \d\d-\d\d\ \d\d:
      | \S+\ +\d{1,2}\ \d\d:\d\d:\d\d
      | [\w.-]+\ +\|
      | (?:Loading|Capturing|Processed|Adding|Compiling)\b""",
    re.VERBOSE,
)

#: Shortest physical line that may have been hard-wrapped (terminals wrap at 80 columns or more).
WRAP_MIN_WIDTH = 79

#: What only a new record starts with, however a terminal cut the one before: a process prefix,
#: a level word (vLLM's header, uvicorn's ``INFO:``, Python's default ``INFO:vllm.x:``), a date
#: (a wrapper's timestamp, journald's), a JSON object, torch's rank, a traceback, the fence
#: around a log pasted into an issue. A terminal cuts at a column, so a wrapped piece may start
#: with any character; these are what the lines of a log that no terminal wrapped start with,
#: and a log whose periodic lines all have the same width must not be joined into one record.
_RECORD_HEADER = re.compile(
    r"""\((?:[^()]|\([^()]*\))*?\ pid=\d+[^()]*\)
      | (?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\b
      | \S*\d{4}-\d\d-\d\d[T\ ]\d\d:\d\d:\d\d | \d{4}-\d\d-\d\d\b | \{"
      | \S+\ +\d{1,2}\ \d\d:\d\d:\d\d\ \S+\ [^\s:\[]+(?:\[\d+\])?:
      | \[(?:rank\d+|Stage-\d+)\]
      | Traceback\ \(most\ recent | ```""",
    re.VERBOSE,
)
#: An exception line, which follows a traceback frame without a header of its own.
_EXCEPTION_START = re.compile(r"[\w.]*(?:Error|Exception|Warning)\b")


@dataclass
class Record:
    """One log record: a vLLM logger line, or a line without a vLLM header (``level`` None)."""

    no: int  # 1-based line number of its first physical line
    raw: str  # the physical line(s), colours removed
    message: str
    level: str | None = None
    timestamp: str | None = None  # the wrapper's dated timestamp when there is one, else vLLM's
    source: str | None = None  # file.py:LINE
    process: str | None = None  # innermost (Name pid=N) prefix, e.g. "EngineCore_DP0 pid=7"


def strip_ansi(text: str) -> str:
    return ANSI.sub("", text) if "\x1b" in text else text


@dataclass(frozen=True)
class Wrap:
    """How a terminal hard-wrapped a log: every longer line cut into pieces exactly ``width`` long.

    The width is inferred from the log (``infer_wrap``). After a piece that wide, the next line
    is the rest of the record unless it starts a record of its own (``starts_record``). When only
    one line is that wide, the width is a guess: then only a log with vLLM headers, where a new
    record is told by its header, is joined, and never before an exception line.
    """

    width: int
    confirmed: bool  # several different lines are exactly ``width`` long
    headers: bool  # the log has vLLM headers

    def continues(self, previous: str, line: str) -> bool:
        if len(previous) != self.width or not line.strip() or starts_record(line) or _pasted_record(previous, line):
            return False  # a wrapped piece holds at least one character, and a blank one is no record
        return self.confirmed or (self.headers and not _EXCEPTION_START.match(line))


def infer_wrap(lines: Sequence[tuple[int, str]], headers: bool) -> Wrap | None:
    """The wrap of a log, from its ``(line number, text)`` lines (colours and line ends removed).

    A terminal leaves no line longer than its width and many exactly as long, so the width is
    the longest line's; the log is taken as wrapped when a line that long is followed by one
    that does not start a record.
    """
    width = max((len(text) for _, text in lines), default=0)
    if width < WRAP_MIN_WIDTH:
        return None
    widest = {text for _, text in lines if len(text) == width}
    wrap = Wrap(width=width, confirmed=len(widest) > 1, headers=headers)
    pairs = itertools.pairwise(lines)
    return wrap if any(b[0] == a[0] + 1 and wrap.continues(a[1], b[1]) for a, b in pairs) else None


def starts_record(line: str) -> bool:
    """Whether ``line`` starts a new record: a header, behind the wrappers or not."""
    return _RECORD_HEADER.match(line) is not None or HEADER.match(peel(line)) is not None


def is_continuation(previous: str, line: str, wrap: Wrap | None = None) -> bool:
    """Whether ``line`` is the hard-wrapped rest of ``previous`` (both without colours): cut at
    the terminal width of ``wrap``, or after a long line where no record can start (a paste)."""
    if wrap is not None and wrap.continues(previous, line):
        return True
    return (len(previous) >= WRAP_MIN_WIDTH and not _RECORD_START.match(line) and not HEADER.search(line)
            and not _pasted_record(previous, line))


def _pasted_record(previous: str, line: str) -> bool:
    """Whether ``line`` is a vLLM message pasted without its header (``_PASTED_MESSAGE``)."""
    return _PASTED_MESSAGE.match(line) is not None and not previous[-1:].isspace() and not previous.endswith(("]", ")", ","))


def peel(text: str) -> str:
    """``text`` without the wrappers and process prefixes in front of it."""
    while True:
        match = _WRAPPERS.match(text)
        if not match or not match.group():
            return text
        text = text[match.end():]


def split_records(no: int, line: str) -> Iterator[Record]:
    """The records on one logical line: several when records were glued or ``\\r``-overwritten."""
    line = _BOX_RIGHT.sub("", strip_ansi(line)) if "│" in line else strip_ansi(line)
    for segment in line.split("\r"):
        if segment.strip():
            yield from _records_in(no, segment)


def _records_in(no: int, text: str) -> Iterator[Record]:
    headers = list(HEADER.finditer(text))
    if not headers:
        message = peel(text)
        yield Record(no=no, raw=text, message=message.rstrip(), process=_process(text[: len(text) - len(message)]))
        return
    prefix = text[: headers[0].start()]  # kept only for its process name and dated timestamp
    for i, header in enumerate(headers):
        end = headers[i + 1].start() if i + 1 < len(headers) else len(text)
        if i:
            prefix = ""  # a glued record carries no prefix of its own
        dated = DATED.search(prefix)
        yield Record(
            no=no,
            raw=text,
            message=text[header.end():end].rstrip(),
            level=header["level"],
            timestamp=dated.group() if dated else header["ts"],
            source=header["src"],
            process=_process(prefix),
        )


def _process(prefix: str) -> str | None:
    """The innermost ``(Name pid=N)`` of a prefix: Ray nests the actor's around vLLM's."""
    processes = PROCESS.findall(prefix)
    return f"{processes[-1][0]} pid={processes[-1][1]}" if processes else None


def iter_records(lines: Iterable[tuple[int, str]]) -> Iterator[Record]:
    """Records of ``(line number, text)`` pairs, joining hard-wrapped continuation lines."""
    cleaned = [(no, strip_ansi(text).rstrip("\r\n")) for no, text in lines]
    wrap = infer_wrap(cleaned, headers=any(HEADER.search(text) for _, text in cleaned))
    first_no = last_no = 0
    parts: list[str] = []
    for no, clean in cleaned:
        if parts and no == last_no + 1 and is_continuation(parts[-1], clean, wrap):
            parts.append(clean)
            last_no = no
            continue
        if parts:
            yield from split_records(first_no, "".join(parts))
        first_no = last_no = no
        parts = [clean]
    if parts:
        yield from split_records(first_no, "".join(parts))
