"""Reading a log: stdin and .gz, bad input as evidence errors, bounded memory, chunk boundaries,
and what ``llm-doctor log [--json]`` prints."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from doctor.commands.log import log_command_output
from doctor.engine_readers.vllm import parse_lines
from doctor.evidence.log import LogLine
from doctor.logscan.scanner import Scanner
from doctor.probes.logfile import read_log

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "logs"
DEFAULT = LOGS / "startup-0.32.0-cpu-default.log"
STATS = ("(APIServer pid=1) INFO 11-30 05:39:16 [loggers.py:335] Engine 000: Avg prompt throughput: {n}.0 tokens/s, "
         "Avg generation throughput: 6.9 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%, "
         "Prefix cache hit rate: 0.0%\n")
ACCESS = 'INFO:     127.0.0.1:42886 - "POST /v1/completions HTTP/1.1" 200 OK\n'


def read_with_two_workers(path: Path) -> tuple[int, int, list[tuple[int, str]]]:
    """read_log with the parallel split forced on: (lines_total, bytes_total, kept lines).

    In a fresh interpreter: workers are forked only from a process with no other thread.
    """
    code = ("import json, sys; import doctor.probes.logfile as lf; lf.PARALLEL_MIN = 0; lf._workers = lambda: 2; "
            "ev, err = lf.read_log(sys.argv[1]); assert lf._can_fork() and not err; "
            "print(json.dumps([ev.lines_total, ev.bytes_total, [[l.no, l.text] for l in ev.matched]]))")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).resolve().parents[2], check=True)
    lines_total, bytes_total, kept = json.loads(out.stdout)
    return lines_total, bytes_total, [tuple(item) for item in kept]


def _kept(evidence) -> list[tuple[int, str]]:
    return [(line.no, line.text) for line in evidence.matched]


# -- bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "kind", "words"),
    [
        (lambda d: d / "missing.log", "unreadable", "No such file"),
        (lambda d: d, "unreadable", "directory"),
        (lambda d: (d / "file").write_text("x") and d / "file" / "vllm.log", "unreadable", "Not a directory"),
        (lambda d: ((d / "empty.log").write_bytes(b"") and d / "empty.log") or d / "empty.log", "malformed", "empty"),
        (lambda d: (d / "core.bin").write_bytes(b"\x7fELF\x00\x00\x01" * 100) and d / "core.bin", "malformed", "binary"),
        (lambda d: (d / "ps.log").write_bytes(DEFAULT.read_text().encode("utf-16")) and d / "ps.log", "malformed", "UTF-16"),
        (lambda d: (d / "x.log.gz").write_bytes(b"\x1f\x8bnot gzip at all\n") and d / "x.log.gz", "malformed", "gzip"),
    ],
    ids=["missing", "directory", "unreadable", "empty", "binary", "utf-16", "bad-gzip"],
)
def test_bad_input_is_a_fatal_evidence_error(tmp_path: Path, make, kind: str, words: str) -> None:
    path = make(tmp_path)
    evidence, errors = read_log(str(path))
    assert evidence is None
    assert [(e.source, e.kind, e.fatal) for e in errors] == [("log", kind, True)]
    assert words in errors[0].message and errors[0].target == str(path)


@pytest.mark.parametrize("name", ["vllm.log.gz", "vllm.log.1"])  # by content: logrotate names vary
def test_gzip_is_read_like_the_plain_file(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_bytes(gzip.compress(DEFAULT.read_bytes()))
    plain, _ = read_log(str(DEFAULT))
    packed, errors = read_log(str(path))
    assert errors == [] and _kept(packed) == _kept(plain) and packed.lines_total == plain.lines_total


def test_a_text_log_named_gz_is_read_as_text(tmp_path: Path) -> None:
    path = tmp_path / "vllm.log.gz"
    path.write_bytes(DEFAULT.read_bytes())
    evidence, errors = read_log(str(path))
    assert errors == [] and evidence is not None and evidence.lines_total == 405


def test_a_truncated_gzip_keeps_what_came_before_the_cut(tmp_path: Path) -> None:
    data = gzip.compress(((STATS.format(n=1) + ACCESS * 50) * 2000).encode())
    path = tmp_path / "cut.log.gz"
    path.write_bytes(data[: len(data) // 2])
    evidence, errors = read_log(str(path))
    assert [(e.kind, e.fatal) for e in errors] == [("cut", False)]
    assert evidence is not None and len(evidence.matched) > 10


def test_a_truncated_gzip_loses_nothing_before_the_cut(tmp_path: Path) -> None:
    """A real log gzipped and cut at 90 %: every line that the intact bytes hold is read (a
    decompressor that drops the read in flight loses up to a whole read, here everything)."""
    packed = gzip.compress(DEFAULT.read_bytes())
    cut = packed[: len(packed) * 9 // 10]
    before = zlib.decompressobj(wbits=31).decompress(cut)  # what the intact bytes decode to
    path = tmp_path / "cut.log.gz"
    path.write_bytes(cut)
    evidence, errors = read_log(str(path))
    assert [(e.kind, e.fatal) for e in errors] == [("cut", False)]
    assert evidence.bytes_total == len(before)
    assert evidence.lines_total == before.count(b"\n") + (not before.endswith(b"\n"))
    assert f"analysed the {evidence.lines_total:,} lines" in errors[0].message
    plain, _ = read_log(str(DEFAULT))
    assert _kept(evidence) == [line for line in _kept(plain) if line[0] < evidence.lines_total]


def test_concatenated_gzip_members_read_as_one_log(tmp_path: Path) -> None:
    data = DEFAULT.read_bytes()
    path = tmp_path / "vllm.log.gz"
    path.write_bytes(gzip.compress(data[:5000]) + gzip.compress(data[5000:]))  # cat a.gz b.gz
    plain, _ = read_log(str(DEFAULT))
    packed, errors = read_log(str(path))
    assert errors == [] and _kept(packed) == _kept(plain) and packed.lines_total == plain.lines_total


@pytest.mark.parametrize("compressed", [False, True], ids=["text", "gzip"])
def test_stdin_is_read_with_a_dash(compressed: bool) -> None:
    code = ("import json,sys; from doctor.probes.logfile import read_log; ev, err = read_log('-'); "
            "print(json.dumps([ev.lines_total, len(ev.matched), len(err)]))")
    data = DEFAULT.read_bytes()
    out = subprocess.run([sys.executable, "-c", code], input=gzip.compress(data) if compressed else data,
                         capture_output=True, cwd=Path(__file__).resolve().parents[2], timeout=60, check=True)
    plain, _ = read_log(str(DEFAULT))
    assert json.loads(out.stdout) == [plain.lines_total, len(plain.matched), 0]


# -- streaming, bounded memory -----------------------------------------------------------------


def _terminal_wrapped(text: str, width: int) -> str:
    """``text`` cut into lines of at most ``width`` characters, as a terminal shows it."""
    return "".join("\n".join(line[i : i + width] for i in range(0, max(len(line), 1), width)) + "\n"
                   for line in text.splitlines())


@pytest.mark.parametrize("wrapped", [False, True], ids=["plain", "terminal-wrapped"])
def test_chunk_boundaries_change_nothing(wrapped: bool) -> None:
    data = b"".join(p.read_bytes() for p in sorted(LOGS.glob("*.log")))
    if wrapped:  # a record cut over several lines may also be cut between two chunks
        data = _terminal_wrapped(data.decode(), 100).encode()
    whole = Scanner()
    whole.feed(data)
    whole.finish()
    for size in (1, 7, 64, 4093):
        pieces = Scanner()
        for i in range(0, len(data), size):
            pieces.feed(data[i : i + size])
        pieces.finish()
        assert (pieces.kept(), pieces.lines_total) == (whole.kept(), whole.lines_total), size
    assert whole.lines_total == data.count(b"\n") + (not data.endswith(b"\n"))


def test_stats_lines_are_bounded_and_the_latest_kept(tmp_path: Path) -> None:
    path = tmp_path / "long.log"
    path.write_text(DEFAULT.read_text() + "".join(STATS.format(n=n) + ACCESS for n in range(5000)))
    evidence, errors = read_log(str(path))
    stats = [line for line in evidence.matched if "throughput" in line.text]
    assert [(e.kind, e.fatal) for e in errors] == [("cut", False)]
    assert "3,007 stats lines" in errors[0].message  # 5,000 added to the 7 of the startup log, 2,000 kept
    assert evidence.truncated and len(stats) == 2000
    assert stats[-1].text.startswith(STATS.format(n=4999).rstrip()[:120])
    facts = parse_lines(evidence.matched)
    assert facts.value("kv_cache_tokens") == 4361088  # the startup survives the flood of stats lines


def test_request_logs_are_never_kept(tmp_path: Path) -> None:
    prompt = ("(APIServer pid=1) INFO 11-30 05:39:16 [logger.py:43] Received request cmpl-1: prompt: 'which "
              "version took the KV cache size: 1 tokens config: args: ?', params: SamplingParams(n=1)\n")
    path = tmp_path / "requests.log"
    path.write_text(prompt * 100)
    evidence, _ = read_log(str(path))
    assert evidence.matched == [] and evidence.lines_total == 100


def test_an_over_long_line_is_cut_and_counted_as_one_line() -> None:
    kv = b"INFO 10-03 16:22:17 [kv_cache_utils.py:864] GPU KV cache size: 42,656 tokens "
    data = kv + b"x" * (3 << 20) + b"\n" + b"y" * (3 << 20) + kv + b"\n" + STATS.format(n=7).encode()
    results = []
    for size in (len(data), 1 << 16):
        scanner = Scanner(max_line=1 << 16)
        for i in range(0, len(data), size):
            scanner.feed(data[i : i + size])
        scanner.finish()
        results.append(([(no, len(text)) for no, text in scanner.kept()], scanner.lines_total, scanner.truncated))
    # Line 1 is kept (cut to max_line), line 2 is not: its gate word lies beyond max_line.
    assert results[0] == results[1] == ([(1, 1 << 16), (3, len(STATS.format(n=7)) - 1)], 3, True)


def test_max_bytes_reads_the_tail_with_true_line_numbers(tmp_path: Path) -> None:
    path = tmp_path / "tail.log"
    head = ACCESS * 10000
    path.write_text(head + DEFAULT.read_text())
    full, _ = read_log(str(path))
    tail, errors = read_log(str(path), max_bytes=DEFAULT.stat().st_size + 10)
    assert [(e.kind, e.fatal) for e in errors] == [("cut", False)]
    assert _kept(tail) == _kept(full) and tail.lines_total == full.lines_total


# -- the log command ---------------------------------------------------------------------------

REQUIRED_NUMBERS = ("kv_cache_tokens", "max_concurrency", "max_concurrency_tokens", "max_model_len",
                    "gpu_memory_utilization", "tensor_parallel_size", "pipeline_parallel_size")


def test_log_json_uses_the_documented_keys_and_types() -> None:
    output = log_command_output(str(DEFAULT), as_json=True)
    document = json.loads(output.text)
    assert output.code == 0 and output.problems == []
    facts = document["facts"]
    for key in REQUIRED_NUMBERS:
        assert isinstance(facts[key], (int, float)) and not isinstance(facts[key], bool), key
    for key in ("enable_prefix_caching", "chunked_prefill", "enforce_eager"):
        assert isinstance(facts[key], bool), key
    assert facts["vllm_version"] == "0.32.0"
    assert document["provenance"]["kv_cache_tokens"]["line"] == 52
    assert {"errors", "stats", "startups", "preemption_warnings"} <= set(document)
    assert len(document["stats"]) == 7 and document["startups"][0]["first_line"] >= 1


def test_log_text_summary_and_exit_codes(tmp_path: Path) -> None:
    failed = log_command_output(str(LOGS / "startup-0.32.0-cpu-FAILED-kv-too-small-for-max-model-len.log"), False)
    assert failed.code == 1 and "[max-len-exceeds-kv] line 75" in failed.text and "max_model_len" in failed.text
    missing = log_command_output(str(tmp_path / "nope.log"), False)
    assert missing.code == 2 and missing.text == "" and "cannot open" in missing.problems[0]
    other = tmp_path / "other.log"
    other.write_text("some version of something took a while\n")
    unknown = log_command_output(str(other), False)
    assert unknown.code == 2 and "no vLLM" in unknown.problems[0] and "no vLLM" not in unknown.text


def test_log_keeps_vllms_own_advice_and_wraps_it() -> None:
    """The startup error's last sentences are vLLM's fix ("Try increasing ..."): the summary
    keeps them, wrapped to short lines without trailing spaces, for a terminal or cron mail."""
    failed = log_command_output(str(LOGS / "startup-0.32.0-cpu-FAILED-kv-too-small-for-max-model-len.log"), False)
    flat = " ".join(line.strip() for line in failed.text.splitlines())
    assert "Try increasing `gpu_memory_utilization`" in flat and "conserving_memory/ for more details." in flat
    assert all(len(line) <= 100 and line == line.rstrip() for line in failed.text.splitlines()[1:])  # [0]: the path
    document = json.loads(log_command_output(str(LOGS / "startup-0.32.0-cpu-FAILED-kv-too-small-for-max-model-len.log"),
                                             True).text)
    assert document["errors"][0]["message"].endswith("for more details.")


def test_log_errors_go_to_stderr_and_stdout_stays_json(tmp_path: Path) -> None:
    """``llm-doctor log missing.log --json | jq`` gets a JSON document on stdout (with the read
    error inside it) and the message on stderr."""
    result = subprocess.run([sys.executable, "-m", "doctor", "log", str(tmp_path / "nope.log"), "--json"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert json.loads(result.stdout)["read_errors"][0]["kind"]
    assert "cannot open" in result.stderr and "cannot open" not in result.stdout.split('"message"')[0]
    result = subprocess.run([sys.executable, "-m", "doctor", "log", str(tmp_path / "nope.log")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and result.stdout == "" and "cannot open" in result.stderr


def test_secrets_in_logged_arguments_never_reach_the_output(tmp_path: Path) -> None:
    path = tmp_path / "args.log"
    path.write_text("INFO 03-02 23:59:21 api_server.py:241] args: Namespace(host='0.0.0.0', port=8000, "
                    "api_key='sk-proj-abcdefghijklmnop1234', served_model_name='m', max_num_seqs=64, block_size=16)\n")
    for as_json in (True, False):
        text = log_command_output(str(path), as_json).text
        assert "sk-proj-abcdefghijklmnop1234" not in text
    evidence, _ = read_log(str(path))
    assert "sk-proj" not in evidence.matched[0].text
    assert parse_lines([LogLine(1, evidence.matched[0].text)]).value("max_num_seqs") == 64


def test_a_large_file_split_between_processes_reads_as_one(tmp_path: Path) -> None:
    """The parallel scan of a plain file gives exactly the sequential result, including a
    hard-wrapped error line whose continuation starts the second part."""
    wrapped = ("(EngineCore pid=316) ValueError: To serve at least one request with the model's max seq len (100000), "
               "(4.26 GiB KV cach\ne is needed, which is larger than the available KV cache memory (4.25 GiB). Based\n")
    body = "".join(p.read_text(encoding="utf-8") for p in sorted(LOGS.glob("*.log")))
    tail = body + ACCESS * 400
    size = lambda text: len(text.encode())  # noqa: E731
    first = size(wrapped.split("\n")[0]) + 1
    # Put the middle byte, where two parts meet, inside the wrapped line's first half.
    n = (size(wrapped) + size(tail) - size(body) - first) // size(ACCESS)
    data = body + ACCESS * n + wrapped + tail
    start = size(body + ACCESS * n)
    assert start < size(data) // 2 < start + first
    path = tmp_path / "big.log"
    path.write_text(data, encoding="utf-8")
    sequential, _ = read_log(str(path))
    lines_total, bytes_total, kept = read_with_two_workers(path)
    assert kept == _kept(sequential)
    assert (lines_total, bytes_total) == (sequential.lines_total, sequential.bytes_total)
    assert any(text.startswith("e is needed") for _, text in kept)


def test_a_large_terminal_wrapped_file_is_read_in_one_process(tmp_path: Path) -> None:
    """Its records span lines, so it is not split between processes: the result is the sequential one."""
    path = tmp_path / "big.log"
    path.write_text(_terminal_wrapped(DEFAULT.read_text(encoding="utf-8"), 90), encoding="utf-8")
    sequential, _ = read_log(str(path))
    assert read_with_two_workers(path)[2] == _kept(sequential)
    assert parse_lines(sequential.matched).value("kv_cache_tokens") == 4361088


def test_max_bytes_on_a_stream_reads_its_head(tmp_path: Path) -> None:
    path = tmp_path / "big.log.gz"
    path.write_bytes(gzip.compress((DEFAULT.read_text() + ACCESS * 20000).encode()))
    evidence, errors = read_log(str(path), max_bytes=DEFAULT.stat().st_size)
    assert [(e.kind, e.fatal) for e in errors] == [("cut", False)] and "first" in errors[0].message
    assert evidence.bytes_total < 2 * DEFAULT.stat().st_size
    assert parse_lines(evidence.matched).value("kv_cache_tokens") == 4361088
