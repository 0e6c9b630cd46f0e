"""The types a check author reads first say what they hold and why: every public class of the
evidence bundle, of the derived views and of the report has a docstring.

A check names raw kinds and views as parameters (``Bundle``, ``StreamStats``, ``MetricsWindow``,
``LogFacts``...) and builds a ``Finding``; like Lighthouse's ``types/lhr``, these types are the
documentation of what there is to read. Found by walking the modules' syntax, so a class added
without one fails here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: The modules whose classes are the evidence, the views and the report checks and renderers read.
DOCUMENTED = sorted(
    [*(ROOT / "doctor" / "evidence").glob("*.py"), *(ROOT / "doctor" / "derive").glob("*.py"),
     ROOT / "doctor" / "vllm_metrics" / "views.py", ROOT / "doctor" / "vllm_log" / "parsed.py",
     ROOT / "doctor" / "sizing" / "sizing_json.py", ROOT / "doctor" / "model.py"])


def undocumented(source: str) -> list[str]:
    """The public top-level classes of a module's source that have no docstring."""
    return [node.name for node in ast.parse(source).body
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_") and not ast.get_docstring(node)]


@pytest.mark.parametrize("path", DOCUMENTED, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_public_class_has_a_docstring(path: Path) -> None:
    assert not undocumented(path.read_text(encoding="utf-8"))


def test_the_walk_sees_a_class_without_one() -> None:
    source = 'class Seen:\n    x: int\n\n\nclass _Private:\n    pass\n\n\nclass Said:\n    """Why."""\n'
    assert undocumented(source) == ["Seen"]
