"""Bad usage, as a tired person types it: refused in one line before anything is sent.

Every case here points at a closed port (127.0.0.1:9): a run that got as far as probing would
show a connect failure instead of the usage error these tests expect, and nothing is written.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from doctor.bundle import save
from doctor.cli import app
from doctor.exit_codes import ExitCode
from doctor.runner import analyze
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
