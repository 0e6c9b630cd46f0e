"""``-`` is stdout for every machine-readable output, the terminal comes before any file, and a
reader that leaves early (``| head -1``) costs only the rest of stdout.

Pipes here are real: the command runs in its own process, and "the reader left" is its stdout's
read end closed before it writes, so its first write fails with EPIPE as under ``| head -1``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from doctor.cli import app
from doctor.exit_codes import ExitCode

ROOT = Path(__file__).resolve().parents[2]
BUNDLE = str(ROOT / "fixtures" / "bundles" / "realvllm-healthy.json.gz")
LOG = str(ROOT / "fixtures" / "logs" / "startup-0.32.0-cpu-default.log")


def doctor(*args: str, reader_leaves: bool = False, cwd: Path | None = None) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``llm-doctor args`` in its own process; ``reader_leaves``:
    stdout's reader closes before the command writes anything."""
    proc = subprocess.Popen([sys.executable, "-m", "doctor", *args], cwd=cwd or ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    if reader_leaves:
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()
        err = proc.stderr.read()
        return proc.wait(timeout=120), "", err
    out, err = proc.communicate(timeout=120)
    return proc.returncode, out, err


@pytest.mark.parametrize("flag, first", [("--json", "{"), ("--md", "### llm-doctor"), ("--html", "<!doctype html>")])
def test_dash_sends_the_document_to_stdout_and_the_summary_to_stderr(tmp_path: Path, flag: str, first: str) -> None:
    """``--json - | jq .verdict`` once wrote a file named ``-`` and printed the text on stdout."""
    code, out, err = doctor("analyze", BUNDLE, flag, "-", cwd=tmp_path)
    assert code == ExitCode.HEALTHY, err
    assert out.lstrip().startswith(first) and "HEALTHY" not in out.splitlines()[0]
    assert "HEALTHY" in err  # the verdict is still shown, on the terminal's other stream
    assert not (tmp_path / "-").exists()
    if flag == "--json":
        assert json.loads(out)["verdict"]["symptom"] == "healthy"


def test_only_one_document_goes_to_stdout() -> None:
    result = CliRunner().invoke(app, ["analyze", BUNDLE, "--json", "-", "--format", "json"])
    assert result.exit_code == ExitCode.NO_DIAGNOSIS and "only one output can go to stdout" in result.output


def test_collect_writes_its_bundle_to_stdout() -> None:
    code, out, err = doctor("collect", "--log", LOG, "--no-gpu", "--no-host", "-o", "-")
    assert code == ExitCode.HEALTHY, err
    assert json.loads(out)["schema_version"] >= 1 and "wrote the bundle to stdout" in err


def test_a_bundle_cannot_be_kept_on_stdout() -> None:
    result = CliRunner().invoke(app, ["diagnose", "--engine", "http://127.0.0.1:9", "--bundle", "-"])
    assert result.exit_code == ExitCode.NO_DIAGNOSIS and "--bundle keeps the evidence in a file" in result.output


@pytest.mark.parametrize("args", [["-v"], ["--format", "json"], ["--json", "-"]])
def test_a_reader_that_leaves_early_costs_neither_the_exit_code_nor_the_files(tmp_path: Path, args: list[str]) -> None:
    """``| head -1`` once made a healthy run exit 1 (rich's own SIGPIPE exit) and lost "wrote ..."."""
    html = tmp_path / "r.html"
    code, _, err = doctor("analyze", BUNDLE, "--html", str(html), *args, reader_leaves=True)
    assert code == ExitCode.HEALTHY, err
    assert "Traceback" not in err and "Exception ignored" not in err
    assert f"wrote {html}" in err and html.exists()


def test_a_reader_of_both_streams_that_leaves_early_costs_nothing_either(tmp_path: Path) -> None:
    """``2>&1 | head -2``: the "wrote ..." line on stderr hits the closed pipe too, where rich's own
    broken-pipe answer (exit 1) once turned a healthy run into an incident for a cron job."""
    html = tmp_path / "r.html"
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader left before anything was written, on both streams
    try:
        proc = subprocess.Popen([sys.executable, "-m", "doctor", "analyze", BUNDLE, "--html", str(html)], cwd=ROOT,
                                stdout=write_end, stderr=write_end, env={**os.environ, "PYTHONPATH": str(ROOT)})
    finally:
        os.close(write_end)
    assert proc.wait(timeout=120) == ExitCode.HEALTHY
    assert html.exists()


@pytest.mark.parametrize("command", [["checks"], ["checks", "--json"], ["explain", "LD101"], ["log", LOG]])
def test_other_commands_keep_their_exit_code_when_the_reader_leaves(command: list[str]) -> None:
    code, _, err = doctor(*command, reader_leaves=True)
    assert code == ExitCode.HEALTHY and "Traceback" not in err and "Exception ignored" not in err, err


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs Linux's /dev/full")
def test_the_verdict_is_shown_before_a_file_that_cannot_be_written() -> None:
    """``--html /dev/full``: the disk is full at write time. The verdict once never reached the
    screen; now it is there, and the failed write is one line and exit 2 (README, Exit codes)."""
    code, out, err = doctor("analyze", BUNDLE, "--html", "/dev/full")
    assert code == ExitCode.NO_DIAGNOSIS
    assert "HEALTHY" in out and "cannot write /dev/full" in err and "Traceback" not in err


@pytest.mark.parametrize("columns", [100, 120])
def test_checks_keeps_to_columns_with_every_identifier_whole(columns: int) -> None:
    """``checks`` was 107 columns whatever ``COLUMNS`` said; its needs and options fold instead."""
    proc = subprocess.run([sys.executable, "-m", "doctor", "checks"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": str(columns)})
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0 and max(map(len, lines)) <= columns and not any("…" in line for line in lines)
    listed = json.loads(subprocess.run([sys.executable, "-m", "doctor", "checks", "--json"], cwd=ROOT, capture_output=True,
                                       text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout)
    for row in listed:
        assert any(f"│ {row['code']} │ {row['name']} " in line for line in lines), row["code"]


@pytest.mark.parametrize("second", ["--html", "--md", "--bundle"])
def test_two_outputs_naming_one_file_are_refused_before_anything_is_written(tmp_path: Path, second: str) -> None:
    """``--json r --html r`` once wrote the JSON, then the HTML over it: one report lost without a word."""
    target = tmp_path / "report"
    args = ["diagnose", "--engine", "http://127.0.0.1:9", "--json", str(target), second, str(tmp_path / "." / "report")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == ExitCode.NO_DIAGNOSIS
    assert f"--json and {second} both name" in result.output and len(result.output.strip().splitlines()) == 1
    assert not target.exists()


@pytest.mark.parametrize("columns", [60, 80, 100])
def test_checks_never_splits_an_options_value(columns: int) -> None:
    """Issue 30 item 12: at 100 columns "long_prompt_tokens=1" and "024" were two lines; a value that
    does not fit beside its name goes whole to the next line."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": str(columns)}
    lines = subprocess.run([sys.executable, "-m", "doctor", "checks"], cwd=ROOT, capture_output=True, text=True,
                           timeout=120, env=env).stdout.splitlines()
    cells = [line.split("│")[-2].strip() for line in lines if line.count("│") == 6]
    listed = json.loads(subprocess.run([sys.executable, "-m", "doctor", "checks", "--json"], cwd=ROOT, capture_output=True,
                                       text=True, timeout=120, env=env).stdout)
    for row in listed:
        for name, value in row["options"].items():
            assert any(c == str(value) or c.endswith(f"={value}") for c in cells), (row["code"], name, value)
