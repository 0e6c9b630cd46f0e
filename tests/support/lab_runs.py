"""Each lab scenario diagnosed once per test session, end to end, and the report shared.

A scenario's diagnosis is the slowest thing the default suite repeats (6-21 s each on a 2-core
machine): the demo tests assert every scenario's verdict, the HTML report tests render one, and
each used to serve and diagnose it again. ``LabDiagnoses`` (the session fixture ``lab_diagnoses``
in ``tests/conftest.py``) runs a scenario the first time a test asks for it, the way a newcomer
does (the README's "Try it": ``python -m doctor.lab.serve NAME DIR``, then ``diagnose`` with
exactly the flags the lab prints), writes the JSON and the HTML report, and hands the same
``LabDiagnosis`` to every later test. Tests read it and never write into its folder.

``llm-doctor demo`` itself (the lab started by the command, 8-10 s) runs once too (``DemoRun``,
the session fixture ``narrow_demo``): as a real process under the narrowest terminal, with an
output flag, read by the terminal-encoding and the demo tests.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from doctor.cli import app


@contextmanager
def served(name: str, workdir: Path) -> Iterator[dict[str, str]]:
    """The README's "Try it": ``python -m doctor.lab.serve NAME DIR`` until its stdin closes; its JSON line."""
    proc = subprocess.Popen([sys.executable, "-m", "doctor.lab.serve", name, str(workdir)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        yield json.loads(proc.stdout.readline())
    finally:
        proc.stdin.close()
        proc.wait(timeout=10)
        proc.stdout.close()


@dataclass(frozen=True)
class LabDiagnosis:
    """One scenario's ``diagnose``: its exit code and output, and the reports it wrote."""

    exit_code: int
    output: str
    json_path: Path
    html_path: Path

    @property
    def report(self) -> dict[str, Any]:
        """The JSON report, read afresh so that no test can change what the next one reads."""
        return json.loads(self.json_path.read_text())


class LabDiagnoses:
    """Scenario name -> its one ``LabDiagnosis`` of this session, diagnosed on first use."""

    def __init__(self, root: Path) -> None:
        self._root = root
        self._done: dict[str, LabDiagnosis] = {}

    def __call__(self, name: str) -> LabDiagnosis:
        if name not in self._done:
            self._done[name] = self._diagnose(name)
        return self._done[name]

    def _diagnose(self, name: str) -> LabDiagnosis:
        out = self._root / name
        out.mkdir(parents=True)
        json_path, html_path = out / "report.json", out / "report.html"
        with served(name, out / "lab") as line:
            result = CliRunner().invoke(app, ["diagnose", *shlex.split(line["diagnose"]),
                                              "--json", str(json_path), "--html", str(html_path)])
        assert result.exception is None or isinstance(result.exception, SystemExit), result.output
        return LabDiagnosis(result.exit_code, result.output, json_path, html_path)


def doctor_process(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[bytes]:
    """``python -m doctor ARGS`` as a real process whose terminal is ``env``'s alone: the caller's
    locale and encoding settings are dropped, and a setting given as "" stays unset."""
    environ = {k: v for k, v in os.environ.items() if k not in ("LC_ALL", "LANG", "PYTHONIOENCODING", "PYTHONUTF8")}
    environ.update({k: v for k, v in env.items() if v})
    return subprocess.run([sys.executable, "-m", "doctor", *args], cwd=cwd, env=environ, capture_output=True,
                          timeout=300, check=False)


#: The narrowest terminal: every character Latin-1 lacks, ASCII lacks too, and the one error handler
#: (``doctor.foundation.console.narrow_terminals_spelled``) spells both.
ASCII_TERMINAL = {"PYTHONIOENCODING": "ascii"}


@dataclass(frozen=True)
class DemoRun:
    """``llm-doctor demo --html x.html --out-dir out`` (the default scenario) in ``cwd``, run once as a
    real process under ``ASCII_TERMINAL``: the page where the flag says, the JSON in the out dir."""

    proc: subprocess.CompletedProcess[bytes]
    cwd: Path

    @property
    def html_path(self) -> Path:
        return self.cwd / "x.html"

    @property
    def out_dir(self) -> Path:
        return self.cwd / "out"


def run_demo(cwd: Path) -> DemoRun:
    return DemoRun(doctor_process(["demo", "--html", "x.html", "--out-dir", "out"], ASCII_TERMINAL, cwd), cwd)
