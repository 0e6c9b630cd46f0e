"""``llm-doctor log PATH [--json]``: read a vLLM log, parse it, print what was found.

Exit 1 when the last startup logged an error (a symptom), 2 when the log could not be read or
holds no vLLM line (no diagnosis), else 0. The summary or the JSON document goes to stdout,
why the log was not (fully) used to stderr.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from rich.markup import escape

from doctor.engine_readers.logs import parse_engine_log
from doctor.exit_codes import ExitCode
from doctor.foundation.console import err, reader_may_leave
from doctor.probes.logfile import read_log
from reports.log_summary import log_problems, render_log_summary


@dataclass
class LogOutput:
    """What ``llm-doctor log`` prints: ``text`` on stdout, ``problems`` on stderr, and its exit code."""

    text: str
    problems: list[str]
    code: int


def log_command_output(source: str, as_json: bool) -> LogOutput:
    """The output of ``llm-doctor log`` for ``source``."""
    evidence, read_errors = read_log(source)
    facts = parse_engine_log(evidence.matched, source) if evidence is not None else None
    code = ExitCode.NO_DIAGNOSIS if facts is None or facts.empty else ExitCode.SYMPTOM if facts.errors else ExitCode.HEALTHY
    return LogOutput(
        text=render_log_summary(source, evidence, facts, read_errors, as_json=as_json),
        problems=log_problems(source, evidence, facts, read_errors),
        code=int(code),
    )


def run(source: str, as_json: bool) -> int:
    """Print the output (stdout ending in one newline, when there is any); the exit code."""
    output = log_command_output(source, as_json)
    for problem in output.problems:
        err.print(f"[red]error:[/] {escape(problem)}" if output.code == ExitCode.NO_DIAGNOSIS else f"note: {escape(problem)}",
                  highlight=False)
    if output.text:
        with reader_may_leave():
            sys.stdout.write(output.text if output.text.endswith("\n") else output.text + "\n")
    return output.code
