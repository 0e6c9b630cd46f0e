"""``--baseline DIR`` (``diagnose``, ``watch``): each run judged against its own place's last healthy run.

"Within budget" is a local number: London's latency says nothing about Mumbai's, and a run
from another client location or at another concurrency moves every percentile. So the folder
keeps one baseline per ``doctor.runs.compare_runs.PLACE_AND_SHAPE`` (provider, region, client location,
route, request shape, concurrency, scenario), named by ``baseline_key``, and a run is compared
only with its own. The baseline is the latest run that was healthy (exit 0) and not itself a
regression against the one before, so a slow drift cannot ratchet it; after a change that is
accepted, delete the file and the next healthy run becomes the baseline. What differs besides
the place and the shape (model, revision, engine version, config) is printed, not refused: that
is the change a baseline is there to watch.

The comparison is ``compare``'s, rule and exit code alike (``doctor.runs.compare_runs.decision_code``,
thresholds from ``[compare]`` of the config file): a run too small to tell a large shift from
noise is not kept as the baseline and exits 2, never passes as "no regression".
"""

from __future__ import annotations

import sys
from pathlib import Path

from doctor.bundle import write_file
from doctor.commands.analyze import reanalyse
from doctor.exit_codes import ExitCode, worst_code
from doctor.foundation.console import err, note, warn
from doctor.foundation.errors import DoctorError
from doctor.model import Report
from doctor.runs.compare_runs import Comparison, baseline_key, compare_reports, decision_code
from doctor.settings import RunSettings
from reports.comparison import print_comparison, print_unlike
from reports.json_doc import render_json
from reports.terminal import stdout_console


def baseline_path(folder: Path, report: Report) -> Path:
    """Where this run's place and shape keep their baseline."""
    return folder / f"{baseline_key(report.bundle.run)}.json"


def against_baseline(report: Report, code: ExitCode, folder: Path, settings: RunSettings) -> ExitCode:
    """Compare ``report`` with its baseline (printed on stderr, laid out as stdout would be), keep
    it as the new one when it is healthy and the comparison decided no regression, and return the
    exit code: the worse of ``code`` and the comparison's."""
    path = baseline_path(folder, report)
    comparison: Comparison | None = None
    if path.exists():
        try:
            base, _ = reanalyse(path, settings, report.bundle.run.region, flags=False)
        except DoctorError as exc:  # a damaged baseline costs the comparison, not the run
            warn(f"baseline {path} unreadable ({exc}); the next healthy run replaces it")
        else:
            comparison = compare_reports(base, report, settings.practical)
            err.print(f"against the baseline {path}:")
            console = stdout_console(sys.stderr)
            if comparison.unlike:
                print_unlike(comparison, console, refused=False, head="Changed since the baseline")
            print_comparison(comparison, console)
    else:
        note(f"no baseline yet for this region and request shape ({path.name})")
    compared = ExitCode.HEALTHY if comparison is None else decision_code(comparison)
    if code is ExitCode.HEALTHY and compared is ExitCode.HEALTHY and not report.bundle.interrupted:
        write_file(path, render_json(report).encode("utf-8"))
        err.print(f"baseline {path} updated")
    return worst_code([code, compared])
