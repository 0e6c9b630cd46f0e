"""Third-party checks load from the ``llm_doctor.checks`` entry-point group; a broken one is a warning."""

from __future__ import annotations

import json
import sys
import textwrap

import pytest
from typer.testing import CliRunner

from doctor.checking.registry import load_registry
from doctor.cli import app
from doctor.foundation.errors import UsageError

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
from doctor.checking.contract import Pass, check
from doctor.model import SymptomClass


@check(code="XT001", name="third-party-sample", symptom=SymptomClass.GENERAL, cause="config")
def sample(run):
    return Pass("fine")
'''


def install_fake_distribution(tmp_path, monkeypatch, entry_points: str, plugin: str = PLUGIN) -> None:
    (tmp_path / "acme_checks.py").write_text(textwrap.dedent(plugin))
    sys.modules.pop("acme_checks", None)  # each test installs its own version of the module
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


def test_plugin_with_an_unknown_cause_is_a_warning_not_a_crash(tmp_path, monkeypatch):
    install_fake_distribution(tmp_path, monkeypatch, "acme = acme_checks", PLUGIN.replace('cause="config"', 'cause="vibes"'))
    registry = load_registry("tests.support.sample_checks")
    assert registry.find("XT001") is None
    assert any("acme" in w and "unknown cause 'vibes'" in w for w in registry.warnings)
    assert registry.find("TS001") is not None


def _clashing(code: str, name: str) -> str:
    """The sample plugin plus a second check claiming ``code`` and ``name``."""
    return PLUGIN + f'''

@check(code="{code}", name="{name}", symptom=SymptomClass.GENERAL, cause="config")
def clash(run):
    return Pass("shadow")
'''


def test_plugin_reusing_a_code_is_dropped_with_a_warning(tmp_path, monkeypatch):
    install_fake_distribution(tmp_path, monkeypatch, "acme = acme_checks", _clashing("TS001", "acme-shadow"))
    registry = load_registry("tests.support.sample_checks")
    assert registry.find("TS001").origin == "builtin"
    assert registry.find("acme-shadow") is None
    assert registry.find("XT001") is not None  # the plugin's other checks still load
    assert any("'TS001'" in w and "dropped" in w for w in registry.warnings)


def test_plugin_reusing_a_name_is_dropped_with_a_warning(tmp_path, monkeypatch):
    install_fake_distribution(tmp_path, monkeypatch, "acme = acme_checks", _clashing("XT002", "sample-fires-on-success"))
    registry = load_registry("tests.support.sample_checks")
    assert registry.find("XT002") is None and registry.find("sample-fires-on-success").code == "TS001"
    assert any("'sample-fires-on-success'" in w for w in registry.warnings)


def test_checks_command_lists_a_clashing_plugin_as_a_warning(tmp_path, monkeypatch):
    install_fake_distribution(tmp_path, monkeypatch, "acme = acme_checks", _clashing("LD101", "acme-shadow"))
    result = CliRunner().invoke(app, ["checks", "--json"])
    assert result.exit_code == 0, result.output
    assert "warning:" in result.stderr and "LD101" in result.stderr
    assert [r["origin"] for r in json.loads(result.stdout) if r["code"] == "LD101"] == ["builtin"]


def test_builtin_checks_claiming_one_code_are_an_error(tmp_path, monkeypatch):
    package = tmp_path / "twin_checks"
    package.mkdir()
    (package / "__init__.py").write_text("")
    body = PLUGIN.replace('name="third-party-sample"', 'name="{name}"')
    for name in ("first", "second"):
        (package / f"{name}.py").write_text(textwrap.dedent(body.replace("{name}", name)))
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(UsageError, match="two checks claim 'XT001'"):
        load_registry("twin_checks", plugins=False)
