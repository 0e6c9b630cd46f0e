"""``llm-doctor collect``: gather a bundle and write it, without analysing it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from doctor.bundle import dumps, save
from doctor.collect import collect
from doctor.config import load_config
from doctor.console import err, progress, reader_may_leave
from doctor.exit_codes import ExitCode, usable_evidence
from doctor.settings import build_collect_config, check_output_paths, require_evidence_source
from doctor.user_paths import is_stdout


def run(opts: dict[str, Any], bundle: Path) -> ExitCode:
    """0 with usable evidence; 2 without (the bundle is still written: its errors say why).
    ``-o -`` writes the bundle's JSON to stdout."""
    cfg = load_config(opts.get("config"))
    config = build_collect_config(opts, cfg, "collect")
    require_evidence_source(config, "collect")
    check_output_paths(bundle)
    result = collect(config, progress)
    if is_stdout(bundle):  # ``-o -``: the bundle's JSON is the only thing on stdout
        with reader_may_leave():
            sys.stdout.write(dumps(result) + "\n")
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
