"""Write a check fixture case: ``python -m tests.support.write_fixture`` is not a CLI; call ``write_case``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from doctor.evidence import Bundle
from doctor.serial import to_jsonable

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "checks"


def write_case(check_name: str, case: str, bundle: Bundle, *, why: str, expect: dict[str, Any] | None = None,
               settings: dict[str, dict[str, Any]] | None = None) -> Path:
    path = FIXTURES / check_name / f"{case}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"_why": why, "expect": expect or {}, "settings": settings or {}, "bundle": to_jsonable(bundle)}
    path.write_text(json.dumps(doc, indent=1) + "\n")
    return path
