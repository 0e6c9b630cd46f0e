"""Startup-log evidence: the lines that matter, kept raw with their line numbers.

The collector streams the log (constant memory) and keeps only lines a vLLM pattern matched,
so that ``doctor.derive.log_facts`` can re-parse them at analysis time: a newer parser
re-reads an old bundle.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class LogLine:
    """A matched line: 1-based number in the source, and its text after redaction."""

    no: int
    text: str


@dataclass
class LogEvidence:
    """The ``log`` kind: the engine's startup log as the lines a pattern matched, with its size, so
    ``log_facts`` can re-parse them at analysis time. ``truncated`` says that some matched lines
    (old stats lines) were dropped to bound memory."""

    source: str  # path, "-" for stdin
    lines_total: int = 0
    bytes_total: int = 0
    matched: list[LogLine] = field(default_factory=list)
    truncated: bool = False  # some matched lines (e.g. old stats lines) were dropped to bound memory
