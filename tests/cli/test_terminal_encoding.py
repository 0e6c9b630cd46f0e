"""A terminal whose encoding lacks a character the reports print (issue 30 item 2).

Under a Latin-1 locale ``demo`` crashed on the en dash of the server-histogram row after the probe had
run (a traceback, exit 1, no report); under ``PYTHONIOENCODING=ascii`` ``compare`` crashed on
"µs". Each command runs here as a real process under those settings: the summary is spelled in
what the terminal has, the exit code is the verdict's, and the files stay UTF-8.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from doctor.cli import app
from doctor.exit_codes import ExitCode
from doctor.foundation.console import ASCII_SPELLING, stdout_json
from tests.support.sse_server import SseServer

ROOT = Path(__file__).resolve().parents[2]
BUNDLE = ROOT / "fixtures" / "bundles" / "realvllm-healthy.json.gz"  # prints the server-histogram row's en dash
LATIN1_LOCALE = "en_US.ISO-8859-1"


def latin1_locale() -> bool:
    listed = subprocess.run(["locale", "-a"], capture_output=True, text=True, check=False).stdout.lower().split()
    return "en_us.iso88591" in listed


SETTINGS = [
    pytest.param({"PYTHONIOENCODING": "latin-1"}, id="latin-1"),
    pytest.param({"PYTHONIOENCODING": "ascii"}, id="ascii"),
    pytest.param({"LC_ALL": LATIN1_LOCALE, "PYTHONIOENCODING": ""}, id="latin-1-locale",
                 marks=pytest.mark.skipif(not latin1_locale(), reason=f"locale {LATIN1_LOCALE} not installed")),
]


def run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[bytes]:
    environ = {k: v for k, v in os.environ.items() if k not in ("LC_ALL", "LANG", "PYTHONIOENCODING", "PYTHONUTF8")}
    environ.update({k: v for k, v in env.items() if v})
    return subprocess.run([sys.executable, "-m", "doctor", *args], cwd=cwd, env=environ, capture_output=True,
                          timeout=300, check=False)


def spelled(proc: subprocess.CompletedProcess[bytes], env: dict[str, str]) -> str:
    """The process's output, which its encoding must hold."""
    assert b"Traceback" not in proc.stderr and b"UnicodeEncodeError" not in proc.stderr, proc.stderr.decode("latin-1")
    codec = "ascii" if env.get("PYTHONIOENCODING") == "ascii" else "latin-1"
    return (proc.stdout + proc.stderr).decode(codec)  # raises if a byte is not of that encoding


@pytest.mark.parametrize("env", SETTINGS)
def test_analyze_prints_its_summary_in_the_terminals_encoding(tmp_path: Path, env: dict[str, str]) -> None:
    proc = run(["analyze", str(BUNDLE), "--json", str(tmp_path / "r.json")], env, tmp_path)
    text = spelled(proc, env)
    assert proc.returncode == ExitCode.HEALTHY, text
    assert "ms-" in text  # the server-histogram row's interval, its en dash spelled "-"
    assert json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))["verdict"]["symptom"] == "healthy"


@pytest.mark.slow
@pytest.mark.parametrize("env", SETTINGS)
def test_demo_writes_its_report_under_a_narrow_terminal(tmp_path: Path, env: dict[str, str]) -> None:
    proc = run(["demo", "--json", "d.json", "--html", "d.html"], env, tmp_path)
    text = spelled(proc, env)
    assert proc.returncode == ExitCode.SYMPTOM, text  # the demo's incident, not a crash
    html = (tmp_path / "d.html").read_bytes().decode("utf-8")
    assert "\u2013" in html or "\u2192" in html  # the files stay UTF-8, unspelled
    assert json.loads((tmp_path / "d.json").read_text(encoding="utf-8"))["verdict"]["symptom"] == "proxy-only"


@pytest.mark.slow
def test_compare_spells_microseconds_in_ascii(tmp_path: Path) -> None:
    """Two runs of an engine whose tokens come 200 µs apart: the table prints µs."""
    with SseServer() as srv:
        for name in ("a", "b"):
            CliRunner().invoke(app, ["diagnose", "--engine", srv.base(itl=0.0002, n=8), "--requests", "8", "--no-gpu",
                                     "--no-host", "--no-metrics", "--json", str(tmp_path / f"{name}.json")])
    env = {"PYTHONIOENCODING": "ascii"}
    assert "µs" in run(["compare", "a.json", "b.json"], {"PYTHONIOENCODING": "utf-8"}, tmp_path).stdout.decode()
    proc = run(["compare", "a.json", "b.json"], env, tmp_path)
    text = spelled(proc, env)
    assert proc.returncode in (ExitCode.HEALTHY, ExitCode.SYMPTOM), text
    assert " us" in text


def non_ascii(document: object) -> set[str]:
    """The non-ASCII characters of a parsed document's strings (keys included)."""
    return {ch for ch in json.dumps(document, ensure_ascii=False) if not ch.isascii()}


@pytest.mark.parametrize("env", SETTINGS)
@pytest.mark.parametrize("args", [["--json", "-"], ["--format", "json"]], ids=["json-dash", "format-json"])
def test_a_json_document_on_a_narrow_stdout_keeps_every_character(tmp_path: Path, env: dict[str, str], args) -> None:
    """The report's "µs" and its histogram bars reach a program reading stdout escaped, not as "u" and "?"."""
    wide = json.loads(run(["analyze", str(BUNDLE), *args], {"PYTHONIOENCODING": "utf-8"}, tmp_path).stdout)
    assert "µ" in non_ascii(wide)
    proc = run(["analyze", str(BUNDLE), *args], env, tmp_path)
    spelled(proc, env)
    assert proc.stdout.isascii() and non_ascii(json.loads(proc.stdout)) == non_ascii(wide)


def test_stdout_json_escapes_as_ensure_ascii_does(monkeypatch: pytest.MonkeyPatch) -> None:
    document = {"model": "Llama-3 \u2265 8B \U0001f600", "unit": "µs"}
    text = json.dumps(document, ensure_ascii=False)
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(io.BytesIO(), encoding="utf-8"))
    assert stdout_json(text) == text  # a stdout that holds every character gets the document as is
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(io.BytesIO(), encoding="latin-1"))
    assert stdout_json(text) == json.dumps(document, ensure_ascii=True)


def test_every_spelling_is_ascii() -> None:
    assert all(spelling.isascii() and not ch.isascii() for ch, spelling in ASCII_SPELLING.items())
