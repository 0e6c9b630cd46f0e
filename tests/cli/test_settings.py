"""One resolved settings object per run (``doctor.settings``): frozen, read by name only in its package,
and the Kubernetes lookup a step the command calls, not a side effect of reading the flags."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from doctor.foundation.errors import UsageError
from doctor.settings import RunSettings, for_saved, lookup_targets, resolve
from doctor.settings.config_file import FileConfig

ROOT = Path(__file__).parents[2]
SETTINGS = ROOT / "doctor" / "settings"
#: The names the flags travel under: typer's ``opts`` dict, and ``RunSettings.flags``.
FLAG_NAMES = ("opts", "flags")


def _flag_reads(tree: ast.AST) -> list[int]:
    """Lines that read a flag by a literal name: ``opts["x"]``, ``opts.get("x")``, ``settings.flags["x"]``."""

    def is_flags(node: ast.expr) -> bool:
        return (isinstance(node, ast.Name) and node.id in FLAG_NAMES) or (isinstance(node, ast.Attribute) and node.attr in FLAG_NAMES)

    def reads_by_name(node: ast.AST) -> bool:
        if isinstance(node, ast.Subscript):
            return is_flags(node.value) and isinstance(node.slice, ast.Constant)
        return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                and is_flags(node.func.value) and bool(node.args) and isinstance(node.args[0], ast.Constant))

    return sorted(node.lineno for node in ast.walk(tree) if reads_by_name(node))


def test_the_scan_sees_a_flag_read_by_name() -> None:
    tree = ast.parse("def f(opts, run):\n    a = opts['html']\n    b = opts.get('json')\n    c = run.flags.get('md')\n    d = other.get('x')\n")
    assert _flag_reads(tree) == [2, 3, 4]


def test_no_module_outside_the_settings_package_reads_a_flag_by_name() -> None:
    found = []
    for path in sorted([*(ROOT / "doctor").rglob("*.py"), *(ROOT / "checks").rglob("*.py"), *(ROOT / "reports").rglob("*.py")]):
        if SETTINGS in path.parents:
            continue
        found += [f"{path.relative_to(ROOT)}:{line}" for line in _flag_reads(ast.parse(path.read_text(encoding="utf-8")))]
    assert found == []


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)  # diagnose's default report is written (and checked) in the working directory
    return tmp_path


def test_run_settings_are_frozen_through_and_through(here: Path) -> None:
    run = resolve("diagnose", {"engine": "http://127.0.0.1:9", "concurrency": 2}, FileConfig())
    assert isinstance(run, RunSettings) and run.collect is not None and run.analysis is not None
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.command = "watch"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.collect.model = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        run.flags["engine"] = "http://127.0.0.1:10"  # type: ignore[index]
    assert run.collect.concurrency == 2 and run.outputs.html == Path("llm-doctor-report.html")


def test_every_command_starts_from_the_same_resolution(here: Path) -> None:
    flags = {"engine": "http://127.0.0.1:9", "ttft_budget": 0.5, "json": here / "r.json"}
    diagnose, load = resolve("diagnose", flags, FileConfig()), resolve("load", flags, FileConfig())
    assert diagnose.collect is not None and load.collect is not None and diagnose.analysis is not None and load.analysis is not None
    assert diagnose.analysis.budgets == load.analysis.budgets == diagnose.collect.budgets == load.collect.budgets
    assert diagnose.outputs == load.outputs


def test_a_kubernetes_engine_is_looked_up_by_the_named_step_only(here: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "")
    run = resolve("diagnose", {"engine": "k8s://inference/vllm:80"}, FileConfig())  # no API asked: no error yet
    assert run.engines == ("k8s://inference/vllm:80",) and run.collect is not None and run.collect.engine is None
    with pytest.raises(UsageError, match="k8s:// targets are resolved from inside a Kubernetes pod"):
        lookup_targets(run)
    with pytest.raises(UsageError, match="namespace/service:port"):
        resolve("diagnose", {"engine": "k8s://inference/vllm"}, FileConfig())  # a malformed one is refused at once


def test_a_plain_engine_needs_no_lookup(here: Path) -> None:
    run = resolve("collect", {"engine": "http://127.0.0.1:9", "bundle": here / "b.json"}, FileConfig())
    assert lookup_targets(run) is run


def test_a_saved_bundle_is_read_with_a_derived_copy(here: Path) -> None:
    run = resolve("analyze", {"fail_on": "warning"}, FileConfig())
    saved = for_saved(run, None, "eu")
    assert saved is not run and saved.analysis is not None and run.analysis is None
    assert saved.outputs.fail_on == run.outputs.fail_on == saved.analysis.fail_on


def test_every_command_the_cli_resolves_is_declared_once() -> None:
    """``resolve`` reads a command's ``Takes`` from ``COMMANDS``, never its name: a command the CLI
    resolves without a row would fail at its first run, not here."""
    from doctor.settings.run import COMMANDS

    tree = ast.parse((ROOT / "doctor" / "cli.py").read_text())
    resolved = {node.args[0].value for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id == "resolve" and node.args and isinstance(node.args[0], ast.Constant)}
    assert len(resolved) >= 10 and resolved == set(COMMANDS)
    # the analysis reads the probe plan's region: a command that analyses builds one
    assert [name for name, takes in COMMANDS.items() if takes.analyses and takes.plan is None] == []
    assert "command ==" not in (SETTINGS / "run.py").read_text() and "command in" not in (SETTINGS / "run.py").read_text()
