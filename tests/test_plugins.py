"""Third-party checks load from the ``llm_doctor.checks`` entry-point group; a broken one is a warning."""

from __future__ import annotations

import sys
import textwrap

from doctor.registry import load_registry

PLUGIN = '''
"""
What it detects:
    A third-party condition.
Why it matters:
    Plugins extend the catalogue without editing it.
Evidence:
    run.
Remediation:
    None.
Example:
    Always passes.
"""
from doctor.check import Pass, check
from doctor.model import SymptomClass


@check(code="XT001", name="third-party-sample", symptom=SymptomClass.GENERAL, cause="config")
def sample(run):
    return Pass("fine")
'''


def install_fake_distribution(tmp_path, monkeypatch, entry_points: str) -> None:
    (tmp_path / "acme_checks.py").write_text(textwrap.dedent(PLUGIN))
    dist = tmp_path / "acme_checks-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-checks\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[llm_doctor.checks]\n{entry_points}\n")
    monkeypatch.syspath_prepend(str(tmp_path))


def test_entry_point_module_adds_its_checks(tmp_path, monkeypatch):
    install_fake_distribution(tmp_path, monkeypatch, "acme = acme_checks")
    registry = load_registry("tests.support.sample_checks")
    spec = registry.find("XT001")
    assert spec is not None and spec.origin == "acme-checks"
    assert not registry.warnings


def test_broken_entry_point_is_a_warning_not_a_crash(tmp_path, monkeypatch):
    install_fake_distribution(tmp_path, monkeypatch, "acme = acme_checks_missing_module")
    registry = load_registry("tests.support.sample_checks")
    assert any("acme" in w and "failed to load" in w for w in registry.warnings)
    assert registry.find("TS001") is not None
    sys.modules.pop("acme_checks", None)
