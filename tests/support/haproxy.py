"""Run a real HAProxy (the Debian package's binary) as the test's own process.

Never the system service: each call writes its own configuration into a private directory,
listens on a free port of 127.0.0.1 and runs ``haproxy -f CONF -db`` in the foreground, stopped
on exit, as ``tests/support/nginx.py`` does for nginx::

    with run_haproxy("server engine {upstream} maxconn 1", upstream_port) as base_url:
        ...

``backend`` is the inside of the one ``backend``: its ``server`` lines and options.
``{upstream}`` is replaced by ``127.0.0.1:<upstream_port>``. Timeouts are long enough for a
streamed answer; ``timeout queue`` bounds how long a request waits for a ``maxconn`` slot.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from tests.support import system
from tests.support.nginx import free_port

START_TIMEOUT_S = 10.0


def haproxy_binary() -> str | None:
    """The haproxy executable, or None (Debian installs it in /usr/sbin, often not on PATH)."""
    return system.find("haproxy", "/usr/sbin/haproxy", "/usr/local/sbin/haproxy")


SKIP_REASON = "haproxy is not installed (apt-get install haproxy); the real-HAProxy tests need its binary"
NEEDS_HAPROXY = system.needs(haproxy_binary(), SKIP_REASON)


def _config(backend: str, port: int, upstream_port: int) -> str:
    servers = backend.replace("{upstream}", f"127.0.0.1:{upstream_port}")
    return f"""global
  maxconn 256
defaults
  mode http
  timeout connect 5s
  timeout client 60s
  timeout server 60s
  timeout queue 30s
frontend gateway
  bind 127.0.0.1:{port}
  default_backend engine
backend engine
  {servers}
"""


@contextlib.contextmanager
def run_haproxy(backend: str, upstream_port: int) -> Iterator[str]:
    """Start HAProxy with ``backend`` in front of ``127.0.0.1:upstream_port``; yield its base URL."""
    binary = haproxy_binary()
    if binary is None:
        raise RuntimeError(SKIP_REASON)
    with tempfile.TemporaryDirectory(prefix="llm-doctor-haproxy-") as tmp:
        conf = Path(tmp) / "haproxy.cfg"
        port = free_port()
        conf.write_text(_config(backend, port, upstream_port))
        proc = subprocess.Popen([binary, "-f", str(conf), "-db"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            _wait_listening(proc, port)
            yield f"http://127.0.0.1:{port}"
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)


def _wait_listening(proc: subprocess.Popen[bytes], port: int) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            raise RuntimeError(f"haproxy exited with {proc.returncode}: {err.strip()[-2000:]}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return
        time.sleep(0.02)
    raise RuntimeError(f"haproxy did not listen on 127.0.0.1:{port} within {START_TIMEOUT_S:g} s")
