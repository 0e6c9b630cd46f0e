"""Run a real llama.cpp ``llama-server`` (built by ``.ci/llamacpp-setup``) as the test's own process.

The server listens on a free port of 127.0.0.1 with ``/metrics`` and ``/slots`` on
(``--metrics --slots``, as an operator who wants them watched runs it), writes its log to a file
of its own and runs in its own process group, stopped however the test ends
(``tests/support/served.py``). Start-up takes about a second: no compilation, a 10 MB model.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

from tests.support.nginx import free_port
from tests.support.served import stop_group, wait_healthy, write_model

ROOT = Path(__file__).resolve().parents[2]
LLAMACPP_DIR = Path(os.environ.get("LLAMACPP_DIR", ROOT / ".llamacpp"))
SERVER_BIN = LLAMACPP_DIR / "build" / "bin" / "llama-server"
GGUF_PYTHON = LLAMACPP_DIR / "venv" / "bin" / "python"  # has the gguf package, for tiny_model.py

SERVED_NAME = "tiny"
CONTEXT = 2048  # KV cells, split between the slots (-np)
#: One compute thread: ggml's threads spin while they wait for work, and two of them on CI's 2 cores
#: starved the probing client (gaps of 0.3-0.75 s between its reads of a 4 ms/token stream).
THREADS = 1
STARTUP_TIMEOUT_S = 120.0  # about a second idle; a busy shared machine stretches it


def missing_reason() -> str | None:
    """What the stage lacks on this machine, or None when it can run."""
    if not SERVER_BIN.exists():
        return f"{SERVER_BIN} is missing: run .ci/llamacpp-setup to build llama.cpp's llama-server"
    if not GGUF_PYTHON.exists():
        return f"{GGUF_PYTHON} is missing: run .ci/llamacpp-setup (it installs the gguf package there)"
    return None


def build_tiny_model(out: Path) -> Path:
    """The random-weight GGUF of ``tiny_model.py``, written with the Python that has ``gguf``."""
    return write_model(GGUF_PYTHON, "tests.llamacpp.tiny_model", out, ROOT)


@contextlib.contextmanager
def serve_llamacpp(model: Path, log: Path, server_args: list[str]) -> Iterator[str]:
    """``llama-server -m MODEL --metrics --slots -c 2048 -t 1 SERVER_ARGS`` until exit; yields its URL."""
    port = free_port()
    cmd = [str(SERVER_BIN), "-m", str(model), "--host", "127.0.0.1", "--port", str(port), "--alias", SERVED_NAME,
           "--metrics", "--slots", "-c", str(CONTEXT), "-t", str(THREADS), *server_args]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(proc, url, log, "llama-server", STARTUP_TIMEOUT_S)
        yield url
    finally:
        stop_group(proc)
