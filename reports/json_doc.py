"""The JSON report: a versioned document whose ``verdict`` and ``findings`` fields are a stable contract.

Scheduled checks and scripts read ``verdict.symptom``, ``verdict.summary``,
``verdict.primary_remediation.{setting,suggested,verify}`` and ``findings[]``; the published
schema (``reports/schema/report.schema.json``) pins them. The evidence bundle rides along so
``llm-doctor analyze report.json`` re-analyses it.
"""

from __future__ import annotations

import json
from typing import Any

from doctor.model import Report
from doctor.serial import to_jsonable

SCHEMA_ID = "https://llm-doctor.dev/schema/report-1.json"


def report_dict(report: Report) -> dict[str, Any]:
    data = to_jsonable(report)
    data["$schema"] = SCHEMA_ID
    return data


def render_json(report: Report) -> str:
    return json.dumps(report_dict(report), indent=1, ensure_ascii=False) + "\n"
