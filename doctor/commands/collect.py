"""``llm-doctor collect``: gather a bundle and write it, without analysing it."""

from __future__ import annotations

import sys

from doctor.bundle import dumps, save
from doctor.collection.collector import collect
from doctor.exit_codes import ExitCode, usable_evidence
from doctor.foundation.console import err, progress, reader_may_leave, stdout_json
from doctor.foundation.user_paths import is_stdout
from doctor.settings import RunSettings, lookup_targets


def run(settings: RunSettings) -> ExitCode:
    """0 with usable evidence; 2 without (the bundle is still written: its errors say why).
    ``-o -`` writes the bundle's JSON to stdout."""
    settings = lookup_targets(settings)
    bundle = settings.bundle
    assert settings.collect is not None and bundle is not None
    result = collect(settings.collect, progress)
    if is_stdout(bundle):  # ``-o -``: the bundle's JSON is the only thing on stdout
        with reader_may_leave():
            sys.stdout.write(stdout_json(dumps(result)) + "\n")
        err.print(f"wrote the bundle to stdout ({len(result.errors)} evidence error(s))")
    else:
        save(result, bundle)
        err.print(f"wrote {bundle} ({len(result.errors)} evidence error(s))")
    if result.interrupted:
        return ExitCode.INTERRUPTED
    if not usable_evidence(result):
        err.print("[red]no usable evidence:[/] no request succeeded and no log, /metrics or Prometheus data was read")
        return ExitCode.NO_DIAGNOSIS
    return ExitCode.HEALTHY
