"""A real Prometheus (Debian package ``prometheus``) scraping given targets, for as long as a block runs.

History mode is only as good as what a real Prometheus stores and answers, so the tests that
exercise it run one: the unit tests over a ticking exporter, and the real-vLLM stage over the
real server. The server listens on a free port of 127.0.0.1, keeps its data in a directory of
the caller's, and is terminated when the block ends.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import httpx
import pytest

from tests.support import system
from tests.support.nginx import free_port

STARTUP_DEADLINE_S = 90.0  # generous: only a broken setup should reach it
STOP_TIMEOUT_S = 10.0


def wait_for(predicate: Callable[[], bool], what: str, deadline_s: float = STARTUP_DEADLINE_S) -> None:
    """Poll ``predicate`` (HTTP errors count as not yet) until it holds; fail the test past the deadline."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        with contextlib.suppress(httpx.HTTPError):
            if predicate():
                return
        time.sleep(0.2)
    pytest.fail(f"{what} not reached within {deadline_s:g} s")


def scrapes(url: str) -> float:
    """How many scrapes of its first target the Prometheus at ``url`` holds from the last 5 minutes."""
    return _first_value(url, "count_over_time(up[5m])")


def last_scrape(url: str) -> float:
    """The Unix time of the latest scrape of its first target (0 before the first one)."""
    return _first_value(url, "timestamp(up)")


def _first_value(url: str, query: str) -> float:
    answer = httpx.get(f"{url}/api/v1/query", params={"query": query}, timeout=2).json()
    rows = answer["data"]["result"]
    return float(rows[0]["value"][1]) if rows else 0.0


@contextlib.contextmanager
def run_prometheus(targets: list[str], workdir: Path, *, interval_s: float = 1.0,
                   job: str = "vllm", labels: Mapping[str, Mapping[str, str]] | None = None) -> Iterator[str]:
    """Prometheus scraping ``targets`` (``host:port``) every ``interval_s``; yields its base URL.
    ``labels``: per target, the labels its series get (as Kubernetes service discovery gives a
    pod's series its ``namespace``)."""
    binary = shutil.which("prometheus")
    if binary is None:
        system.missing("prometheus binary not found; install the Debian package `prometheus`")
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "prometheus.yml"
    statics = "".join(f"      - targets: ['{t}']\n" + (f"        labels: {{{', '.join(f'{k}: {v}' for k, v in (labels or {})[t].items())}}}\n"
                                                            if t in (labels or {}) else "") for t in targets)
    config.write_text(
        f"global:\n  scrape_interval: {interval_s:g}s\n  evaluation_interval: {interval_s:g}s\n"
        f"scrape_configs:\n  - job_name: {job}\n    static_configs:\n{statics}"
    )
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [binary, f"--config.file={config}", f"--storage.tsdb.path={workdir / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
        stdout=subprocess.DEVNULL, stderr=(workdir / "prometheus.log").open("wb"),
    )
    try:
        wait_for(lambda: httpx.get(f"{url}/-/ready", timeout=2).status_code == 200, "Prometheus ready")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=STOP_TIMEOUT_S)
