"""A checks package for runner tests: one healthy check, one that raises, one needing absent evidence."""
