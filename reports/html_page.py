"""The self-contained HTML report: jinja2 with autoescape, no network request, bundle embedded."""

from __future__ import annotations

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from doctor.bundle import EMBED_ID, embed_json
from doctor.model import Report
from doctor.serial import to_jsonable


def environment() -> Environment:
    return Environment(
        loader=PackageLoader("reports", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render_html(report: Report) -> str:
    template = environment().get_template("report.html.j2")
    return template.render(
        report=report,
        data=to_jsonable(report),
        bundle_json=embed_json(report.bundle),
        embed_id=EMBED_ID,
    )
