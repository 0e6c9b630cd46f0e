"""Inputs that once took time quadratic in their size now finish, with the right answer.

No timing is asserted (``bench/pathological.py`` measures the growth, docs/benchmarks.md has
the numbers): each input is sized so that the quadratic code ran for many minutes, and a hang
guard far above the linear time turns such a hang into a failure instead of a stuck suite. The
check runs in a forked child, because a regex stuck in C never sees a signal in this process.
"""

from __future__ import annotations

import multiprocessing
import traceback
from collections.abc import Callable
from pathlib import Path

import pytest

from doctor.probes.logfile import read_log
from doctor.redact import MASK, Redactor
from doctor.vllm_log import patterns
from doctor.vllm_log.parser import parse_lines

#: Only a guard against a hung test, never an assertion about speed.
HANG_GUARD_S = 60


def guarded(check: Callable[[], None]) -> None:
    """Run ``check`` in a forked child; fail with its error, or when it outlives the guard."""
    ctx = multiprocessing.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)

    def child() -> None:
        try:
            check()
            send.send(None)
        except BaseException:  # noqa: BLE001 - reported to the parent as the test's failure
            send.send(traceback.format_exc())

    proc = ctx.Process(target=child)
    proc.start()
    try:
        finished = receive.poll(HANG_GUARD_S)
        failure = receive.recv() if finished else f"still running after {HANG_GUARD_S} s: quadratic again?"
    finally:
        proc.kill()
        proc.join()
    assert failure is None, failure


def _read(tmp_path: Path, data: bytes):
    path = tmp_path / "x.log"
    path.write_bytes(data)
    evidence, errors = read_log(str(path))
    assert evidence is not None, errors
    return evidence, parse_lines(evidence.matched, str(path))


def test_a_headerless_log_of_blank_lines(tmp_path: Path) -> None:
    """No vLLM header in the first 64 KiB: the gate is tried at every position (256 KiB took 56 s)."""
    def check() -> None:
        evidence, _ = _read(tmp_path, b"\n" * (1 << 20) + b"vLLM API server version 0.9.0\n")
        assert evidence.lines_total == (1 << 20) + 1
        assert [line.text for line in evidence.matched] == ["vLLM API server version 0.9.0"]

    guarded(check)


@pytest.mark.parametrize("run", [b"7", b"AB ", b" " * 999 + b"\n"], ids=["digits", "capitals", "spaces"])
def test_headerless_runs_that_unbounded_repeats_would_rescan(tmp_path: Path, run: bytes) -> None:
    def check() -> None:
        evidence, _ = _read(tmp_path, run * ((1 << 20) // len(run)) + b"\nGPU KV cache size: 1,024 tokens\n")
        assert [line.text for line in evidence.matched][-1:] == ["GPU KV cache size: 1,024 tokens"]

    guarded(check)


def test_a_banner_of_block_elements(tmp_path: Path) -> None:
    def check() -> None:
        header = b"INFO 01-01 00:00:00 [api_server.py:1] "
        _, facts = _read(tmp_path, header + "█".encode() * 20_000 + b"\n" + header + "█ version 0.30.1".encode() + b"\n")
        assert [s.version for s in facts.startups] == ["0.30.1"]
        assert patterns.BANNER_VERSION.search("█" * 200_000) is None

    guarded(check)


def test_a_line_of_a_million_error_hits_is_read_once(tmp_path: Path) -> None:
    """8 MB of ``Error: `` on one line: the line is found once, not searched back once per hit."""
    def check() -> None:
        evidence, _ = _read(tmp_path, b"x" * 10 + b"Error: " * 1_200_000 + b"\nValueError: real\n")
        assert "ValueError: real" in [line.text for line in evidence.matched]
        assert evidence.lines_total == 2

    guarded(check)


def test_url_credentials_rule_on_a_long_dotted_run() -> None:
    """``a.a.a...`` is a scheme candidate at every word start; the scheme is bounded now."""
    def check() -> None:
        assert Redactor().text("a." * (1 << 20)) == "a." * (1 << 20)
        assert Redactor().text("a." * 50_000 + " https://user:pw@host/") == "a." * 50_000 + f" https://{MASK}@host/"

    guarded(check)
