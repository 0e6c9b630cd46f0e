"""The stderr console every command message goes to: progress, warnings, "wrote PATH", errors.

One line per message (``soft_wrap``), so messages stay grep-able; stdout is kept for what a
command is asked to print (a report, JSON), so it pipes cleanly.
"""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

err = Console(stderr=True, soft_wrap=True)


def progress(message: str) -> None:
    """A dim "… message" line: what the collector is doing now."""
    err.print(f"[dim]… {escape(message)}[/]", highlight=False)  # messages name URLs and paths: never markup


def note(message: str) -> None:
    """A dim "note:" line: something the user did not ask for explicitly but should know."""
    err.print(f"[dim]note: {escape(message)}[/]", highlight=False)


def warn(message: str) -> None:
    """A yellow "warning:" line; ``message`` is shown as typed, never read as markup."""
    err.print(f"[yellow]warning:[/] {escape(message)}", highlight=False)
