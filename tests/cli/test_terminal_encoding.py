"""A terminal whose encoding lacks a character the reports print (issue 30 item 2).

Under a Latin-1 locale ``demo`` crashed on the en dash of the server-histogram row after the probe had
run (a traceback, exit 1, no report); under ``PYTHONIOENCODING=ascii`` ``compare`` crashed on
"µs". Each command runs here as a real process under those settings: the summary is spelled in
what the terminal has, the exit code is the verdict's, and the files stay UTF-8. The demo (a lab
run, the slowest) runs once, under the narrowest terminal; its report is re-analysed under each.
"""

from __future__ import annotations

import functools
import io
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from doctor.cli import app
from doctor.exit_codes import ExitCode
from doctor.foundation.console import ASCII_SPELLING, stdout_json
from tests.support.lab_runs import ASCII_TERMINAL, DemoRun, doctor_process
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


def spelled(proc: subprocess.CompletedProcess[bytes], env: dict[str, str]) -> str:
    """The process's output, which its encoding must hold."""
    assert b"Traceback" not in proc.stderr and b"UnicodeEncodeError" not in proc.stderr, proc.stderr.decode("latin-1")
    codec = "ascii" if env.get("PYTHONIOENCODING") == "ascii" else "latin-1"
    return (proc.stdout + proc.stderr).decode(codec)  # raises if a byte is not of that encoding


@pytest.mark.parametrize("env", SETTINGS)
def test_analyze_prints_its_summary_in_the_terminals_encoding(tmp_path: Path, env: dict[str, str]) -> None:
    proc = doctor_process(["analyze", str(BUNDLE), "--json", str(tmp_path / "r.json")], env, tmp_path)
    text = spelled(proc, env)
    assert proc.returncode == ExitCode.HEALTHY, text
    assert "ms-" in text  # the server-histogram row's interval, its en dash spelled "-"
    assert json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))["verdict"]["symptom"] == "healthy"


def assert_demo_report(proc: subprocess.CompletedProcess[bytes], env: dict[str, str], json_path: Path, html_path: Path) -> None:
    """A process that wrote the demo's report under ``env``: spelled in its encoding, the incident's
    exit code (not a crash's), and the files in UTF-8, unspelled."""
    text = spelled(proc, env)
    assert proc.returncode == ExitCode.SYMPTOM, text  # the demo's incident, not a crash
    html = html_path.read_bytes().decode("utf-8")
    assert "\u2013" in html or "\u2192" in html  # the files stay UTF-8, unspelled
    assert json.loads(json_path.read_text(encoding="utf-8"))["verdict"]["symptom"] == "proxy-only"


@pytest.mark.slow
def test_demo_writes_its_report_under_a_narrow_terminal(narrow_demo: DemoRun) -> None:
    """The session's one ``demo`` (``tests/support/lab_runs.py``), under an ASCII terminal: every
    character a Latin-1 one lacks is spelled by the same handler, so this one run covers both."""
    assert_demo_report(narrow_demo.proc, ASCII_TERMINAL, narrow_demo.out_dir / "report.json", narrow_demo.html_path)


@pytest.mark.slow
@pytest.mark.parametrize("env", SETTINGS)
def test_the_demos_report_prints_in_each_narrow_terminals_encoding(tmp_path: Path, env: dict[str, str], narrow_demo: DemoRun) -> None:
    """The demo's own diagnosis (the lab's histograms, the proxy-buffering verdict) re-analysed under
    each setting: the summary the demo printed, in each terminal's encoding, without running the lab again."""
    proc = doctor_process(["analyze", str(narrow_demo.out_dir / "report.json"), "--json", "r.json", "--html", "r.html"], env, tmp_path)
    assert_demo_report(proc, env, tmp_path / "r.json", tmp_path / "r.html")


@pytest.mark.slow
def test_compare_spells_microseconds_in_ascii(tmp_path: Path) -> None:
    """Two runs of an engine whose tokens come 200 µs apart: the table prints µs."""
    with SseServer() as srv:
        for name in ("a", "b"):
            CliRunner().invoke(app, ["diagnose", "--engine", srv.base(itl=0.0002, n=8), "--requests", "8", "--no-gpu",
                                     "--no-host", "--no-metrics", "--json", str(tmp_path / f"{name}.json")])
    env = {"PYTHONIOENCODING": "ascii"}
    assert "µs" in doctor_process(["compare", "a.json", "b.json"], {"PYTHONIOENCODING": "utf-8"}, tmp_path).stdout.decode()
    proc = doctor_process(["compare", "a.json", "b.json"], env, tmp_path)
    text = spelled(proc, env)
    assert proc.returncode in (ExitCode.HEALTHY, ExitCode.SYMPTOM), text
    assert " us" in text


def non_ascii(document: object) -> set[str]:
    """The non-ASCII characters of a parsed document's strings (keys included)."""
    return {ch for ch in json.dumps(document, ensure_ascii=False) if not ch.isascii()}


@pytest.fixture(scope="module")
def wide_document(tmp_path_factory: pytest.TempPathFactory) -> Callable[[tuple[str, ...]], dict]:
    """``analyze``'s JSON document on a UTF-8 stdout, per arguments: run once, compared with every narrow one."""
    cwd = tmp_path_factory.mktemp("wide")

    @functools.cache
    def printed(args: tuple[str, ...]) -> bytes:
        return doctor_process(["analyze", str(BUNDLE), *args], {"PYTHONIOENCODING": "utf-8"}, cwd).stdout

    return lambda args: json.loads(printed(args))  # parsed afresh: no test changes what the next one reads


@pytest.mark.parametrize("env", SETTINGS)
@pytest.mark.parametrize("args", [("--json", "-"), ("--format", "json")], ids=["json-dash", "format-json"])
def test_a_json_document_on_a_narrow_stdout_keeps_every_character(
        tmp_path: Path, env: dict[str, str], args: tuple[str, ...], wide_document: Callable[[tuple[str, ...]], dict]) -> None:
    """The report's "µs" and its histogram bars reach a program reading stdout escaped, not as "u" and "?"."""
    wide = wide_document(args)
    assert "µ" in non_ascii(wide)
    proc = doctor_process(["analyze", str(BUNDLE), *args], env, tmp_path)
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
