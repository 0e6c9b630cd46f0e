"""Run a real nginx (the Debian package's binary) as the test's own process.

Never the system service: each call writes its own ``nginx.conf`` into a private prefix
(pid file, logs and temp paths inside it), listens on a free port of 127.0.0.1 and runs
``nginx -p PREFIX -c nginx.conf`` in the foreground (``daemon off``), stopped on exit::

    with run_nginx("location / { proxy_pass http://{upstream}; }", upstream_port) as base_url:
        ...

``conf`` is the inside of one ``server { }`` block; it may instead hold whole ``server``
blocks (it then contains ``server {``) listening on ``{port}``. Placeholders, replaced
literally (nginx's own braces stay as they are): ``{port}`` the free port, ``{upstream}``
``127.0.0.1:<upstream_port>``, ``{prefix}`` the private directory.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from tests.support import system

START_TIMEOUT_S = 10.0


def nginx_binary() -> str | None:
    """The nginx executable, or None (Debian installs it in /usr/sbin, often not on PATH)."""
    return system.find("nginx", "/usr/sbin/nginx", "/usr/local/sbin/nginx")


SKIP_REASON = "nginx is not installed (apt-get install nginx-light); the real-gateway tests need its binary"
NEEDS_NGINX = system.needs(nginx_binary(), SKIP_REASON)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _config(conf: str, port: int, upstream_port: int, prefix: Path) -> str:
    body = conf.replace("{port}", str(port)).replace("{upstream}", f"127.0.0.1:{upstream_port}").replace("{prefix}", str(prefix))
    servers = body if "server {" in body else f"server {{\n  listen 127.0.0.1:{port};\n  {body}\n}}"
    # Workers of a root master drop to "nobody", which could not write the private temp dirs.
    user = "user root;\n" if os.geteuid() == 0 else ""
    return f"""{user}daemon off;
worker_processes 1;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log info;
events {{ worker_connections 1024; }}
http {{
  access_log {prefix}/access.log;
  client_body_temp_path {prefix}/tmp/client;
  proxy_temp_path {prefix}/tmp/proxy;
  fastcgi_temp_path {prefix}/tmp/fastcgi;
  uwsgi_temp_path {prefix}/tmp/uwsgi;
  scgi_temp_path {prefix}/tmp/scgi;
{servers}
}}
"""


@contextlib.contextmanager
def run_nginx(conf: str, upstream_port: int) -> Iterator[str]:
    """Start nginx with ``conf`` in front of ``127.0.0.1:upstream_port``; yield its base URL."""
    binary = nginx_binary()
    if binary is None:
        raise RuntimeError(SKIP_REASON)
    with tempfile.TemporaryDirectory(prefix="llm-doctor-nginx-") as tmp:
        prefix = Path(tmp)
        (prefix / "tmp").mkdir()
        port = free_port()
        (prefix / "nginx.conf").write_text(_config(conf, port, upstream_port, prefix))
        proc = subprocess.Popen([binary, "-p", str(prefix), "-c", str(prefix / "nginx.conf")],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            _wait_listening(proc, port, prefix)
            yield f"http://127.0.0.1:{port}"
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)


def _wait_listening(proc: subprocess.Popen[bytes], port: int, prefix: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            log = (prefix / "error.log").read_text(errors="replace") if (prefix / "error.log").exists() else ""
            raise RuntimeError(f"nginx exited with {proc.returncode}: {err.strip()} {log.strip()[-2000:]}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return
        time.sleep(0.02)
    raise RuntimeError(f"nginx did not listen on 127.0.0.1:{port} within {START_TIMEOUT_S:g} s")
