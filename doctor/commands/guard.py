"""How a command ends: its exit code, one red line for a domain error, 130 for Ctrl-C."""

from __future__ import annotations

from collections.abc import Callable

import typer
from rich.markup import escape

from doctor.exit_codes import ExitCode
from doctor.foundation.console import err
from doctor.foundation.errors import DoctorError


def run_guarded(fn: Callable[[], ExitCode | int]) -> None:
    """Domain errors become one red line and exit 2; Ctrl-C exits 130.

    The message is escaped: config errors name sections as ``[probe]``, which rich would
    otherwise swallow as markup.
    """
    try:
        code = fn()
    except DoctorError as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}", highlight=False)
        raise typer.Exit(ExitCode.NO_DIAGNOSIS) from None
    except KeyboardInterrupt:
        err.print("[yellow]interrupted[/]")
        raise typer.Exit(ExitCode.INTERRUPTED) from None
    raise typer.Exit(int(code))
