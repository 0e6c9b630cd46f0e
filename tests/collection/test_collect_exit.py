"""``llm-doctor collect`` exits 2 when it gathered nothing a diagnosis can start from.

The failing target is a real closed port on 127.0.0.1 (connection refused); the usable case
reads a real vLLM startup log from ``fixtures/logs``.
"""

from __future__ import annotations

import socket
from pathlib import Path

from typer.testing import CliRunner

from doctor.bundle import load_path
from doctor.cli import app
from doctor.exit_codes import ExitCode, usable_evidence
from tests.support import bundles

LOG = Path(__file__).resolve().parents[2] / "fixtures" / "logs" / "startup-0.32.0-cpu-default.log"


def closed_port() -> int:
    """A port nothing listens on: bound, read, released."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def collect(tmp_path: Path, *extra: str) -> tuple[int, Path]:
    out = tmp_path / "c.json"
    result = CliRunner().invoke(app, ["collect", "--engine", f"http://127.0.0.1:{closed_port()}", "--requests", "1",
                                      "--warmup", "0", "--no-gpu", "--no-host", "-o", str(out), *extra])
    return result.exit_code, out


def test_unreachable_engine_is_no_usable_evidence(tmp_path):
    code, out = collect(tmp_path)
    assert code == ExitCode.NO_DIAGNOSIS
    assert load_path(out).errors  # the bundle is still written, saying what failed


def test_a_readable_log_is_usable_evidence(tmp_path):
    code, out = collect(tmp_path, "--log", str(LOG))
    assert code == ExitCode.HEALTHY
    assert load_path(out).log is not None


def test_a_successful_request_is_usable_but_failed_ones_are_not():
    ok = bundles.request("direct", 0, ttft=0.1, gaps=[0.02] * 3)
    refused = bundles.request("direct", 1, ttft=0.1, gaps=[], outcome="connect")
    assert usable_evidence(bundles.bundle(stream=bundles.stream([refused, ok])))
    assert not usable_evidence(bundles.bundle(stream=bundles.stream([refused])))
    assert not usable_evidence(bundles.bundle())
