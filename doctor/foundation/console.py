"""The stderr console every command message goes to: progress, warnings, "wrote PATH", errors.

One line per message (``soft_wrap``), so messages stay grep-able; stdout is kept for what a
command is asked to print (a report, JSON), so it pipes cleanly. ``narrow_terminals_spelled``
lets both streams write to a terminal whose encoding lacks a character the reports use, and
``stdout_json`` keeps a JSON document sent to such a stdout whole (escaped, never spelled).
"""

from __future__ import annotations

import codecs
import io
import json
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.markup import escape


class _StderrConsole(Console):
    """A console whose reader may leave too: under ``2>&1 | head -2`` the "wrote PATH" line hits the
    closed pipe. rich's default answer is ``SystemExit(1)``, which turned a healthy run's exit code
    into the "users felt a problem" one; here the messages just stop, as stdout's do."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, self.file.fileno())
        os.close(devnull)


err = _StderrConsole(stderr=True, soft_wrap=True)

#: What a character the reports print is spelled as where the terminal's encoding lacks it (a
#: Latin-1 locale, ``PYTHONIOENCODING=ascii``); any other such character becomes "?".
ASCII_SPELLING = {
    "\u2013": "-", "\u2014": "-", "\u2212": "-", "\u00b5": "u", "\u00d7": "x", "\u2265": ">=", "\u2264": "<=",
    "\u2192": "->", "\u2190": "<-", "\u2026": "...", "\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"',
    "\u00b1": "+/-", "\u2248": "~", "\u00b7": ".", "\u2022": "*", "\u00a0": " ", "\u2009": " ", "\u202f": " ",
    "\u2713": "ok", "\u2717": "x", "\u00b0": " deg",
}

#: The name of the encode error handler that spells them (``codecs.register_error``).
SPELLED = "llm-doctor-spelled"


def _spelled(exc: UnicodeError) -> tuple[str, int]:
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    text = exc.object[exc.start:exc.end]
    return "".join(ASCII_SPELLING.get(ch, "?") for ch in text), exc.end


codecs.register_error(SPELLED, _spelled)


def narrow_terminals_spelled() -> None:
    """Let stdout and stderr write what their encoding lacks as ``ASCII_SPELLING`` says.

    The reports print an en dash, "µs", "≥"; under a Latin-1 locale or ``PYTHONIOENCODING=ascii`` the
    first one raised ``UnicodeEncodeError`` after the probe ran: a traceback, exit 1 and no report.
    The terminal is the one place that encoding applies (the files are written as UTF-8 bytes), so
    the streams' error handler is set once, at start, for every writer of them: rich's consoles,
    ``sys.stdout.write`` of a JSON document, a traceback. A stream that is no text file of the
    process (a test's capture) is left as it is.
    """
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors=SPELLED)


#: A character JSON text may hold only inside a string, which ``ensure_ascii`` would have escaped.
_NON_ASCII = re.compile(r"[^\x00-\x7f]")


def _stdout_holds_unicode() -> bool:
    """Whether stdout's encoding writes every character (UTF-8 and its kin), not Latin-1 or ASCII."""
    encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
    try:
        "\u2265\U0001f600".encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def stdout_json(document: str) -> str:
    """A JSON document (written with ``ensure_ascii=False``) as stdout may carry it.

    Where stdout's encoding holds every character it is the document itself. Elsewhere (a Latin-1
    locale, ``PYTHONIOENCODING=ascii``) ``narrow_terminals_spelled`` would turn what the encoding
    lacks into "?" or a spelling: a model name or a log excerpt changed in a document a program
    reads. There every non-ASCII character, which JSON text holds only inside strings, is escaped
    as ``json.dumps(ensure_ascii=True)`` escapes it, so the same document parses to the same values.
    Files are written as UTF-8 bytes and keep their characters.
    """
    if _stdout_holds_unicode():
        return document
    return _NON_ASCII.sub(lambda m: json.dumps(m.group())[1:-1], document)


def progress(message: str) -> None:
    """A dim "… message" line: what the collector is doing now."""
    err.print(f"[dim]… {escape(message)}[/]", highlight=False)  # messages name URLs and paths: never markup


def note(message: str) -> None:
    """A dim "note:" line: something the user did not ask for explicitly but should know."""
    err.print(f"[dim]note: {escape(message)}[/]", highlight=False)


def warn(message: str) -> None:
    """A yellow "warning:" line; ``message`` is shown as typed, never read as markup."""
    err.print(f"[yellow]warning:[/] {escape(message)}", highlight=False)


@contextmanager
def reader_may_leave() -> Iterator[None]:
    """Write to stdout inside this; a reader that closed early (``| head -1``) ends the output
    there, not the run.

    The Python documentation's way (``signal`` module, "Note on SIGPIPE"): on ``BrokenPipeError``
    stdout is pointed at ``/dev/null``, so the interpreter's last flush cannot fail again. The run
    then goes on: the files are still written, their "wrote" lines still reach stderr, and the exit
    code is still the verdict's, where a traceback and exit 1 once told a healthy cron job it had
    found an incident.
    """
    try:
        yield
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
