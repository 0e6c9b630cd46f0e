"""The dependency directions the architecture rests on, checked on the import statements.

checks -> doctor.{check, evidence, derive, model}; reports -> doctor.model; doctor never
imports a check; renderers never import a probe or a check; checks never import a probe.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


RULES = [
    ("doctor", ("checks", "reports."), {"doctor/cli.py", "doctor/lab/demo.py"}),
    ("reports", ("checks", "doctor.probes", "doctor.collect", "doctor.lab"), set()),
    ("checks", ("doctor.probes", "doctor.collect", "doctor.lab", "reports"), set()),
]


@pytest.mark.parametrize("package, forbidden, exempt", RULES, ids=[r[0] for r in RULES])
def test_import_direction(package, forbidden, exempt):
    offenders = []
    for path in sorted((ROOT / package).rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel in exempt:
            continue
        bad = [m for m in imported_modules(path) if m.startswith(forbidden) or m in {f.rstrip(".") for f in forbidden}]
        offenders += [f"{rel} imports {m}" for m in bad]
    assert not offenders, "\n".join(offenders)
