"""What the real-engine stages (``tests/realvllm``, ``tests/llamacpp``) share.

Each runs only when selected by its marker; writes its tiny model with a Python of its own (the
one with torch, or with gguf), not the project's; and starts its server with
``start_new_session=True`` and its output in a log file. These helpers wait until the server
answers ``/health`` (stopping early, with the log's tail, when it exits during start-up) and end
the whole group however the test ends (an engine's workers go with it).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

STOP_TIMEOUT_S = 30.0
MODEL_TIMEOUT_S = 600.0


def skip_unless_selected(request: pytest.FixtureRequest, marker: str) -> None:
    """Skip a stage not asked for by name: a ``-m`` given for another reason (``-m "not slow"``)
    replaces the default ``-m "not realvllm and not llamacpp"`` and must not pull a stage in."""
    if marker not in (request.config.getoption("markexpr") or ""):
        pytest.skip(f"this stage runs only when selected: pytest -m {marker}")


def write_model(python: Path, module: str, out: Path, cwd: Path) -> Path:
    """``python -m module out`` (a tiny model's writer); ``out``, or an error with its stderr."""
    proc = subprocess.run([str(python), "-m", module, str(out)], cwd=cwd, capture_output=True, text=True,
                          timeout=MODEL_TIMEOUT_S)
    if proc.returncode:
        raise RuntimeError(f"{module} failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return out


def wait_healthy(proc: subprocess.Popen[bytes], url: str, log: Path, name: str, timeout_s: float) -> None:
    """Return once ``url``/health answers 200; raise with the log's tail if ``proc`` exits or time runs out."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited with {proc.returncode} during start-up:\n{tail(log)}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/health", timeout=2.0).status_code == 200:
                return
        time.sleep(1.0)
    raise RuntimeError(f"{name} was not healthy within {timeout_s:g} s:\n{tail(log)}")


def stop_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the whole group, SIGKILL if it lingers."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=STOP_TIMEOUT_S)
            break
        except subprocess.TimeoutExpired:
            continue
    # The group may outlive its leader (an engine core still exiting): make sure it is gone.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def tail(log: Path, chars: int = 4000) -> str:
    text = log.read_text(errors="replace") if log.exists() else ""
    return text[-chars:]
