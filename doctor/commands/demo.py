"""``llm-doctor demo``: a lab scenario, diagnosed exactly as ``llm-doctor diagnose`` would.

The one module outside ``doctor.lab`` that imports the lab (``tests/project/test_layering.py``): the
lab hands over flags (``lab_overrides``), resolved as ``diagnose``'s (``doctor.settings.with_lab``), and
the ``diagnose`` command body does the rest.
"""

from __future__ import annotations

import sys
from pathlib import Path

from doctor.commands import diagnose
from doctor.exit_codes import ExitCode
from doctor.foundation.console import progress, reader_may_leave
from doctor.foundation.errors import UsageError
from doctor.lab.demo import lab_overrides, list_scenarios, scenario_named
from doctor.lab.scenarios import DEFAULT_SCENARIO
from doctor.settings import RunSettings, with_lab


def run(settings: RunSettings, scenario: str | None, out_dir: Path, *, list_only: bool) -> ExitCode:
    """Start the scenario's lab, diagnose it, write report.html and report.json under ``out_dir``.
    The outputs were checked before the lab starts (``doctor.settings.resolve``); the lab's targets
    join them once it runs (``doctor.settings.with_lab``)."""
    if list_only:
        with reader_may_leave():
            sys.stdout.write(list_scenarios())
        return ExitCode.HEALTHY
    spec = scenario_named(scenario or DEFAULT_SCENARIO)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a file of that name, a read-only place: before the lab starts
        raise UsageError(f"--out-dir {out_dir}: cannot be used as a folder ({exc.strerror or exc})") from None
    progress(f"scenario {spec.name}: {spec.description}")
    with lab_overrides(spec) as overrides:
        return diagnose.run(with_lab(settings, overrides, out_dir))
