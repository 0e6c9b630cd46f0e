"""doctor/, checks/ and reports/ type-check under the pinned mypy with the settings in pyproject.toml.

Every function is annotated; this test makes the annotations mean something (an unnarrowed
``Optional`` is a crash on the evidence nobody had), as tests/project/test_lint.py does for ruff.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_mypy_finds_nothing() -> None:
    # the cache is per-worktree and ignored by git; it only makes a re-run faster, never different
    result = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(ROOT / ".mypy_cache")],
                            cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
