"""``llm-doctor checks`` and ``llm-doctor explain``: the check catalogue and one check's documentation."""

from __future__ import annotations

import json
import sys

from rich.table import Table

from doctor.checking.contract import DOC_HEADINGS
from doctor.checking.registry import CATALOGUE_HINT, load_registry
from doctor.exit_codes import ExitCode
from doctor.foundation.console import reader_may_leave, warn
from doctor.foundation.errors import UsageError
from reports.terminal import stdout_console

#: The narrowest the options column gets (a long option's name may fold there, never its value).
OPTIONS_NARROWEST = 14

#: Each of the table's five columns pads one space either side behind its left border; one more for the right.
BORDERS = 5 * 3 + 1


def option_lines(options: dict[str, object], width: int) -> str:
    """A check's options, one ``name=value`` a line; one wider than ``width`` breaks after its "=",
    its value on the next line, indented: a value is never split mid-number."""
    lines: list[str] = []
    for name, value in options.items():
        pair = f"{name}={value}"
        lines += [pair] if len(pair) <= width else [f"{name}=", f"  {value}"]
    return "\n".join(lines)


def list_checks(as_json: bool) -> ExitCode:
    """Every check: code, name, symptom class, the evidence it needs, its options."""
    registry = load_registry()
    if as_json:
        rows = [
            {"code": s.code, "name": s.name, "symptom": s.symptom.value, "cause": s.cause.value, "requires": list(s.requires),
             "optional": list(s.optional), "options": s.options, "option_docs": s.option_docs, "title": s.title,
             "origin": s.origin}
            for s in registry.checks
        ]
        with reader_may_leave():
            sys.stdout.write(json.dumps(rows, indent=1) + "\n")
    else:
        # Codes, names and symptoms are what people grep for: never wrapped or shortened; nor is an
        # evidence name. The options take what COLUMNS leaves, down to OPTIONS_NARROWEST.
        checks = registry.checks
        console = stdout_console()
        whole = [max(len(head), *(len(v) for v in values)) for head, values in (
            ("code", [s.code for s in checks]), ("name", [s.name for s in checks]),
            ("symptom", [s.symptom.value for s in checks]), ("needs", [r for s in checks for r in s.requires]))]
        widest = max((len(f"{k}={v}") for s in checks for k, v in s.options.items()), default=len("options"))
        options_width = min(max(console.width - sum(whole) - BORDERS, OPTIONS_NARROWEST), widest)
        # wider than COLUMNS only where the identifiers and OPTIONS_NARROWEST would not fit
        table = Table(title=f"{len(checks)} checks", width=sum(whole) + options_width + BORDERS)
        for column, width in zip(("code", "name", "symptom", "needs"), whole, strict=True):
            table.add_column(column, no_wrap=True, min_width=width)
        table.add_column("options", overflow="fold", width=options_width)
        for s in checks:
            table.add_row(s.code, s.name, s.symptom.value, "\n".join(s.requires), option_lines(s.options, options_width))
        with reader_may_leave():
            console.print(table, crop=False)
    for w in registry.warnings:
        warn(w)
    return ExitCode.HEALTHY


def explain(check: str) -> ExitCode:
    """The check's docstring sections in ``DOC_HEADINGS`` order, then each option: its default and meaning."""
    spec = load_registry().find(check)
    if spec is None:
        raise UsageError(f"no check {check!r}; {CATALOGUE_HINT}")
    out = [f"{spec.code} {spec.name} ({spec.symptom.value})", ""]
    for heading in DOC_HEADINGS:
        out += [f"## {heading}", spec.doc.get(heading, "(not documented)"), ""]
    described = spec.option_docs
    options = [f"  {spec.code}.{k} = {v!r}: {described.get(k, '(not documented)')}" for k, v in spec.options.items()]
    out += ["## Options", *(options or ["(none)"]), ""]
    with reader_may_leave():
        sys.stdout.write("\n".join(out))
    return ExitCode.HEALTHY
