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
from reports.terminal import fitted, stdout_console

#: The narrowest the "needs" and "options" columns of ``llm-doctor checks`` fold to: the longest
#: evidence name (metrics_window) stays whole.
FOLDED = 14


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
        # Codes, names and symptoms are what people grep for: never wrapped or shortened.
        table = Table(title=f"{len(registry.checks)} checks")
        for column in ("code", "name", "symptom"):
            table.add_column(column, no_wrap=True)
        for column in ("needs", "options"):
            table.add_column(column, overflow="fold")
        for s in registry.checks:
            table.add_row(s.code, s.name, s.symptom.value, "\n".join(s.requires),
                          "\n".join(f"{k}={v}" for k, v in s.options.items()))
        console = stdout_console()
        # the needs and options fold (at FOLDED at the narrowest), so the console's width (COLUMNS
        # when piped) holds the table once the identifiers fit whole; wider only when they do not
        identifiers = sum(max(len(v) for v in (head, *values)) for head, values in (
            ("code", [s.code for s in registry.checks]), ("name", [s.name for s in registry.checks]),
            ("symptom", [s.symptom.value for s in registry.checks])))
        narrowest = identifiers + 2 * FOLDED + 3 * 5 + 1  # each column's padding and its left border, the right border
        table.width = min(fitted(table, console).width or console.width, max(console.width, narrowest))
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
