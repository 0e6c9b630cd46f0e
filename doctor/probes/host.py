"""Host facts through psutil: the CPU and memory the engine (or the client) runs on, and vLLM's process.

vLLM's API server tokenises, detokenises and serialises every streamed token on one Python
thread; when it is short of CPU, inter-token gaps grow while the GPU idles. So besides the
machine (CPU model and topology, load, memory, swap) the probe finds the vLLM server process:
by the engine URL's listening port when the engine is on this host, else by its command line
(``vllm serve``, ``python -m vllm.entrypoints...``), and samples its CPU use.

The command line is kept with API keys removed here, not only by the final redaction pass.
Environment variables are never read: they hold tokens far more often than facts.
"""

from __future__ import annotations

import contextlib
import os
import platform
import shlex
import socket
import time
from glob import glob
from pathlib import Path
from urllib.parse import urlsplit

import psutil

from doctor.evidence import EvidenceError, HostEvidence, ProcessInfo
from doctor.foundation.redact import Redactor
from doctor.foundation.this_host import is_this_host

SOURCE = "host"
CPU_SAMPLE_S = 0.2
_DEFAULT_PORTS = {"http": 80, "https": 443}


def collect_host(engine_url: str | None) -> tuple[HostEvidence, list[EvidenceError]]:
    """Describe this machine and, when found, the vLLM server process on it: (evidence, errors).

    CPU, memory, load and the engine process's own usage tell a saturated host apart from a
    slow engine. ``engine_url`` names the port to look for the vLLM process on (local URLs only).
    """
    errors: list[EvidenceError] = []
    memory, swap = psutil.virtual_memory(), psutil.swap_memory()
    host = HostEvidence(
        hostname=socket.gethostname(),
        os=_os_name(),
        python=platform.python_version(),
        cpu_model=_cpu_model(),
        cpu_count_logical=psutil.cpu_count(logical=True),
        cpu_count_physical=psutil.cpu_count(logical=False),
        cpu_sockets=_cpu_sockets(),
        load_avg=[round(x, 2) for x in psutil.getloadavg()],
        memory_total_bytes=memory.total,
        memory_available_bytes=memory.available,
        swap_total_bytes=swap.total,
        swap_used_bytes=swap.used,
    )
    port = _local_port(engine_url)
    found = _find_vllm(port)
    # One sampling window for the host and the process: cpu_percent(None) measures since the last call.
    psutil.cpu_percent(None)
    if found is not None:
        with contextlib.suppress(psutil.Error):
            found[0].cpu_percent(None)
    time.sleep(CPU_SAMPLE_S)
    host.cpu_percent = psutil.cpu_percent(None)
    if found is not None:
        host.vllm_process = _describe(*found)
    if port is not None and host.vllm_process is None:
        errors.append(
            EvidenceError(
                SOURCE, engine_url or "", "find the vLLM process", "unavailable",
                f"the engine URL points at this host (port {port}) but no vLLM process was found "
                "listening there or by name; its CPU use is unknown",
            )
        )
    return host, errors


def _local_port(engine_url: str | None) -> int | None:
    """The engine's port when its URL names this host; ``None`` for a remote engine or no URL."""
    if not engine_url:
        return None
    try:
        parts = urlsplit(engine_url)
        port = parts.port or _DEFAULT_PORTS.get(parts.scheme)
    except ValueError:
        return None
    if not parts.hostname or port is None:
        return None
    return port if is_this_host(parts.hostname) else None


def _find_vllm(port: int | None) -> tuple[psutil.Process, str] | None:
    """The vLLM server process and how it was found (``port`` or ``name``)."""
    if port is not None:
        owner = _listening_process(port)
        if owner is not None and _vllm_rank(owner) is not None:
            return owner, "port"
        by_name = _process_by_name(port)
        if by_name is not None:
            return by_name, "name"
        # Something else holds the port (a container proxy, a wrapper): it is still what serves it.
        return (owner, "port") if owner is not None else None
    by_name = _process_by_name()
    return (by_name, "name") if by_name is not None else None


def _listening_process(port: int) -> psutil.Process | None:
    """The oldest process listening on ``port`` (several when vLLM runs many API servers)."""
    try:
        connections = psutil.net_connections(kind="inet")
    except (psutil.AccessDenied, OSError):
        return None  # e.g. macOS without root: fall back to the name
    pids = {c.pid for c in connections if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port and c.pid}
    processes = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            processes.append(psutil.Process(pid))
    return min(processes, key=_create_time, default=None)


def _process_by_name(port: int | None = None) -> psutil.Process | None:
    """The oldest process whose command line is a vLLM server, else any vLLM-named process; of
    several servers (one host, several engines), first the one whose command line names ``port``."""
    best: tuple[int, bool, float, psutil.Process] | None = None
    for proc in psutil.process_iter():
        if proc.pid == os.getpid():
            continue
        rank = _vllm_rank(proc)
        if rank is None:
            continue
        key = (rank, port is None or not _names_port(proc, port), _create_time(proc), proc)
        if best is None or key[:3] < best[:3]:
            best = key
    return best[3] if best else None


def _names_port(proc: psutil.Process, port: int) -> bool:
    """Whether the command line says ``--port PORT`` (or ``--port=PORT``), as ``vllm serve`` takes it."""
    try:
        cmdline = proc.cmdline()
    except psutil.Error:
        return False
    wanted = str(port)
    return any((arg == "--port" and cmdline[i + 1 : i + 2] == [wanted]) or arg == f"--port={wanted}"
               for i, arg in enumerate(cmdline))


def _vllm_rank(proc: psutil.Process) -> int | None:
    """0: a vLLM API server (``vllm serve``, ``vllm.entrypoints``); 1: another vLLM process; None: not vLLM."""
    try:
        cmdline = proc.cmdline()
        name = proc.name()
    except psutil.Error:
        return None
    for i, arg in enumerate(cmdline):
        if arg.startswith("vllm.entrypoints"):
            return 0
        if os.path.basename(arg) == "vllm" and cmdline[i + 1 : i + 2] == ["serve"]:
            return 0
    if "vllm" in name.lower():  # VLLM::EngineCore, VLLM::Worker_TP0 (setproctitle) and the like
        return 1
    return None


def _create_time(proc: psutil.Process) -> float:
    try:
        return proc.create_time()
    except psutil.Error:
        return float("inf")


def _describe(proc: psutil.Process, found_by: str) -> ProcessInfo | None:
    """The process's facts, sampled after ``CPU_SAMPLE_S``; ``None`` if it exited meanwhile."""
    info = ProcessInfo(pid=proc.pid, found_by=found_by)
    try:
        with proc.oneshot():
            info.name = proc.name()
            info.cpu_percent = proc.cpu_percent(None)
            info.rss_bytes = proc.memory_info().rss
            info.num_threads = proc.num_threads()
            info.cmdline = Redactor().text(shlex.join(proc.cmdline()))
    except psutil.NoSuchProcess:
        return None
    except psutil.AccessDenied:
        pass  # another user's process: keep what was readable
    return info


def _os_name() -> str:
    with contextlib.suppress(OSError):
        pretty = platform.freedesktop_os_release().get("PRETTY_NAME")
        if pretty:
            return f"{pretty} ({platform.system()} {platform.release()} {platform.machine()})"
    return platform.platform()


def _cpu_model() -> str | None:
    """The CPU's marketing name; psutil does not expose it, ``platform.processor()`` is often empty on Linux."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Model", "Hardware", "cpu model") and value.strip():
                return value.strip()
    return platform.processor() or platform.machine() or None


def _cpu_sockets() -> int | None:
    """CPU packages (sockets) from sysfs, which psutil does not count; ``None`` off Linux."""
    packages = set()
    for path in glob("/sys/devices/system/cpu/cpu[0-9]*/topology/physical_package_id"):
        with contextlib.suppress(OSError):
            packages.add(Path(path).read_text().strip())
    return len(packages) or None
