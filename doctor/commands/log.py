"""``llm-doctor log PATH [--json]``: read a vLLM log, parse it, print what was found.

Exit 1 when the last startup logged an error (a symptom), 2 when the log could not be read or
holds no vLLM line (no diagnosis), else 0.
"""

from __future__ import annotations

import sys

from doctor.engines.logs import parse_engine_log
from doctor.exit_codes import ExitCode
from doctor.probes.logfile import read_log
from reports.log_summary import render_log_summary


def log_command_output(source: str, as_json: bool) -> tuple[str, int]:
    """The text ``llm-doctor log`` prints for ``source`` and its exit code."""
    evidence, read_errors = read_log(source)
    facts = parse_engine_log(evidence.matched, source) if evidence is not None else None
    code = ExitCode.NO_DIAGNOSIS if facts is None or facts.empty else ExitCode.SYMPTOM if facts.errors else ExitCode.HEALTHY
    return render_log_summary(source, evidence, facts, read_errors, as_json=as_json), int(code)


def run(source: str, as_json: bool) -> int:
    """Print the output, ending in one newline; the exit code."""
    text, code = log_command_output(source, as_json)
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return code
