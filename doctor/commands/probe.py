"""``llm-doctor probe``: only the streaming probe, and its per-path statistics."""

from __future__ import annotations

import json
import sys

from rich.markup import escape

from doctor.bundle import save
from doctor.collection.collector import collect
from doctor.derive.missing import Missing
from doctor.derive.stream_stats import derive_stream_stats
from doctor.exit_codes import ExitCode
from doctor.foundation.console import err, progress, reader_may_leave
from doctor.settings import RunSettings, lookup_targets
from reports.stream_summary import print_stream_summary, stream_summary_json
from reports.terminal import stdout_console


def run(settings: RunSettings, as_json: bool) -> ExitCode:
    """0 when a request succeeded on some path; 2 when none did (the errors are printed). The plan
    has no log, Prometheus, host, GPU or /metrics step (``doctor.settings.resolve``)."""
    settings = lookup_targets(settings)
    assert settings.collect is not None
    bundle = settings.bundle
    result = collect(settings.collect, progress)
    if bundle:
        save(result, bundle)
        err.print(f"wrote {bundle}")
    try:
        stats = derive_stream_stats(result)
    except Missing as exc:
        for e in result.errors:
            err.print(f"[red]evidence error[/] {escape(e.source)} ({escape(e.kind)}): {escape(e.message)}", highlight=False)
        err.print(f"[red]no stream statistics:[/] {escape(str(exc))}")
        return ExitCode.INTERRUPTED if result.interrupted else ExitCode.NO_DIAGNOSIS
    with reader_may_leave():
        if as_json:
            sys.stdout.write(json.dumps(stream_summary_json(stats, result), indent=1) + "\n")
        else:
            print_stream_summary(stats, result, stdout_console())
    if result.interrupted:
        return ExitCode.INTERRUPTED
    ok = any(p.n_ok for p in stats.paths.values())
    return ExitCode.HEALTHY if ok else ExitCode.NO_DIAGNOSIS
