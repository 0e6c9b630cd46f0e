"""Every public class of ``doctor/``, ``checks/`` and ``reports/`` says in a docstring what it holds
and why it exists.

A check names raw kinds and views as parameters (``Bundle``, ``StreamStats``, ``MetricsWindow``,
``LogFacts``...) and builds a ``Finding``; like Lighthouse's ``types/lhr``, these types are the
documentation of what there is to read. The rest (the check contract, sizing, the lab, the
renderers' parts) is read by whoever changes it, and a field list alone does not say why the class
is there. Found by walking the modules' syntax, so a class added without one fails here.

Public: a name without a leading ``_``, at module level or inside a class (importable as an
attribute, under a module-level ``if`` or ``try`` too); a class defined inside a function is
local and is not walked. No class is exempt: the ``TypedDict`` JSON shapes
(``doctor.sizing.sizing_json``) and the views' dataclasses are what a renderer or a script reads,
so they carry their own docstrings like every other class (a view's first paragraph is its
description in the report schema).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: The packages whose public classes must each have a docstring.
PACKAGES = ("doctor", "checks", "reports")

MODULES = sorted(path for package in PACKAGES for path in (ROOT / package).rglob("*.py"))


def public_classes(node: ast.AST, prefix: str = "") -> list[tuple[str, ast.ClassDef]]:
    """The public classes under ``node`` by dotted name, not looking inside functions (local classes)."""
    found: list[tuple[str, ast.ClassDef]] = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.ClassDef):
            if not child.name.startswith("_"):
                found += [(prefix + child.name, child), *public_classes(child, f"{prefix}{child.name}.")]
        elif not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            found += public_classes(child, prefix)
    return found


def undocumented(source: str) -> list[str]:
    """The public classes of a module's source that have no docstring."""
    return [name for name, node in public_classes(ast.parse(source)) if not ast.get_docstring(node)]


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_public_class_has_a_docstring(path: Path) -> None:
    missing = undocumented(path.read_text(encoding="utf-8"))
    assert not missing, f"say in a docstring what each holds and why it exists: {', '.join(missing)}"


def test_the_walk_covers_the_packages() -> None:
    # a moved package or a wrong root would make every case above pass on nothing
    assert {path.relative_to(ROOT).parts[0] for path in MODULES} == set(PACKAGES)


def test_the_walk_sees_a_class_without_one() -> None:
    source = 'class Seen:\n    x: int\n\n\nclass _Private:\n    pass\n\n\nclass Said:\n    """Why."""\n'
    assert undocumented(source) == ["Seen"]


def test_the_walk_sees_nested_and_switched_classes_but_not_local_ones() -> None:
    source = (
        'class Outer:\n    """Why."""\n\n    class Inner:\n        pass\n\n\n'
        'if True:\n    class Switched:\n        pass\nelse:\n    class Other:\n        pass\n\n\n'
        'def f():\n    class Local:\n        pass\n'
    )
    assert undocumented(source) == ["Outer.Inner", "Switched", "Other"]
