"""``llm-doctor scaling``'s outputs: the autoscalers read (floor, ceiling, signals, scale-down,
status), the findings with the object and field each names, what was skipped or unreadable;
and its JSON document, whose ``findings`` are a diagnosis report's (same fields).

Reads the report's ``scalers`` view as JSON, as every renderer reads views.
"""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.padding import Padding
from rich.table import Table

from doctor.foundation.serial import to_jsonable
from doctor.model import Report, Severity
from reports.terminal import clean, fitted, grid, printer

_STYLE = {Severity.CRITICAL: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}

#: The JSON document's version: bump when a field changes meaning or goes away.
SCALING_REPORT_VERSION = 1


def _knob(knob: Any) -> str:
    if not isinstance(knob, dict):
        return "—"
    if knob.get("placeholder"):
        return f"{knob['placeholder']} (unknown)"
    value = knob.get("value")
    return ("unset" if value is None else str(value)) + ("" if knob.get("explicit", True) else " (default)")


def _signal(signal: dict[str, Any]) -> str:
    what = signal.get("metric") or signal.get("query") or signal.get("trigger") or signal.get("source") or "?"
    target = _knob(signal.get("target")) if signal.get("target") else "—"
    return f"{what} {signal.get('target_type') or ''} {target}".replace("  ", " ")


def _status(status: Any) -> str:
    if not isinstance(status, dict):
        return "—"
    flags = [f"{c['type']}={c['status']}" for c in status.get("conditions", []) if c.get("status") in ("False", "True")
             and c.get("type") in ("ScalingActive", "ScalingLimited", "Ready", "Fallback")]
    return " ".join([f"{status.get('current')}/{status.get('desired')} replicas", *flags])


def scaler_rows(scalers: list[dict[str, Any]]) -> list[tuple[str, ...]]:
    """One row per scaler: object, floor, ceiling, signals, scale-down, status (current/desired)."""
    return [(f"{s['kind']} {s['namespace'] + '/' if s.get('namespace') else ''}{s['name']}", _knob(s.get("floor")),
             _knob(s.get("ceiling")), "; ".join(_signal(x) for x in s.get("signals", [])) or "—",
             _knob(s.get("scale_down_s")), _status(s.get("status"))) for s in scalers]


def print_scaling(report: Report, console: Console, verbose: bool = False) -> None:
    """The terminal summary of ``llm-doctor scaling``."""
    say = printer(console)
    data = report.views.get("scalers") or {}
    scalers = data.get("scalers") or []
    problems, skipped = data.get("problems") or [], data.get("skipped") or []
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
    data = report.views.get("scalers") or {}
    document = {
        "kind": "llm-doctor-scaling",
        "report_version": SCALING_REPORT_VERSION,
        "tool_version": report.tool_version,
        "generated_at": report.generated_at,
        "scalers": data.get("scalers") or [],
        "skipped": data.get("skipped") or [],
        "problems": data.get("problems") or [],
        "findings": to_jsonable(report.findings),
        "results": to_jsonable(report.results),
    }
    return json.dumps(document, indent=1, ensure_ascii=False) + "\n"
