"""A report's way out: the summary on the terminal first, then the files asked for, and the exit code.

The verdict is shown before any file is written, so a file that cannot be written (a full disk,
``--html /dev/full``) never hides it: the write failure is then one line and exit 2, the verdict
already on the screen. ``-`` sends one machine-readable output to stdout (``--json -``,
``--md -``, ``--html -``); the text summary then goes to stderr, so stdout holds only that document.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping

from rich.console import Console

from doctor.bundle import write_file
from doctor.exit_codes import ExitCode, exit_code_for
from doctor.foundation.console import err, reader_may_leave, stdout_json
from doctor.model import Report
from doctor.settings import Outputs
from reports.html_page import render_html
from reports.json_doc import render_json
from reports.markdown import render_markdown
from reports.terminal import print_report, stdout_console

#: Renders each output the options may ask for (``json``, ``html``, ``md``), called only when asked.
Renders = Mapping[str, Callable[[], str]]


def deliver(outputs: Outputs, show: Callable[[Console], None], renders: Renders) -> None:
    """The terminal first, then the files: ``show`` prints the summary on stdout, or on stderr
    when ``-`` sends one of ``renders`` to stdout; ``--format json`` prints ``renders["json"]``
    instead; then each file asked for is written and named on stderr.

    A reader of stdout that leaves early costs the rest of stdout only (``reader_may_leave``); a
    file that cannot be written is a ``UsageError`` after the verdict was shown.
    """
    piped = outputs.piped()
    with reader_may_leave():
        if piped is not None:
            show(err)
            document = renders[piped]()
            sys.stdout.write(stdout_json(document) if piped == "json" else document)
        elif outputs.format == "json":
            sys.stdout.write(stdout_json(renders["json"]()))
        else:
            show(stdout_console())
    for key, render in renders.items():
        path = outputs.file(key)
        if path is not None:
            write_file(path, render().encode("utf-8"))
            err.print(f"wrote {path}")


def emit(report: Report, outputs: Outputs, *, interrupted: bool = False) -> ExitCode:
    """Print the summary (or the document asked for on stdout), write the requested files, and
    decide the exit code (``outputs.fail_on``).

    ``interrupted``: this process was stopped (Ctrl-C, SIGTERM) while collecting, so it exits 130.
    A later ``analyze`` of that partial evidence was not interrupted: its exit code is the verdict's
    (the reports still say the evidence is partial).
    """
    deliver(outputs, lambda console: print_report(report, console, verbose=outputs.verbose), {
        "json": lambda: render_json(report),
        "html": lambda: render_html(report),
        "md": lambda: render_markdown(report, outputs.footer_pointer()),
    })
    if interrupted:
        return ExitCode.INTERRUPTED
    return exit_code_for(report, outputs.fail_on)
