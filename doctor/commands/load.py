"""``llm-doctor load --scenario single|server|offline``: a load test in MLPerf's terms, diagnosed.

The run is a ``diagnose`` of one path under the scenario's load (``doctor.load_settings``):
collected into a bundle, read back and analysed by every check through ``doctor.pipeline``, with
the engine's /metrics scraped over it. The scenario's own numbers (``doctor.derive.load_summary``)
go beside the report: in the terminal, as the JSON's ``summary`` and as a section of the HTML.
Ctrl-C or SIGTERM stops sending at once (``doctor.signals``) and the partial report is still written.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from doctor import pipeline
from doctor.bundle import write_file
from doctor.config import FileConfig
from doctor.console import err, progress
from doctor.derive.load_summary import LoadSummary, load_summary
from doctor.derive.missing import Missing
from doctor.exit_codes import ExitCode, exit_code_for
from doctor.load_settings import build_load_config, build_price
from doctor.settings import build_analyze_options, check_output_options, check_output_paths, checked_registry
from reports.html_page import render_html
from reports.load_report import load_dict, load_rows, print_load
from reports.terminal import print_report, stdout_console


def run(opts: dict[str, Any], cfg: FileConfig) -> ExitCode:
    """The report's exit code (130 when interrupted); every flag checked before anything is sent."""
    config = build_load_config(opts, cfg, "load")
    fail_on = check_output_options(opts, cfg)
    check_output_paths(opts.get("json"), opts.get("html"))
    price = build_price(opts)
    analyze_opts = build_analyze_options(opts, cfg, config.run_fields.get("region"))
    config.budgets = analyze_opts.budgets
    registry = checked_registry(analyze_opts)
    report = pipeline.diagnose(config, analyze_opts, registry, progress=progress)
    summary: LoadSummary | None = None
    missing = None
    try:
        summary = load_summary(report.bundle, analyze_opts.budgets, price)
    except Missing as exc:
        missing = str(exc)
    document = json.dumps(load_dict(report, summary, missing), indent=1, ensure_ascii=False) + "\n"
    if opts.get("json"):
        write_file(opts["json"], document.encode("utf-8"))
        err.print(f"wrote {opts['json']}")
    if opts.get("html"):
        title = f"Load: {config.scenario} scenario" + (f" on the {summary.path} path" if summary else "")
        write_file(opts["html"], render_html(report, (title, load_rows(summary) if summary else [("summary", missing or "")])).encode("utf-8"))
        err.print(f"wrote {opts['html']}")
    if (opts.get("format") or "text") == "json":
        sys.stdout.write(document)
    else:
        console = stdout_console()
        print_load(summary, missing, console)
        print_report(report, console, verbose=bool(opts.get("verbose")))
    if report.bundle.interrupted:
        return ExitCode.INTERRUPTED
    return exit_code_for(report, fail_on)
