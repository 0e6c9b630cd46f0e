"""The tree as a whole: lint, types, import layering, packaging, docstrings, docs, deployment artefacts."""
