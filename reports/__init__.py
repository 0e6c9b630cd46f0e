"""Renderers: a ``doctor.model.Report`` in, text out. They never import a check or a probe.

- ``json_doc``  the versioned JSON document (schema in ``schema/report.schema.json``);
- ``html_page`` one self-contained HTML file, the bundle embedded for ``analyze report.html``;
- ``markdown``  a short summary to paste into a ticket or chat;
- ``terminal``  the rich summary printed by the CLI;
- ``charts``    the per-request SVG charts of the HTML page (``line_charts`` the lines over time or
  sweep levels, ``svg_parts`` what they all draw with); ``summary`` what all of them word alike.
- ``stream_summary`` and ``log_summary`` what ``llm-doctor probe`` and ``llm-doctor log`` print
  (they get the evidence and its derived view, not a report).
- ``prometheus_export`` the report as the ``llm_doctor_*`` metric families (textfile, Pushgateway);
  ``comparison`` what ``llm-doctor compare`` prints (it gets a ``doctor.runs.compare_runs.Comparison``).
"""

from __future__ import annotations

from reports.html_page import render_html
from reports.json_doc import render_json
from reports.markdown import render_markdown

__all__ = ["render_html", "render_json", "render_markdown"]
