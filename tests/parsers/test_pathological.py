"""Inputs that once took time quadratic in their size now finish, with the right answer.

No timing is asserted (``bench/pathological.py`` measures the growth, docs/benchmarks.md has
the numbers): each input is sized so that the quadratic code ran for many minutes, and a hang
guard far above the linear time turns such a hang into a failure instead of a stuck suite. The
check runs in a forked child, because a regex stuck in C never sees a signal in this process.
"""

from __future__ import annotations

import importlib
import multiprocessing
import pkgutil
import re
import traceback
from collections.abc import Callable
from pathlib import Path

import pytest

from doctor import engine_readers
from doctor.derive.gateway import MAX_TELLS, identify
from doctor.engine_metrics.metric_names import ExpositionError, parse_exposition
from doctor.engine_readers import vllm_patterns
from doctor.engine_readers.capacity import capacity_from_exposition
from doctor.engine_readers.logs import parse_engine_log
from doctor.engine_readers.vllm import parse_lines
from doctor.foundation.redact import MASK, Redactor
from doctor.logscan import gate, prefixes, printed_values, scanner
from doctor.probes.logfile import read_log
from tests.support.regex_shapes import leading_unbounded

ROOT = Path(__file__).resolve().parents[2]

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
        assert vllm_patterns.BANNER_VERSION.search("█" * 200_000) is None

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


# --- issue 22 item 11: the paths a fuzzing campaign found quadratic ------------------------------

VLLM = b"INFO 01-01 00:00:00 [loggers.py:1] "


def test_a_vllm_stats_line_ending_in_a_long_run_of_letters(tmp_path: Path) -> None:
    """The KV-usage part of a stats line (``GPU KV cache usage``) was tried from every letter of
    the run, each attempt reading to its end (32 KB: 16.7 s); it starts a word now."""
    def check() -> None:
        stats = VLLM + b"Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, Running: 3 reqs, "
        _, facts = _read(tmp_path, stats + b"a" * (1 << 20) + b"\n" + stats + b"GPU KV cache usage: 7.5%\n")
        assert [(p.running, p.kv_usage_pct) for p in facts.stats] == [(3.0, None), (3.0, 7.5)]

    guarded(check)


def test_the_redactor_on_a_credential_header_of_many_masks() -> None:
    """``authorization: `` then ``[REDACTED]a`` many times: whether anything but masks was left
    was asked per character per mask (64 KB: 8.6 s); one pass over the span now."""
    def check() -> None:
        assert Redactor().text("authorization: " + "[REDACTED]a" * 200_000) == f"authorization: {MASK}"
        assert Redactor().text("authorization: " + MASK * 200_000) == "authorization: " + MASK * 200_000

    guarded(check)


def test_a_tgi_args_line_of_one_long_word(tmp_path: Path) -> None:
    """TGI's ``Args {`` items were searched from every character of a word (32 KB: 4.7 s)."""
    def check() -> None:
        head = b"INFO text_generation_launcher: Args { "
        _, facts = _read_engine(tmp_path, head + b"a" * (1 << 20) + b"\n" + head + b"max_total_tokens: 4096 }\n")
        assert facts.engine == "tgi" and facts.facts["max_model_len"].value == 4096

    guarded(check)


def test_a_repeated_llamacpp_build_info(tmp_path: Path) -> None:
    """Each ``build info |`` of a line read the rest of it for ``build=`` (256 KB: 24 s; each of
    these 64 lines, as long as the log reader keeps one, took 2.7 s)."""
    def check() -> None:
        marker = b"INFO [            main] build info |"
        _, facts = _read_engine(tmp_path, (marker * 1800 + b"\n") * 64 + marker + b' build=4351 commit="4da69d1"\n'
                                + b"llama_context: n_ctx = 4096\n")
        assert facts.engine == "llama.cpp" and facts.facts["version"].value == "b4351"

    guarded(check)


def test_the_gateway_view_of_a_response_with_many_headers() -> None:
    """Each of 8,000 ``x-envoy-*`` headers was looked up in a list of the ones before (2.6 s)."""
    def check() -> None:
        headers = {f"x-envoy-{i}": "1" for i in range(400_000)} | {"server": "nginx"}
        view = identify([headers, headers])
        assert view.name.startswith("nginx") and all(len(hop.tells) <= MAX_TELLS for hop in view.hops)

    guarded(check)


def test_a_scrape_line_too_long_for_prometheus_clients_label_parser() -> None:
    """prometheus_client's label parser is quadratic in a line's length (1 MB: 6.7 s, upstream):
    a line longer than any exposition's is refused before it, with the reason."""
    def check() -> None:
        text = 'vllm:num_requests_running{a="' + '\\"' * (4 << 20) + '"} 1\n'
        with pytest.raises(ExpositionError, match=r"line 1 is 8,388,641 characters long, more than any exposition line \(65,536\)"):
            parse_exposition(text)
        assert capacity_from_exposition(text + "sglang:max_total_num_tokens 5\n") == {}

    guarded(check)


def _read_engine(tmp_path: Path, data: bytes):
    path = tmp_path / "x.log"
    path.write_bytes(data)
    evidence, errors = read_log(str(path))
    assert evidence is not None, errors
    return evidence, parse_engine_log(evidence.matched, str(path))


# --- issue 30 item 10: a stats line of digits, a border before blanks ------------------------------


def test_a_vllm_stats_line_of_a_long_run_of_digits(tmp_path: Path) -> None:
    """``\\d+ Engines Aggregated`` (the data-parallel prefix) was tried from every digit of the
    run, each try to its end (64 KiB: 26-34 s); only a run's first digit tries it now."""
    def check() -> None:
        stats = b"Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, Running: 3 reqs"
        _, facts = _read(tmp_path, VLLM + b"Avg prompt throughput: " + b"7" * (1 << 20) + b"\n"
                         + VLLM + b"12 Engines Aggregated: " + stats + b"\n" + VLLM + b"Engine 003: " + stats + b"\n")
        assert [(p.engine, p.running) for p in facts.stats] == [("12 Engines Aggregated", 3.0), ("003", 3.0)]
        assert vllm_patterns.STATS.search("7" * (1 << 20) + " Engines Aggregated: ") is None

    guarded(check)


def test_a_box_border_before_a_long_run_of_blanks(tmp_path: Path) -> None:
    """The right border of a boxed log (``│`` at the end) was searched from every blank of a run
    before it (16 KiB: 4.5 s); the border is still taken off a boxed line."""
    def check() -> None:
        _, facts = _read(tmp_path, VLLM + "│ version 0.9.0 ".encode() + b" " * (1 << 20) + b"x\n"
                         + VLLM + "vLLM API server version 0.30.1     │".encode() + b"\n")
        assert [s.version for s in facts.startups] == ["0.30.1"]

    guarded(check)


#: ``NAME.search(`` and its kin, as a module uses its own patterns, or ``P.NAME.search(`` as the
#: vLLM reader uses ``doctor.engine_readers.vllm_patterns``'s (``gate.NAME``: the scanner, its gate's).
SEARCHED = r"\b{prefix}(?P<name>[A-Z_][A-Z0-9_]*)\.(?:search|finditer|findall|sub|subn|split)\("


def _searched_patterns() -> list[tuple[str, str]]:
    """(module, name) of every module-level pattern of the log readers that some code searches."""
    modules = [gate, prefixes, printed_values, scanner,
               *(importlib.import_module(f"doctor.engine_readers.{m.name}") for m in pkgutil.iter_modules(engine_readers.__path__))]
    shared = {m["name"] for path in ROOT.joinpath("doctor").rglob("*.py")
              for m in re.finditer(SEARCHED.format(prefix=r"(?:P|gate)\."), path.read_text())}
    found = []
    for module in modules:
        own = {m["name"] for m in re.finditer(SEARCHED.format(prefix=""), Path(str(module.__file__)).read_text())}
        names = own | shared if module in (vllm_patterns, gate) else own
        found += [(module.__name__, name) for name, value in sorted(vars(module).items())
                  if isinstance(value, re.Pattern) and isinstance(value.pattern, str) and name in names]
    return found


def test_no_searched_log_pattern_begins_with_an_unguarded_unbounded_repeat() -> None:
    """The shape behind every quadratic search found so far, held without timing anything: each
    pattern the log readers search (as opposed to match at a position) begins with a literal, a
    bounded repeat, or a lookbehind or anchor that keeps a run's inner positions from trying."""
    searched = _searched_patterns()
    assert ("doctor.engine_readers.vllm_patterns", "STATS") in searched and ("doctor.logscan.prefixes", "_BOX_RIGHT") in searched
    assert [(m, n) for m, n in searched if leading_unbounded(getattr(importlib.import_module(m), n))] == []
    # the shape it looks for: the two patterns as they were
    assert leading_unbounded(re.compile(r"(?:Engine (?P<e>\d+): |(?P<a>\d+ Engines Aggregated): )?Avg"))
    assert leading_unbounded(re.compile(r"\s*│\s*$")) and not leading_unbounded(re.compile(r"(?<!\s)\s*│\s*$"))
