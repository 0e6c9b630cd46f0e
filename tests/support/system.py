"""The system programs the real-parts tests drive, and what a missing one means.

On a developer's machine a missing program skips its tests with the apt package to install. CI
installs every one of them and sets ``LLM_DOCTOR_REQUIRE_SYSTEM=1``; there a missing program is an
error, so a green CI always means the nginx, Chromium, Prometheus and TLS tests really ran.
"""

from __future__ import annotations

import os
import shutil
from typing import NoReturn

import pytest

REQUIRED = os.environ.get("LLM_DOCTOR_REQUIRE_SYSTEM") == "1"


def find(name: str, *elsewhere: str) -> str | None:
    """``name`` on PATH, else the first executable of ``elsewhere`` (Debian puts nginx in /usr/sbin)."""
    return shutil.which(name) or next((p for p in elsewhere if os.access(p, os.X_OK)), None)


def needs(program: str | None, why: str) -> pytest.MarkDecorator:
    """A skip mark for tests that drive ``program``; with REQUIRED its absence stops collection."""
    if program is None and REQUIRED:
        raise RuntimeError(f"LLM_DOCTOR_REQUIRE_SYSTEM=1, but {why}")
    return pytest.mark.skipif(program is None, reason=why)


def missing(why: str) -> NoReturn:
    """Inside a test or fixture: skip, or fail where the program is required."""
    if REQUIRED:
        pytest.fail(f"LLM_DOCTOR_REQUIRE_SYSTEM=1, but {why}")
    pytest.skip(why)
