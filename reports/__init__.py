"""Renderers: a ``doctor.model.Report`` in, text out. They never import a check or a probe.

- ``json_doc``  the versioned JSON document (schema in ``schema/report.schema.json``);
- ``html_page`` one self-contained HTML file, the bundle embedded for ``analyze report.html``;
- ``markdown``  a short summary to paste into a ticket or chat;
- ``terminal``  the rich summary printed by the CLI;
- ``charts``    the inline SVG charts of the HTML page; ``summary`` what all of them word alike.
- ``stream_summary`` and ``log_summary`` what ``llm-doctor probe`` and ``llm-doctor log`` print
  (they get the evidence and its derived view, not a report).
- ``prometheus_export`` the report as the ``llm_doctor_*`` metric families (textfile, Pushgateway);
  ``comparison`` what ``llm-doctor compare`` prints (it gets a ``doctor.compare.Comparison``).
"""

from __future__ import annotations

from pathlib import Path

from doctor.bundle import write_file
from doctor.model import Report
from reports.html_page import render_html
from reports.json_doc import render_json
from reports.markdown import render_markdown


def write_outputs(
    report: Report,
    *,
    json_path: Path | None = None,
    html_path: Path | None = None,
    md_path: Path | None = None,
) -> list[Path]:
    """Write the requested files, creating missing folders; returns the paths written.

    A path that cannot be written raises ``UsageError`` naming it (``doctor.bundle.write_file``):
    it came from the user's ``--json``/``--html``/``--md`` flag and deserves one line, not a traceback.
    """
    written: list[Path] = []
    full = next((p.name for p in (html_path, json_path) if p is not None), None)  # what the summary points at
    renders = ((json_path, render_json), (html_path, render_html), (md_path, lambda r: render_markdown(r, full)))
    for path, render in renders:
        if path is not None:
            write_file(path, render(report).encode("utf-8"))
            written.append(path)
    return written


__all__ = ["render_html", "render_json", "render_markdown", "write_outputs"]
