"""The JSON report: a versioned document whose ``verdict`` and ``findings`` fields are a stable contract.

Scheduled checks and scripts read ``verdict.symptom``, ``verdict.summary``,
``verdict.primary_remediation.{setting,suggested,verify}`` and ``findings[]``; the published
schema (``reports/schema/report.schema.json``, shipped in the package) pins them. The evidence
bundle rides along so ``llm-doctor analyze report.json`` re-analyses it.
"""

from __future__ import annotations

import json
from functools import cache
from importlib.resources import files
from typing import Any

from doctor.foundation.serial import to_jsonable
from doctor.model import Report

SCHEMA_ID = "https://llm-doctor.dev/schema/report-1.json"


@cache
def report_schema() -> dict[str, Any]:
    """The published JSON Schema of the report (draft 2020-12), read from the installed package."""
    text = files("reports").joinpath("schema").joinpath("report.schema.json").read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def report_dict(report: Report) -> dict[str, Any]:
    data = {"$schema": SCHEMA_ID}
    data.update(to_jsonable(report))
    return data


def render_json(report: Report) -> str:
    """The JSON report (see the module docstring for its stable fields)."""
    return json.dumps(report_dict(report), indent=1, ensure_ascii=False) + "\n"
