"""``llm-doctor compare BASE CURRENT``: two saved runs side by side, gated on exit codes.

Each side is read as ``analyze`` reads it (a bundle, or a JSON or HTML report embedding one,
re-analysed with its recorded settings), so both are judged by this version's checks.
Exit 2 for unlike runs (unless ``--allow-unlike``), else ``doctor.runs.compare_runs.decision_code``: 1
for a regression, 2 when the runs are too small to tell a large shift from noise, else 0.
"""

from __future__ import annotations

import sys
from pathlib import Path

from doctor.commands.analyze import reanalyse
from doctor.exit_codes import ExitCode
from doctor.foundation.console import reader_may_leave
from doctor.runs.compare_runs import Comparison, compare_reports, decision_code
from doctor.settings import RunSettings
from reports.comparison import comparison_json, print_comparison, print_unlike
from reports.terminal import stdout_console


def run(settings: RunSettings, base: Path, current: Path, *, allow_unlike: bool, as_json: bool = False) -> ExitCode:
    """The thresholds were checked (``doctor.settings.resolve``) and both sides are read before
    anything is printed: a bad value or an unreadable side is one error line."""
    base_report, _ = reanalyse(base, settings, None)
    current_report, _ = reanalyse(current, settings, None)
    practical = settings.practical
    comparison = compare_reports(base_report, current_report, practical)
    refused = bool(comparison.unlike) and not allow_unlike
    with reader_may_leave():
        if as_json:
            sys.stdout.write(comparison_json(comparison, refused=refused))
        else:
            console = stdout_console()
            if comparison.unlike:
                print_unlike(comparison, console, refused=refused)
            if not refused:
                print_comparison(comparison, console)
    return comparison_code(comparison, refused=refused)


def comparison_code(comparison: Comparison, *, refused: bool) -> ExitCode:
    """2 refused (unlike runs), else the comparison's own code."""
    return ExitCode.NO_DIAGNOSIS if refused else decision_code(comparison)
