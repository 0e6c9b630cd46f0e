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
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
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

_BOX_RIGHT = re.compile(r"\s*│\s*$")

#: How a new record can start; a line that starts otherwise and follows a full-width line is
#: the rest of that line, hard-wrapped by a terminal or a paste.
_RECORD_START = re.compile(
    r"""\s|$|[(\[│|*#`$>\x1b]
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


def is_continuation(previous: str, line: str) -> bool:
    """Whether ``line`` is the hard-wrapped rest of ``previous`` (both without colours)."""
    return len(previous) >= WRAP_MIN_WIDTH and not _RECORD_START.match(line) and not HEADER.search(line)


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
    first_no = last_no = 0
    parts: list[str] = []
    for no, text in lines:
        clean = strip_ansi(text).rstrip("\r\n")
        if parts and no == last_no + 1 and is_continuation(parts[-1], clean):
            parts.append(clean)
            last_no = no
            continue
        if parts:
            yield from split_records(first_no, "".join(parts))
        first_no = last_no = no
        parts = [clean]
    if parts:
        yield from split_records(first_no, "".join(parts))
