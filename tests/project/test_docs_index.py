"""``docs/README.md`` indexes every document in ``docs/``, and the top-level README links the index,
so a document added to ``docs/`` is never linked from nowhere (``docs/lab.md`` once was)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def linked(markdown: Path) -> set[str]:
    """The relative ``.md`` targets of a document's links."""
    return set(re.findall(r"\]\(([^)#\s]+\.md)\)", markdown.read_text(encoding="utf-8")))


def test_the_index_links_every_document_and_only_documents_that_exist() -> None:
    documents = {p.name for p in DOCS.glob("*.md")} - {"README.md"}
    index = {target for target in linked(DOCS / "README.md") if "/" not in target}
    assert index == documents


def test_the_readme_links_the_index() -> None:
    assert "docs/README.md" in linked(ROOT / "README.md")
