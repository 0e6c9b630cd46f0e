"""Bad usage, as a tired person types it: refused in one line before anything is sent.

Every case here points at a closed port (127.0.0.1:9): a run that got as far as probing would
show a connect failure instead of the usage error these tests expect, and nothing is written.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from doctor.bundle import save
from doctor.checking.runner import analyze
from doctor.cli import app
from doctor.exit_codes import ExitCode
from reports.markdown import render_markdown
from tests.support import bundles

runner = CliRunner()
ENGINE = ["--engine", "http://127.0.0.1:9", "--no-gpu", "--no-host", "--no-metrics"]


def refused(args: list[str], message: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == ExitCode.NO_DIAGNOSIS, result.output
    assert message in result.output, result.output
    assert "engine and gateway endpoints" not in result.output  # nothing was probed


def test_log_typo_binary_or_directory_is_refused_before_the_probe(tmp_path: Path) -> None:
    refused(["diagnose", *ENGINE, "--log", str(tmp_path / "vlm.log")], "cannot open the log")
    binary = tmp_path / "model.bin"
    binary.write_bytes(b"\x00\x01" * 100)
    refused(["diagnose", *ENGINE, "--log", str(binary)], "looks binary")
    refused(["collect", *ENGINE, "--log", str(tmp_path), "-o", str(tmp_path / "b.json")], "is a directory")
    bad_gzip = tmp_path / "x.log.gz"
    bad_gzip.write_bytes(b"\x1f\x8b\x08garbage")
    refused(["diagnose", *ENGINE, "--log", str(bad_gzip)], "not a readable gzip")


def test_a_missing_ca_cert_is_refused_before_the_probe(tmp_path: Path) -> None:
    refused(["diagnose", *ENGINE, "--ca-cert", str(tmp_path / "ca.pem")], "--ca-cert")


@pytest.mark.parametrize("flag", ["--html", "--json", "--md", "--bundle"])
def test_an_unwritable_output_is_refused_before_the_probe(tmp_path: Path, flag: str) -> None:
    refused(["diagnose", *ENGINE, flag, str(tmp_path)], "is a directory")
    blocker = tmp_path / "file"
    blocker.write_text("")
    refused(["diagnose", *ENGINE, flag, str(blocker / "out.html")], "is not a directory")


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
def test_an_output_where_no_file_can_be_created_is_refused_before_the_probe() -> None:
    """/proc takes no new file, for root too, although ``os.access`` says it is writable."""
    refused(["diagnose", *ENGINE, "--html", "/proc/llm-doctor-report.html"], "cannot write /proc/llm-doctor-report.html")


def test_a_refused_run_leaves_no_file_behind(tmp_path: Path) -> None:
    refused(["diagnose", *ENGINE, "--html", str(tmp_path / "r.html"), "--requests", "0"], "--requests must be")
    assert list(tmp_path.iterdir()) == []


def test_collect_output_is_checked_before_the_probe(tmp_path: Path) -> None:
    refused(["collect", *ENGINE, "-o", str(tmp_path)], "is a directory")


def test_zero_requests_is_a_usage_error() -> None:
    refused(["diagnose", *ENGINE, "--requests", "0"], "--requests must be")


def test_demo_out_dir_that_is_a_file(tmp_path: Path) -> None:
    existing = tmp_path / "report"
    existing.write_text("")
    result = runner.invoke(app, ["demo", "--out-dir", str(existing)])
    assert result.exit_code == ExitCode.NO_DIAGNOSIS and "--out-dir" in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_markdown_footer_points_only_at_a_report_that_was_written(tmp_path: Path) -> None:
    report = analyze(bundles.bundle())
    assert "report.html" not in render_markdown(report) and "--html" in render_markdown(report)
    assert "`llm-doctor analyze incident.html`" in render_markdown(report, "incident.html")
    saved = tmp_path / "b.json"
    save(bundles.bundle(), saved)
    md = tmp_path / "s.md"
    runner.invoke(app, ["analyze", str(saved), "--md", str(md)])
    assert "report.html" not in md.read_text() and "No full report" in md.read_text()


# --- paths the user cannot reach: one line and exit 2 before the probe, never a traceback ---

ROOT = Path(__file__).resolve().parents[2]
BUNDLE = ROOT / "fixtures" / "bundles" / "realvllm-healthy.json.gz"


def unprivileged(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``llm-doctor args`` in its own process without the power to ignore file permissions: as
    root, every capability dropped (``setpriv``), which makes a mode-000 folder as closed to it as
    to an unprivileged user; as another user, as it is."""
    prefix = ["setpriv", "--bounding-set=-all", "--inh-caps=-all"] if os.geteuid() == 0 else []
    if prefix and shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: permissions cannot be made to apply")
    return subprocess.run([*prefix, sys.executable, "-m", "doctor", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"})


@pytest.fixture
def closed(tmp_path: Path):
    """A folder nobody may enter (mode 000), opened again for pytest's clean-up."""
    folder = tmp_path / "closed"
    folder.mkdir()
    folder.chmod(0)
    yield folder
    folder.chmod(0o700)


@pytest.mark.parametrize("args, message", [
    (["diagnose", *ENGINE, "--html", "{c}/r.html"], "cannot write {c}/r.html: Permission denied"),
    (["diagnose", *ENGINE, "--json", "{c}/sub/r.json"], "Permission denied"),
    (["diagnose", *ENGINE, "--html", "{t}/r.html", "--baseline", "{c}/base"], "--baseline {c}/base: Permission denied"),
    (["diagnose", *ENGINE, "--html", "{t}/r.html", "--metrics-textfile", "{c}/x.prom"], "--metrics-textfile {c}/x.prom: Permission denied"),
    (["diagnose", *ENGINE, "--html", "{t}/r.html", "--model-dir", "{c}/model"], "--model-dir"),
    (["diagnose", *ENGINE, "--html", "{t}/r.html", "--ca-cert", "{c}/ca.pem"], "--ca-cert {c}/ca.pem: Permission denied"),
    (["collect", *ENGINE, "-o", "{c}/b.json"], "cannot write {c}/b.json: Permission denied"),
    (["load", *ENGINE, "--json", "{c}/l.json"], "cannot write {c}/l.json: Permission denied"),
    (["watch", *ENGINE, "--count", "1", "--history", "{c}/h"], "--history {c}/h: Permission denied"),
    (["sweep", *ENGINE, "--bundle-dir", "{c}/levels"], "--bundle-dir {c}/levels: Permission denied"),
    (["analyze", str(BUNDLE), "--metrics-textfile", "{c}/x.prom"], "--metrics-textfile {c}/x.prom: Permission denied"),
    (["size", "{c}/model"], "Permission denied"),
])
def test_a_path_behind_a_closed_folder_is_one_line_and_exit_2(tmp_path: Path, closed: Path, args: list[str], message: str) -> None:
    """Each was a 40-line PermissionError traceback with exit 1, the code of an incident."""
    done = unprivileged([a.format(c=closed, t=tmp_path) for a in args], tmp_path)
    assert done.returncode == ExitCode.NO_DIAGNOSIS, done.stderr
    assert "Traceback" not in done.stderr and message.format(c=closed) in done.stderr, done.stderr
    assert "engine and gateway endpoints" not in done.stderr  # refused before the probe


@pytest.mark.parametrize("flag", ["--html", "--json", "--md", "--bundle", "--metrics-textfile"])
def test_a_missing_folder_for_a_file_is_refused_not_created(tmp_path: Path, flag: str) -> None:
    """``--html /nonexistent-dir/r.html`` once created ``/nonexistent-dir`` at the root."""
    refused(["diagnose", *ENGINE, "--json", str(tmp_path / "r.json"), flag, str(tmp_path / "typo" / "out")], "does not exist")
    assert not (tmp_path / "typo").exists()


@pytest.mark.parametrize("flag", ["--baseline", "--history"])
def test_a_folder_option_creates_the_folder_named_but_never_its_parents(tmp_path: Path, flag: str) -> None:
    command = "watch" if flag == "--history" else "diagnose"
    refused([command, *ENGINE, "--json", str(tmp_path / "r.json"), flag, str(tmp_path / "typo" / "keep")], "does not exist")
    assert not (tmp_path / "typo").exists()


def test_analyze_refuses_a_missing_folder_before_reading_the_bundle(tmp_path: Path) -> None:
    result = runner.invoke(app, ["analyze", str(BUNDLE), "--html", str(tmp_path / "typo" / "r.html")])
    assert result.exit_code == ExitCode.NO_DIAGNOSIS and "does not exist" in result.output, result.output
    assert not (tmp_path / "typo").exists()
