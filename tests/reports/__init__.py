"""The renderers (``reports/``): HTML, JSON, Markdown, terminal, exported metrics."""
