"""``llm-doctor scaling``'s outputs: the autoscalers read (floor, ceiling, signals, scale-down,
status), the findings with the object and field each names, what was skipped or unreadable;
and its JSON document, whose ``findings`` are a diagnosis report's (same fields).

Reads the report's ``scalers`` view as its dataclass (``ScalingView``, through ``view``), as every
renderer reads views; the JSON document's ``scalers`` are that view's, written out again.
"""

from __future__ import annotations

import json

from rich.console import Console
from rich.padding import Padding
from rich.table import Table

from doctor.derive.view_json import view
from doctor.foundation.serial import to_jsonable
from doctor.model import Report, Severity
from doctor.scalers.model import Knob, Scaler, ScalerStatus, ScalingView, Signal
from reports.terminal import clean, fitted, grid, printer

_STYLE = {Severity.CRITICAL: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}

#: The JSON document's version: bump when a field changes meaning or goes away.
SCALING_REPORT_VERSION = 1


def _knob(knob: Knob | None) -> str:
    if knob is None:
        return "—"
    if knob.placeholder:
        return f"{knob.placeholder} (unknown)"
    return ("unset" if knob.value is None else str(knob.value)) + ("" if knob.explicit else " (default)")


def _signal(signal: Signal) -> str:
    what = signal.metric or signal.query or signal.trigger or signal.source or "?"
    target = _knob(signal.target) if signal.target else "—"
    return f"{what} {signal.target_type or ''} {target}".replace("  ", " ")


def _status(status: ScalerStatus | None) -> str:
    if status is None:
        return "—"
    flags = [f"{c.type}={c.status}" for c in status.conditions if c.status in ("False", "True")
             and c.type in ("ScalingActive", "ScalingLimited", "Ready", "Fallback")]
    return " ".join([f"{status.current}/{status.desired} replicas", *flags])


def scaler_rows(scalers: list[Scaler]) -> list[tuple[str, ...]]:
    """One row per scaler: object, floor, ceiling, signals, scale-down, status (current/desired)."""
    return [(s.label, _knob(s.floor), _knob(s.ceiling), "; ".join(_signal(x) for x in s.signals) or "—",
             _knob(s.scale_down_s), _status(s.status)) for s in scalers]


def scaling_read(report: Report) -> ScalingView:
    """The ``scalers`` view; one that does not read back is an empty view whose ``problems`` say why,
    so the terminal and the JSON document name the reason rather than only "no scaler"."""
    read, why = view(report, "scalers")
    return read if read is not None else ScalingView(problems=[why] if why else [])


def print_scaling(report: Report, console: Console, verbose: bool = False) -> None:
    """The terminal summary of ``llm-doctor scaling``."""
    say = printer(console)
    read = scaling_read(report)
    scalers, problems, skipped = read.scalers, read.problems, read.skipped
    findings = report.findings
    if not scalers:
        head = "[bold yellow]NO SCALER[/]  nothing could be judged"
    elif any(f.severity.rank >= Severity.WARNING.rank for f in findings):
        head = f"[bold red]SCALING[/]  {len(scalers)} autoscaler(s) read: {len(findings)} finding(s)"
    else:
        head = f"[bold green]SOUND[/]  {len(scalers)} autoscaler(s) read: no finding"
    say(head)
    if scalers:
        say(fitted(grid(("object", "floor", "ceiling", "signals", "scale-down s", "status"),
                        (tuple(clean(c) for c in row) for row in scaler_rows(scalers)), wrap=(0, 3)), console))
    if findings:
        say(f"\n[bold]Findings ({len(findings)})[/]")
        table = Table.grid(padding=(0, 1, 0, 0))
        table.add_column(no_wrap=True)
        table.add_column()
        for f in findings:
            r = f.remediation
            table.add_row(f"[{_STYLE[f.severity]}]{f.severity.value}[/]", f"{f.code} {clean(f.name)}: {clean(f.summary)}")
            table.add_row("", f"change [cyan]{clean(r.setting)}[/] -> [cyan]{clean(r.suggested)}[/]"
                              + (f" [dim]in {clean(r.where)}[/]" if r.where else ""))
            if verbose:
                table.add_row("", f"[dim]verify: {clean(r.verify)}[/]")
        say(Padding(table, (0, 0, 0, 2)))
    for problem in problems:
        say(f"[red]not read:[/] {clean(problem)}")
    if skipped and (verbose or not scalers):
        say(f"[dim]skipped (not an autoscaler): {clean('; '.join(skipped))}[/]")
    elif skipped:
        say(f"[dim]{len(skipped)} object(s) of other kinds skipped (-v lists them)[/]")
    for result in report.results:
        if result.outcome.value == "error":
            say(f"[red]check error[/] {result.code} {clean(result.name)}: {clean(result.message)}")


def render_scaling_json(report: Report) -> str:
    """The JSON document: the scalers read, what was not, and the findings as a diagnosis report has them."""
    read = scaling_read(report)
    document = {
        "kind": "llm-doctor-scaling",
        "report_version": SCALING_REPORT_VERSION,
        "tool_version": report.tool_version,
        "generated_at": report.generated_at,
        "scalers": to_jsonable(read.scalers),
        "skipped": read.skipped,
        "problems": read.problems,
        "findings": to_jsonable(report.findings),
        "results": to_jsonable(report.results),
    }
    return json.dumps(document, indent=1, ensure_ascii=False) + "\n"
