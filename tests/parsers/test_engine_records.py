"""Conformance of every engine's record (``doctor.engines``), over every engine at once.

- each record has its log reader (``engine_readers.logs.PARSERS``), and each is the reader of its own engine's logs;
- every neutral fact (``kv_cache_tokens``, ``max_running_requests``, ..., ``running``,
  ``preemptions``) has a source in the engine's fixtures, through the commands a script runs
  (``llm-doctor log --json`` / ``metrics --json``), or is declared "not exposed by ENGINE" in its
  record, never both;
- every flag a record names exists in that engine's own command line as of its recorded version
  (``fixtures/engine-cli/<engine>.txt``, read from the engine's source, with provenance), and every
  setting a remediation names (``engine_flag`` / ``vllm_flag`` in ``checks/``) is a flag of
  ``vllm serve``.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from doctor.commands.log import log_command_output
from doctor.commands.metrics import metrics_command_output
from doctor.engine_readers.logs import PARSERS
from doctor.engine_readers.normal import FROM_LOG_KEYS
from doctor.engines import BY_ID, RECORDS
from doctor.engines.names import VLLM
from doctor.engines.record import LIMIT_FACTS, SERVING_FACTS, EngineRecord

ROOT = Path(__file__).resolve().parents[2]
CLI = ROOT / "fixtures" / "engine-cli"
ENGINES = ROOT / "fixtures" / "engines"
#: Record id -> the folder of its written-against artifacts (vLLM's are tested in test_vllm_log*).
ARTIFACTS = {"sglang": "sglang", "llama.cpp": "llamacpp", "tgi": "tgi", "tensorrt-llm": "trtllm"}
NEUTRAL = LIMIT_FACTS | SERVING_FACTS
_FLAG = re.compile(r"(?<![\w-])-{1,2}[A-Za-z][\w-]*")


def cli_of(record: EngineRecord) -> tuple[dict[str, str], set[str]]:
    """The header (``engine``, ``cli``, ``version``, ``source``) and the flags of the record's CLI fixture."""
    header: dict[str, str] = {}
    flags: set[str] = set()
    for line in (CLI / f"{record.id}.txt").read_text().splitlines():
        if match := re.match(r"# (\w+): (.*)", line):
            header.setdefault(match[1], match[2].strip())
        elif line.strip() and not line.startswith("#"):
            flags.add(line.strip())
    return header, flags


def flags_named(spelling: str) -> list[str]:
    """The flags in a record's spelling: ``-np / --parallel`` -> ``-np``, ``--parallel``."""
    return _FLAG.findall(spelling)


def remediation_settings() -> set[str]:
    """The settings the built-in checks name in a remediation's ``where``."""
    settings = set()
    for path in sorted((ROOT / "checks").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("engine_flag", "vllm_flag"):
                settings |= {a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)}
    return settings


def test_records_are_the_engines():
    assert RECORDS[0].id == VLLM
    assert set(FROM_LOG_KEYS) == LIMIT_FACTS  # the neutral limits the records' not_exposed speak of
    assert len(BY_ID) == len(RECORDS) == 5
    prefixes = [p for r in RECORDS for p in r.metric_prefixes]
    assert len(prefixes) == len(set(prefixes))
    assert PARSERS.keys() == BY_ID.keys()  # every engine's log has its reader
    for record in RECORDS:
        own = [*(n for names in record.metrics.values() for n in names), *record.capacity_gauges,
               *record.capacity_info, *(family for family, _label, _value in record.capacity_labelled)]
        assert all(name.startswith(record.metric_prefixes) or name in record.unprefixed_metrics for name in own), record.id


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r.id)
def test_cli_fixture_is_the_recorded_version(record):
    header, flags = cli_of(record)
    assert (header["engine"], header["cli"], header["version"]) == (record.id, record.cli, record.cli_version)
    assert header["source"] and flags


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r.id)
def test_every_flag_named_exists_in_the_engines_cli(record):
    _header, cli = cli_of(record)
    spellings = [*record.flags.values(), *(record.front_end_lever[2:] if record.front_end_lever else ())]
    named = {flag for spelling in spellings for flag in flags_named(spelling)}
    assert named
    assert named <= cli, f"not in {record.cli} {record.cli_version}: {sorted(named - cli)}"


def test_every_setting_a_remediation_names_is_a_vllm_serve_flag():
    _header, cli = cli_of(BY_ID[VLLM])
    settings = remediation_settings()
    assert {"max_num_seqs", "gpu_memory_utilization", "stream_interval"} <= settings  # the scan sees them
    flags = {f"--{s.replace('_', '-')}" for s in settings}
    assert flags <= cli, f"not in vllm serve: {sorted(flags - cli)}"


def test_flag_lists_read_as_spelled():
    assert flags_named("-np / --parallel") == ["-np", "--parallel"]
    assert flags_named("--disable-radix-cache (remove it)") == ["--disable-radix-cache"]
    assert flags_named("-c / --ctx-size (split between the slots)") == ["-c", "--ctx-size"]


def _facts(source: str, paths: list[Path]) -> tuple[set[str], set[str]]:
    """The neutral facts the commands print for ``paths``, and those they call not exposed."""
    given: set[str] = set()
    declared: set[str] = set()
    for path in paths:
        if source == "log":
            text = log_command_output(str(path), as_json=True).text
        else:
            text, _code = metrics_command_output([str(path)], as_json=True)
        document = json.loads(text)
        given |= set(document["facts"]) & NEUTRAL
        declared |= set(document.get("not_exposed", {}))
    return given, declared


@pytest.mark.parametrize("engine", sorted(ARTIFACTS))
def test_every_neutral_fact_of_a_log_has_a_source_or_is_not_exposed(engine):
    """Over the engine's written-against logs, ``llm-doctor log --json`` gives every neutral fact
    its record does not declare "not exposed by ENGINE's log", and none it declares."""
    not_exposed = BY_ID[engine].not_exposed.get("log", frozenset())
    given, declared = _facts("log", sorted((ENGINES / ARTIFACTS[engine]).glob("*.log")))
    assert not NEUTRAL - given - not_exposed, f"{engine}'s log: no source and not declared not exposed"
    assert not given & not_exposed, f"{engine}'s log: declared not exposed, yet given: {sorted(given & not_exposed)}"
    assert declared <= not_exposed


#: Neutral serving reading -> the metric family it is read from.
READING_FAMILY = {"running": "running", "waiting": "waiting", "kv_usage": "kv_usage", "kv_usage_max": "kv_usage",
                  "preemptions": "preemptions"}


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r.id)
def test_every_neutral_reading_of_metrics_has_a_source_or_is_not_exposed(record):
    """Each serving reading is one of the record's metric families, or declared "not exposed by
    ENGINE's metrics", never both; the engine's written-against scrapes give none it declares."""
    not_exposed = record.not_exposed.get("metrics", frozenset())
    sourced = {fact for fact, family in READING_FAMILY.items() if record.metrics.get(family)}
    assert sourced | not_exposed >= SERVING_FACTS, f"{record.id}: {sorted(SERVING_FACTS - sourced - not_exposed)}"
    assert not sourced & not_exposed, f"{record.id}: declared not exposed, yet a metric is named: {sorted(sourced & not_exposed)}"
    scrapes = sorted((ENGINES / ARTIFACTS[record.id]).glob("*.prom")) if record.id in ARTIFACTS else []
    given, declared = _facts("metrics", scrapes)
    assert not given & not_exposed, f"{record.id}: declared not exposed, yet given: {sorted(given & not_exposed)}"
    assert declared <= not_exposed
