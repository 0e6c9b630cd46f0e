"""One parametrised test over every check fixture (ruff's "should emit" cases).

``fixtures/checks/<check-name>/<case>.json`` holds ``{"_why", "expect", "bundle", "settings"}``.
The case name says what must happen: ``fires-*``, ``quiet-*``, ``na-*``, ``missing-*``;
``expect`` pins the outcome and, for a finding, its severity, remediation setting and whether
users felt it (``felt``).

Beside each case, ``<case>.snap`` is the whole result (ruff's ``.snap``): outcome, message, and
for a finding its severity, ``"felt": false`` for a risk (felt, the default, is not written),
title, summary, remediation and evidence. A change to any of them
fails here until ``pytest tests/checks/test_checks.py --update-snapshots`` rewrites the snapshot, and
then it is a diff to review.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from doctor.bundle import from_dict
from doctor.checking.registry import load_registry
from doctor.checking.runner import run_check
from doctor.derive import Evidence
from doctor.foundation.serial import to_jsonable
from doctor.model import CheckResult, Outcome

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "checks"
CASES = sorted(FIXTURES.glob("*/*.json"))
PREFIX_OUTCOME = {
    "fires": Outcome.FINDING,
    "quiet": Outcome.PASS,
    "na": Outcome.NOT_APPLICABLE,
    "missing": Outcome.MISSING_EVIDENCE,
}


def readable(value: object) -> object:
    """Floats to 12 significant digits: ``0.4`` rather than ``0.4000000000000057``, which is
    arithmetic noise (and may differ by a last digit between platforms), not behaviour."""
    if isinstance(value, float):
        return float(f"{value:.12g}")
    if isinstance(value, dict):
        return {k: readable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [readable(v) for v in value]
    return value


def snapshot(result: CheckResult) -> str:
    """The result as its snapshot: everything a reader sees, nothing that varies by run (the duration).

    A finding's message is its summary, so it is written once."""
    doc: dict[str, object] = {"outcome": result.outcome.value}
    if result.finding is None:
        doc["message"] = result.message
    else:
        f = result.finding
        doc |= {"severity": f.severity.value, **({} if f.felt else {"felt": False}), "title": f.title,
                "summary": f.summary, "remediation": to_jsonable(f.remediation), "evidence": to_jsonable(f.evidence)}
    return json.dumps(readable(doc), indent=1, ensure_ascii=False) + "\n"


@pytest.mark.parametrize("case", CASES, ids=[f"{c.parent.name}/{c.stem}" for c in CASES])
def test_check_fixture(case: Path, update_snapshots: bool) -> None:
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
        if "felt" in expected:
            assert result.finding.felt is expected["felt"]
        for needle in expected.get("summary_contains", []):
            assert needle in result.finding.summary
        for needle in expected.get("summary_lacks", []):
            assert needle not in result.finding.summary
    snap, actual = case.with_suffix(".snap"), snapshot(result)
    if update_snapshots:
        if not snap.exists() or snap.read_text() != actual:
            snap.write_text(actual)
        return
    assert snap.exists(), f"{snap.relative_to(FIXTURES)} is missing: run `pytest tests/checks/test_checks.py --update-snapshots`"
    assert actual == snap.read_text(), f"{snap.relative_to(FIXTURES)} differs: review, then --update-snapshots"


def test_every_snapshot_has_its_case() -> None:
    orphans = [s.relative_to(FIXTURES) for s in FIXTURES.glob("*/*.snap") if not s.with_suffix(".json").exists()]
    assert not orphans, f"snapshots without a case (delete them): {orphans}"


def test_every_check_has_fires_quiet_and_not_applicable_fixtures() -> None:
    """Each check shows it fires, stays quiet, and says so when its evidence does not apply or is absent."""
    registry = load_registry(plugins=False)
    for spec in registry.checks:
        cases = {c.stem.split("-")[0] for c in (FIXTURES / spec.name).glob("*.json")}
        assert {"fires", "quiet"} <= cases, f"{spec.code} {spec.name} lacks fires-*/quiet-* fixtures"
        assert cases & {"na", "missing"}, f"{spec.code} {spec.name} lacks an na-* or missing-* fixture"
