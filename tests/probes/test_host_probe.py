"""The host probe with real psutil, finding a real child process that looks like vLLM."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from doctor.probes import host as host_probe
from doctor.probes.host import collect_host
from doctor.settings.values import same_place

SECRET = "sk-hostprobe-0123456789abcdef"

# Listens like `vllm serve --port N` does, then idles until killed.
SERVER = """
import socket, sys, time
sock = socket.socket()
sock.bind(("127.0.0.1", int(sys.argv[sys.argv.index("--port") + 1])))
sock.listen()
print(sock.getsockname()[1], flush=True)
time.sleep(600)
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _other_vllm(*ours: int) -> bool:
    """Whether a vLLM-like process other than the test's own runs here (a real server, say)."""
    return any(host_probe._vllm_rank(p) is not None for p in psutil.process_iter() if p.pid not in (os.getpid(), *ours))


def _denied(kind: str = "inet") -> list[object]:
    """``psutil.net_connections`` where listing sockets needs privileges (macOS)."""
    raise psutil.AccessDenied()


@contextlib.contextmanager
def serving(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], int]]:
    script = tmp_path / "vllm"  # so the command line reads `python .../vllm serve ...`
    script.write_text(SERVER)
    proc = subprocess.Popen(
        [sys.executable, str(script), "serve", "/srv/models/tiny", "--port", str(_free_port()),
         "--max-model-len", "1024", "--api-key", SECRET],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        yield proc, port
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture
def fake_vllm(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], int]]:
    with serving(tmp_path) as served:
        yield served


def test_machine_facts() -> None:
    host, errors = collect_host(None)
    assert errors == []
    assert host.hostname and host.python and host.os
    assert host.cpu_model
    assert host.cpu_count_logical and host.cpu_count_logical >= (host.cpu_count_physical or 1)
    assert host.memory_total_bytes and 0 < (host.memory_available_bytes or 0) <= host.memory_total_bytes
    assert len(host.load_avg) == 3
    assert host.cpu_percent is not None and 0 <= host.cpu_percent <= 100


def test_finds_local_engine_by_its_listening_port(fake_vllm: tuple[subprocess.Popen[str], int]) -> None:
    proc, port = fake_vllm
    host, errors = collect_host(f"http://localhost:{port}/v1")
    assert errors == []
    found = host.vllm_process
    assert found is not None
    assert (found.pid, found.found_by) == (proc.pid, "port")
    assert found.rss_bytes and found.rss_bytes > 0 and found.num_threads and found.num_threads >= 1
    assert found.cpu_percent is not None
    assert found.cmdline and f"serve /srv/models/tiny --port {port} --max-model-len 1024" in found.cmdline
    assert SECRET not in found.cmdline and "--api-key [REDACTED]" in found.cmdline


def test_remote_engine_is_found_by_name(fake_vllm: tuple[subprocess.Popen[str], int]) -> None:
    proc, _ = fake_vllm
    if _other_vllm(proc.pid):
        pytest.skip("another vLLM-like process runs on this machine: which one a remote URL means is a guess")
    host, errors = collect_host("http://10.255.0.9:8000")  # not this host: no port lookup
    assert errors == []
    assert host.vllm_process is not None
    assert (host.vllm_process.pid, host.vllm_process.found_by) == (proc.pid, "name")


def test_port_lookup_denied_falls_back_to_name(
    fake_vllm: tuple[subprocess.Popen[str], int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where listing sockets needs privileges (macOS), the name still finds the process: of
    several vLLM servers on the host (a real one may run beside the test), the one whose
    ``--port`` is the URL's."""
    proc, port = fake_vllm
    monkeypatch.setattr(host_probe.psutil, "net_connections", _denied)
    host, _ = collect_host(f"http://127.0.0.1:{port}")
    assert host.vllm_process is not None
    assert (host.vllm_process.pid, host.vllm_process.found_by) == (proc.pid, "name")


def test_of_several_servers_by_name_the_one_on_the_urls_port(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two vLLM servers on one host and no socket listing: the older one is not the URL's."""
    monkeypatch.setattr(host_probe.psutil, "net_connections", _denied)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with serving(tmp_path / "a") as (older, _), serving(tmp_path / "b") as (newer, port):
        host, _errors = collect_host(f"http://127.0.0.1:{port}")
        assert host.vllm_process is not None
        assert host.vllm_process.pid == newer.pid != older.pid


def test_local_engine_without_a_process_is_said() -> None:
    if _other_vllm():
        pytest.skip("a vLLM-like process runs on this machine")
    host, errors = collect_host("http://127.0.0.1:1")
    assert host.vllm_process is None
    (error,) = errors
    assert (error.source, error.kind, error.fatal) == ("host", "unavailable", False)
    assert "port 1" in error.message


def _own_address() -> list[str]:
    """One non-loopback IPv4 address of this machine's interfaces, where it has one."""
    found = [a.address for addrs in psutil.net_if_addrs().values() for a in addrs
             if a.family == socket.AF_INET and not a.address.startswith("127.")]
    return found[:1]


THIS_HOST = ["localhost", "LOCALHOST", "api.localhost", "localhost.localdomain", "127.0.0.1", "127.1.2.3", "[::1]",
             "0.0.0.0", "[::]", socket.gethostname(), *_own_address()]
REMOTE = ["192.0.2.1", "[2001:db8::1]", "engine.example.invalid", "localhost.example.invalid"]


@pytest.mark.parametrize("host", THIS_HOST)
def test_every_spelling_of_this_host_is_local_to_the_host_probe_and_to_the_settings(host):
    """One rule (``doctor.foundation.this_host``) for both "same host" questions: the host probe
    looks for the engine's process, and ``--gateway`` equal to ``--engine`` is the same server."""
    assert host_probe._local_port(f"http://{host}:8000/v1") == 8000
    assert same_place(f"http://{host}:8000/v1", "http://127.0.0.1:8000/v1")


@pytest.mark.parametrize("host", REMOTE)
def test_another_host_is_remote_to_both(host):
    assert host_probe._local_port(f"http://{host}:8000") is None
    assert not same_place(f"http://{host}:8000", "http://127.0.0.1:8000")
