"""A real router (vllm-router, sglang-router: the binary wheels of the test extra) as the test's own process.

Each listens on a free port of 127.0.0.1 with its /metrics on another (``--prometheus-port``, as in
production), writes its log to a file (the test hands it to ``--router-log``), runs in its own
process group and is always stopped with it. ``args`` are the router's own flags, which the test
also gives llm-doctor as ``--router-args``, as an operator would paste a Deployment's args.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.nginx import free_port
from tests.support.served import stop_group, wait_healthy

#: Each router's command before its flags: its console script beside this Python, else on PATH.
COMMANDS = {"vllm-router": ("vllm-router",), "sglang-router": ("sglang-router", "launch")}
STARTUP_TIMEOUT_S = 60.0


def router_command(product: str) -> list[str]:
    """The router's command, or a skip saying how to install it."""
    name, *rest = COMMANDS[product]
    here = Path(sys.executable).parent / name
    found = str(here) if here.exists() else shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed: pip install -e '.[test]' installs it")
    return [found, *rest]


@dataclass
class RealRouter:
    url: str
    metrics_url: str
    log: Path
    args: list[str]  # its own flags beyond ports and workers: what --router-args repeats
    pid: int


@contextlib.contextmanager
def serve_router(product: str, workers: Sequence[str], args: Sequence[str], log: Path) -> Iterator[RealRouter]:
    """``product`` in front of ``workers`` until the block ends; it answers /health first."""
    port, metrics_port = free_port(), free_port()
    cmd = [*router_command(product), "--host", "127.0.0.1", "--port", str(port), "--prometheus-host", "127.0.0.1",
           "--prometheus-port", str(metrics_port), "--worker-urls", *workers, *args]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(proc, url, log, product, STARTUP_TIMEOUT_S)
        yield RealRouter(url=url, metrics_url=f"http://127.0.0.1:{metrics_port}/metrics", log=log, args=list(args), pid=proc.pid)
    finally:
        stop_group(proc)
