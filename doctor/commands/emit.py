"""A report's way out: the summary on the terminal first, then the files asked for, and the exit code.

The verdict is shown before any file is written, so a file that cannot be written (a full disk,
``--html /dev/full``) never hides it: the write failure is then one line and exit 2, the verdict
already on the screen. ``-`` sends one machine-readable output to stdout (``--json -``,
``--md -``, ``--html -``); the text summary then goes to stderr, so stdout holds only that document.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rich.console import Console

from doctor.bundle import write_file
from doctor.config import FileConfig
from doctor.console import err, reader_may_leave
from doctor.exit_codes import ExitCode, exit_code_for
from doctor.model import Report
from doctor.settings import FORMATS, check_output_options
from doctor.user_paths import is_stdout, piped_output
from reports.html_page import render_html
from reports.json_doc import render_json
from reports.markdown import render_markdown
from reports.terminal import print_report, stdout_console

#: Renders each output the options may ask for (``json``, ``html``, ``md``), called only when asked.
Renders = Mapping[str, Callable[[], str]]


def file_output(opts: dict[str, Any], key: str) -> Path | None:
    """The file ``--json``/``--html``/``--md`` names; None when not asked or ``-`` (stdout)."""
    path = opts.get(key)
    return None if path is None or is_stdout(path) else Path(path)


def footer_pointer(opts: dict[str, Any]) -> str | None:
    """The file the Markdown summary's footer points at: the HTML, else the JSON written beside it."""
    return next((p.name for p in (file_output(opts, "html"), file_output(opts, "json")) if p is not None), None)


def deliver(opts: dict[str, Any], show: Callable[[Console], None], renders: Renders) -> None:
    """The terminal first, then the files: ``show`` prints the summary on stdout, or on stderr
    when ``-`` sends one of ``renders`` to stdout; ``--format json`` prints ``renders["json"]``
    instead; then each file asked for is written and named on stderr.

    A reader of stdout that leaves early costs the rest of stdout only (``reader_may_leave``); a
    file that cannot be written is a ``UsageError`` after the verdict was shown.
    """
    piped = piped_output(opts)
    with reader_may_leave():
        if piped is not None:
            show(err)
            sys.stdout.write(renders[piped]())
        elif (opts.get("format") or FORMATS[0]) == "json":
            sys.stdout.write(renders["json"]())
        else:
            show(stdout_console())
    for key, render in renders.items():
        path = file_output(opts, key)
        if path is not None:
            write_file(path, render().encode("utf-8"))
            err.print(f"wrote {path}")


def emit(report: Report, opts: dict[str, Any], cfg: FileConfig, *, interrupted: bool = False) -> ExitCode:
    """Print the summary (or the document asked for on stdout), write the requested files, and
    decide the exit code.

    ``interrupted``: this process was stopped (Ctrl-C, SIGTERM) while collecting, so it exits 130.
    A later ``analyze`` of that partial evidence was not interrupted: its exit code is the verdict's
    (the reports still say the evidence is partial).
    """
    fail_on = check_output_options(opts, cfg)
    deliver(opts, lambda console: print_report(report, console, verbose=bool(opts.get("verbose"))), {
        "json": lambda: render_json(report),
        "html": lambda: render_html(report),
        "md": lambda: render_markdown(report, footer_pointer(opts)),
    })
    if interrupted:
        return ExitCode.INTERRUPTED
    return exit_code_for(report, fail_on)
