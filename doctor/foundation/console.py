"""The stderr console every command message goes to: progress, warnings, "wrote PATH", errors.

One line per message (``soft_wrap``), so messages stay grep-able; stdout is kept for what a
command is asked to print (a report, JSON), so it pipes cleanly.
"""

from __future__ import annotations

import os
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
