"""The wheel holds exactly our three top-level packages and the data files renderers need."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_wheel_contents(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("llm_doctor-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top == {"doctor", "checks", "reports"}
    assert "reports/templates/report.html.j2" in names
    assert "reports/schema/report.schema.json" in names
    assert "doctor/py.typed" in names
    assert "doctor/verify/prompts.jsonl" in names  # the eval gate's built-in prompts
    assert not any(n.startswith(("tests/", "fixtures/", "bench/")) for n in names)
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "llm-doctor = doctor.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()
