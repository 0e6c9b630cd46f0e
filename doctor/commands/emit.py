"""A report's way out: the files asked for, the summary on stdout, and the exit code."""

from __future__ import annotations

import sys
from typing import Any

from doctor.config import FileConfig
from doctor.console import err
from doctor.exit_codes import ExitCode, exit_code_for
from doctor.model import Report
from doctor.settings import FORMATS, check_output_options
from reports import write_outputs
from reports.json_doc import render_json
from reports.terminal import print_report, stdout_console


def emit(report: Report, opts: dict[str, Any], cfg: FileConfig, *, interrupted: bool = False) -> ExitCode:
    """Write the requested files, print the summary, and decide the exit code.

    ``interrupted``: this process was stopped (Ctrl-C, SIGTERM) while collecting, so it exits 130.
    A later ``analyze`` of that partial evidence was not interrupted: its exit code is the verdict's
    (the reports still say the evidence is partial).
    """
    fail_on = check_output_options(opts, cfg)
    written = write_outputs(report, json_path=opts.get("json"), html_path=opts.get("html"), md_path=opts.get("md"))
    if (opts.get("format") or FORMATS[0]) == "json":
        sys.stdout.write(render_json(report))
    else:
        print_report(report, stdout_console(), verbose=bool(opts.get("verbose")))
    for path in written:
        err.print(f"wrote {path}")
    if interrupted:
        return ExitCode.INTERRUPTED
    return exit_code_for(report, fail_on)
