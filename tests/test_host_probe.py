"""The host probe with real psutil, finding a real child process that looks like vLLM."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from doctor.probes import host as host_probe
from doctor.probes.host import collect_host

SECRET = "sk-hostprobe-0123456789abcdef"

# Listens like `vllm serve` does, then idles until killed.
SERVER = """
import socket, sys, time
sock = socket.socket()
sock.bind(("127.0.0.1", 0))
sock.listen()
print(sock.getsockname()[1], flush=True)
time.sleep(600)
"""


@pytest.fixture
def fake_vllm(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], int]]:
    script = tmp_path / "vllm"  # so the command line reads `python .../vllm serve ...`
    script.write_text(SERVER)
    proc = subprocess.Popen(
        [sys.executable, str(script), "serve", "/srv/models/tiny", "--max-model-len", "1024", "--api-key", SECRET],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        yield proc, port
    finally:
        proc.kill()
        proc.wait()


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
    assert found.cmdline and "serve /srv/models/tiny --max-model-len 1024" in found.cmdline
    assert SECRET not in found.cmdline and "--api-key [REDACTED]" in found.cmdline


def test_remote_engine_is_found_by_name(fake_vllm: tuple[subprocess.Popen[str], int]) -> None:
    proc, _ = fake_vllm
    host, errors = collect_host("http://10.255.0.9:8000")  # not this host: no port lookup
    assert errors == []
    assert host.vllm_process is not None
    assert (host.vllm_process.pid, host.vllm_process.found_by) == (proc.pid, "name")


def test_port_lookup_denied_falls_back_to_name(
    fake_vllm: tuple[subprocess.Popen[str], int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where listing sockets needs privileges (macOS), the name still finds the process."""
    proc, port = fake_vllm

    def denied(kind: str = "inet") -> list[object]:
        raise psutil.AccessDenied()

    monkeypatch.setattr(host_probe.psutil, "net_connections", denied)
    host, _ = collect_host(f"http://127.0.0.1:{port}")
    assert host.vllm_process is not None
    assert (host.vllm_process.pid, host.vllm_process.found_by) == (proc.pid, "name")


def test_local_engine_without_a_process_is_said() -> None:
    if any(host_probe._vllm_rank(p) is not None for p in psutil.process_iter()):
        pytest.skip("a vLLM-like process runs on this machine")
    host, errors = collect_host("http://127.0.0.1:1")
    assert host.vllm_process is None
    (error,) = errors
    assert (error.source, error.kind, error.fatal) == ("host", "unavailable", False)
    assert "port 1" in error.message
