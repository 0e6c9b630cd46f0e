"""One parametrised test over every check fixture (ruff's "should emit" cases).

``fixtures/checks/<check-name>/<case>.json`` holds ``{"_why", "expect", "bundle", "settings"}``.
The case name says what must happen: ``fires-*``, ``quiet-*``, ``na-*``, ``missing-*``;
``expect`` pins the outcome and, for a finding, its severity and remediation setting.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from doctor.bundle import from_dict
from doctor.derive import Evidence
from doctor.model import Outcome
from doctor.registry import load_registry
from doctor.runner import run_check

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "checks"
CASES = sorted(FIXTURES.glob("*/*.json"))
PREFIX_OUTCOME = {
    "fires": Outcome.FINDING,
    "quiet": Outcome.PASS,
    "na": Outcome.NOT_APPLICABLE,
    "missing": Outcome.MISSING_EVIDENCE,
}


@pytest.mark.parametrize("case", CASES, ids=[f"{c.parent.name}/{c.stem}" for c in CASES])
def test_check_fixture(case: Path) -> None:
    data = json.loads(case.read_text())
    spec = load_registry(plugins=False).find(case.parent.name)
    assert spec is not None, f"fixture directory {case.parent.name} names no check"
    result = run_check(spec, Evidence(from_dict(data["bundle"], str(case))), data.get("settings", {}))
    expected = data.get("expect", {})
    outcome = Outcome(expected.get("outcome", PREFIX_OUTCOME[case.stem.split("-")[0]].value))
    assert result.outcome is outcome, result.message
    if outcome is Outcome.FINDING:
        assert result.finding is not None
        if "severity" in expected:
            assert result.finding.severity.value == expected["severity"]
        if "setting" in expected:
            assert result.finding.remediation.setting == expected["setting"]
        for needle in expected.get("summary_contains", []):
            assert needle in result.finding.summary


def test_every_check_has_fires_quiet_and_not_applicable_fixtures() -> None:
    """Each check shows it fires, stays quiet, and says so when its evidence does not apply or is absent."""
    registry = load_registry(plugins=False)
    for spec in registry.checks:
        cases = {c.stem.split("-")[0] for c in (FIXTURES / spec.name).glob("*.json")}
        assert {"fires", "quiet"} <= cases, f"{spec.code} {spec.name} lacks fires-*/quiet-* fixtures"
        assert cases & {"na", "missing"}, f"{spec.code} {spec.name} lacks an na-* or missing-* fixture"
