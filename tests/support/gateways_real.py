"""Run a real Apache httpd, lighttpd, HAProxy, Caddy or Varnish (Debian's binaries) as the test's own process.

The pattern of ``tests/support/nginx.py``: never the system service; each start writes its own
configuration into a private work directory (pid files, logs, Varnish's working directory
inside it), listens on a free port of 127.0.0.1, runs in the foreground and is stopped on exit::

    with run_gateway("varnish", "sub vcl_backend_response { set beresp.do_stream = false; }", port) as url:
        ...

``extra`` is the variant's own lines, put where that product reads them: inside Apache's
``<VirtualHost>`` beside ``ProxyPass``, at the end of lighttpd's configuration, in HAProxy's
``backend`` (a variant's own ``server`` line, e.g. ``server engine {upstream} maxconn 1``, takes
the place of the default one), inside Caddy's ``reverse_proxy { }`` block (or, starting with ``site:``, in the site
block before it), and appended to Varnish's VCL. The base configuration of each streams to
``127.0.0.1:upstream_port`` with the product's defaults.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import system
from tests.support.nginx import free_port

START_TIMEOUT_S = 15.0
APACHE_MODULES = "/usr/lib/apache2/modules"


@dataclass(frozen=True)
class Product:
    """How one gateway is found, configured and started."""

    package: str  # the Debian package that installs it
    paths: tuple[str, ...]  # where Debian puts the binary, PATH aside
    write: Callable[[Path, int, int, str], list[str]]  # (work, port, upstream port, extra) -> arguments after the binary

    def binary(self) -> str | None:
        return system.find(Path(self.paths[0]).name, *self.paths)


def _apache(work: Path, port: int, upstream: int, extra: str) -> list[str]:
    modules = ("mpm_event", "authz_core", "proxy", "proxy_http", "filter", "deflate", "headers", "buffer", "substitute", "sed", "env")
    loads = "\n".join(f"LoadModule {m}_module {APACHE_MODULES}/mod_{m}.so" for m in modules)
    # a variant may spell its own ProxyPass (with parameters such as flushpackets=on)
    proxy_pass = "" if "ProxyPass " in extra else f"ProxyPass / http://127.0.0.1:{upstream}/"
    (work / "httpd.conf").write_text(f"""{loads}
ServerRoot "{work}"
ServerName 127.0.0.1
Listen 127.0.0.1:{port}
PidFile {work}/httpd.pid
ErrorLog {work}/error.log
Mutex file:{work} default
User nobody
Group nogroup
<VirtualHost 127.0.0.1:{port}>
  {proxy_pass}
  {extra}
</VirtualHost>
""")
    return ["-f", str(work / "httpd.conf"), "-DFOREGROUND"]


def _lighttpd(work: Path, port: int, upstream: int, extra: str) -> list[str]:
    (work / "lighttpd.conf").write_text(f"""server.document-root = "{work}"
server.bind = "127.0.0.1"
server.port = {port}
server.errorlog = "{work}/error.log"
server.modules = ("mod_deflate", "mod_proxy")
proxy.server = ("" => (("host" => "127.0.0.1", "port" => {upstream})))
{extra}
""")
    return ["-D", "-f", str(work / "lighttpd.conf")]


def _haproxy(work: Path, port: int, upstream: int, extra: str) -> list[str]:
    # a variant may spell its own server line (with parameters such as maxconn); ``timeout queue``
    # bounds how long a request waits for a maxconn slot
    own_server = any(line.strip().startswith("server ") for line in extra.splitlines())
    server = "" if own_server else "server engine {upstream}"
    backend = f"{server}\n  {extra}".replace("{upstream}", f"127.0.0.1:{upstream}")
    (work / "haproxy.cfg").write_text(f"""defaults
  mode http
  timeout connect 5s
  timeout client 30s
  timeout server 30s
  timeout queue 30s
frontend llm
  bind 127.0.0.1:{port}
  default_backend engine
backend engine
  {backend}
""")
    return ["-f", str(work / "haproxy.cfg"), "-db"]


def _caddy(work: Path, port: int, upstream: int, extra: str) -> list[str]:
    site = "\n".join(line.removeprefix("site:") for line in extra.splitlines() if line.startswith("site:"))
    inner = "\n".join(line for line in extra.splitlines() if not line.startswith("site:"))
    (work / "Caddyfile").write_text(f"""{{
  admin off
  auto_https off
  storage file_system {work}/data
}}
http://127.0.0.1:{port} {{
  {site}
  reverse_proxy 127.0.0.1:{upstream} {{
    {inner}
  }}
}}
""")
    return ["run", "--config", str(work / "Caddyfile"), "--adapter", "caddyfile"]


def _varnish(work: Path, port: int, upstream: int, extra: str) -> list[str]:
    (work / "default.vcl").write_text(f"""vcl 4.1;
backend engine {{ .host = "127.0.0.1"; .port = "{upstream}"; }}
{extra}
""")
    # -j none: no jail (the tests may run as root); -n: a private working directory
    return ["-F", "-j", "none", "-n", str(work / "varnish"), "-a", f"127.0.0.1:{port}",
            "-f", str(work / "default.vcl"), "-s", "malloc,32m", "-p", "vcc_allow_inline_c=off"]


PRODUCTS: dict[str, Product] = {
    "apache": Product("apache2", ("/usr/sbin/apache2",), _apache),
    "lighttpd": Product("lighttpd", ("/usr/sbin/lighttpd",), _lighttpd),
    "haproxy": Product("haproxy", ("/usr/sbin/haproxy",), _haproxy),
    "caddy": Product("caddy", ("/usr/bin/caddy",), _caddy),
    "varnish": Product("varnish", ("/usr/sbin/varnishd",), _varnish),
}


def skip_reason(kind: str) -> str:
    return f"{PRODUCTS[kind].package} is not installed (apt-get install {PRODUCTS[kind].package}); its real-gateway tests need it"


def needs(kind: str) -> pytest.MarkDecorator:
    """The skip mark of ``kind``'s tests: skipped locally without it, an error in CI."""
    return system.needs(PRODUCTS[kind].binary(), skip_reason(kind))


@contextlib.contextmanager
def run_gateway(kind: str, extra: str, upstream_port: int) -> Iterator[str]:
    """Start ``kind`` with ``extra`` in front of ``127.0.0.1:upstream_port``; yield its base URL."""
    product = PRODUCTS[kind]
    binary = product.binary()
    if binary is None:
        system.missing(skip_reason(kind))
    with tempfile.TemporaryDirectory(prefix=f"llm-doctor-{kind}-") as tmp:
        work = Path(tmp)
        os.chmod(work, 0o755)  # Apache's workers run as nobody
        port = free_port()
        argv = [binary, *product.write(work, port, upstream_port, extra)]
        log = (work / "stderr.log").open("wb")
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=work, start_new_session=True)
        try:
            _wait_listening(kind, proc, port, work)
            yield f"http://127.0.0.1:{port}"
        finally:
            _stop(proc)
            log.close()


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop the gateway and the children it started (Apache's and Varnish's workers share its session)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, 15)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 9)
        proc.wait(timeout=5)


def _wait_listening(kind: str, proc: subprocess.Popen[bytes], port: int, work: Path) -> None:
    import socket

    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            logs = " ".join(p.read_text(errors="replace")[-2000:] for p in (work / "stderr.log", work / "error.log") if p.exists())
            raise RuntimeError(f"{kind} exited with {proc.returncode}: {logs.strip()}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return
        time.sleep(0.05)
    raise RuntimeError(f"{kind} did not listen on 127.0.0.1:{port} within {START_TIMEOUT_S:g} s")
