"""The TOML config: flags win, per-region budgets, check thresholds, no secrets."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from doctor.checking.runner import AnalyzeOptions
from doctor.evidence.run import AnalysisRecord
from doctor.foundation.errors import BundleError, UsageError
from doctor.model import Severity
from doctor.settings import build_analyze_options, build_collect_config, resolve
from doctor.settings.config_file import FileConfig, load_config, parse_set, with_recorded_analysis

CONFIG = """
[targets]
engine = "http://10.0.0.5:8000"
gateway = "https://llm.example.com"

[probe]
route = "responses"
concurrency = 4

[budgets]
ttft = 0.8
tpot = 0.04
[budgets.regions.eu-west-1]
ttft = 1.2

[run]
provider = "aws"
region = "us-east-1"
team = "search"

[checks.LD101]
queue_share = 0.6

[analysis]
ignore = ["LD5"]
"""


@pytest.fixture
def cfg(tmp_path: Path):
    path = tmp_path / "llm-doctor.toml"
    path.write_text(CONFIG)
    return load_config(path)


def test_file_values_apply_and_flags_win(cfg):
    config = build_collect_config({"concurrency": 2}, cfg, "diagnose")
    assert (config.engine, config.gateway, config.route) == ("http://10.0.0.5:8000", "https://llm.example.com", "responses")
    assert config.concurrency == 2
    assert config.run_fields["provider"] == "aws" and config.run_fields["labels"] == {"team": "search"}


def test_budgets_per_region(cfg):
    assert build_analyze_options({}, cfg, "us-east-1").budgets.ttft_s == 0.8
    regional = build_analyze_options({}, cfg, "eu-west-1").budgets
    assert (regional.ttft_s, regional.tpot_s) == (1.2, 0.04)
    assert build_analyze_options({"ttft_budget": 2.0}, cfg, "eu-west-1").budgets.ttft_s == 2.0


def test_check_thresholds_and_set_merge(cfg):
    options = build_analyze_options({"set": ["LD101.queue_share=0.7", "LD201.kv_full=0.9"]}, cfg, None)
    assert options.settings["LD101"] == {"queue_share": "0.7"}
    assert options.settings["LD201"] == {"kv_full": "0.9"}
    assert options.ignore == ["LD5"]


def test_missing_default_config_is_empty(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert load_config(None).targets == {}


@pytest.mark.parametrize("text, message", [("[targets\n", "not valid TOML"), ("[nope]\n", "unknown section"),
                                           ('[probe]\napi_key = "x"\n', "secrets do not belong")])
def test_bad_config_is_a_usage_error(tmp_path, text, message):
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(UsageError, match=message):
        load_config(path)


@pytest.mark.parametrize("text, message", [
    ('[probe]\nconcurrency = "x"\n', r"\[probe\] concurrency must be an integer, got 'x'"),
    ('[probe]\nrate = true\n', r"\[probe\] rate must be a number"),
    ('[budgets]\nttft = "x"\n', r"\[budgets\] ttft must be a number"),
    ("[budgets]\nregions = 3\n", r"\[budgets\] regions must be a table"),
    ("[budgets.regions.eu]\nttfb = 1\n", r"unknown key 'ttfb' in \[budgets.regions.eu\]; known: tpot, ttft"),
    ("[checks]\nLD101 = 3\n", r"\[checks\] LD101 must be a table"),
    ("[checks.LD101]\nqueue_share = [1]\n", r"\[checks.LD101\] queue_share must be a string, number or boolean"),
    ("probe = 3\n", r"\[probe\] must be a table"),
    ("[targets]\nengine = 5\n", r"\[targets\] engine must be a string"),
    ('[analysis]\nselect = "LD1"\n', r"\[analysis\] select must be an array of strings"),
    ("[probe]\nconcurency = 3\n", r"unknown key 'concurency' in \[probe\]; known: .*concurrency"),
    ("[run]\nteam = [1]\n", r"\[run\] team must be a string, number or boolean"),
    # issue 22 item 11: beyond a float's range, once an OverflowError at analysis; shown shortened
    ("[budgets]\nttft = 1" + "0" * 400 + "\n", r"\[budgets\] ttft must be a number, got 10{39}\.\.\. \(401 characters\)$"),
    ("[budgets]\ntpot = inf\n", r"\[budgets\] tpot must be a number, got inf"),
    ("[probe]\nrequests = 1" + "0" * 40 + "\n", r"\[probe\] requests must be an integer"),
    ("[probe]\nclient_workers = 2.5\n", r"\[probe\] client_workers must be an integer, got 2.5"),
    ("[probe]\nclient_workers = true\n", r"\[probe\] client_workers must be an integer, got True"),
    # issue 30 item 10: a dotted key 1,000 parts deep is a table that deep (once a RecursionError in repr)
    ("[run]\n" + ".".join(["a"] * 1000) + " = 1\n", r"\[run\] a must be a string, number or boolean, got \{'a': \{'a': \{\.\.\.\}\}\}$"),
    ("[probe]\nroute." + ".".join(["a"] * 1000) + " = 1\n", r"\[probe\] route must be a string, got \{'a': \{'a'"),
    ("[checks]\nLD101 = [" * 1 + "[" * 50 + "]" * 51 + "\n", r"\[checks\] LD101 must be a table, got \[\[\[\.\.\.\]\]\]$"),
])
def test_config_types_and_keys_are_checked(tmp_path, text, message):
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(UsageError, match=f"^config {re.escape(str(path))}: {message}"):
        load_config(path)


def test_every_documented_section_loads(cfg):
    assert cfg.run["team"] == "search" and cfg.checks["LD101"] == {"queue_share": 0.6}
    assert cfg.budget("ttft", "eu-west-1") == 1.2


def test_parse_set_rejects_malformed():
    with pytest.raises(UsageError):
        parse_set(["LD101=3"])


def test_since_as_seconds_and_numeric_run_labels_are_accepted(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[targets]\nprometheus = "http://127.0.0.1:9090"\nsince = 900\n[run]\nreplicas = 4\n')
    cfg = load_config(path)
    config = build_collect_config({}, cfg, "diagnose")
    assert config.since_s == 900.0
    assert config.run_fields["labels"] == {"replicas": "4"}


# --------------------------------------------------------------------------- a report's recorded analysis

RECORDED = AnalysisRecord(ttft_budget_s=0.2, tpot_budget_s=0.3, settings={"LD101": {"queue_share": "0.9"}},
                          select=["LD1"], ignore=[], fail_on="critical")


def test_recorded_analysis_replaces_an_implicit_config(cfg):
    """A llm-doctor.toml that merely sits in the working directory does not change a report's verdict."""
    options = build_analyze_options({}, with_recorded_analysis(cfg, RECORDED, explicit=False), "eu-west-1")
    assert (options.budgets.ttft_s, options.budgets.tpot_s) == (0.2, 0.3)
    assert options.settings == {"LD101": {"queue_share": "0.9"}}
    # the recorded fail_on is not taken: the exit gate is the caller's, today's default without one
    assert (options.select, options.ignore, options.fail_on) == (["LD1"], [], AnalyzeOptions().fail_on)


def test_an_explicit_config_wins_key_by_key_over_the_record(cfg):
    merged = with_recorded_analysis(cfg, RECORDED, explicit=True)
    options = build_analyze_options({}, merged, "eu-west-1")
    assert (options.budgets.ttft_s, options.budgets.tpot_s) == (1.2, 0.04)  # the region's, then the file's
    assert options.settings["LD101"] == {"queue_share": 0.6}
    assert (options.select, options.ignore) == (["LD1"], ["LD5"])
    assert options.fail_on is AnalyzeOptions().fail_on  # the file names none, and the record's is not taken
    assert merged.targets == cfg.targets  # what to probe is untouched


def test_an_explicit_configs_fail_on_gates_a_reanalysis(tmp_path):
    path = tmp_path / "gate.toml"
    path.write_text('[analysis]\nfail_on = "critical"\n')
    merged = with_recorded_analysis(load_config(path), AnalysisRecord(fail_on="warning"), explicit=True)
    assert build_analyze_options({}, merged, None).fail_on == Severity.CRITICAL


def test_flags_win_over_the_record():
    merged = with_recorded_analysis(FileConfig(), RECORDED, explicit=False)
    options = build_analyze_options({"ttft_budget": 1.0, "set": ["requests-queued-before-prefill.queue_share=0.4"],
                                     "select": ["LD2"], "fail_on": "info"}, merged, None)
    assert (options.budgets.ttft_s, options.budgets.tpot_s) == (1.0, 0.3)
    assert list(options.settings.items())[-1] == ("requests-queued-before-prefill", {"queue_share": "0.4"})  # wins
    assert (options.select, options.fail_on) == (["LD2"], Severity.INFO)


def test_no_record_leaves_the_config_as_it_is(cfg):
    assert with_recorded_analysis(cfg, None, explicit=False) is cfg


@pytest.mark.parametrize("record, message", [
    (AnalysisRecord(ttft_budget_s=-1.0), "ttft_budget_s must be a number > 0"),
    (AnalysisRecord(tpot_budget_s=float("nan")), "tpot_budget_s must be a number > 0"),
])
def test_a_damaged_record_is_a_bundle_error(record, message):
    with pytest.raises(BundleError, match=f"recorded analysis: {message}"):
        with_recorded_analysis(FileConfig(), record, explicit=False)


def test_help_quotes_the_defaults_resolution_uses():
    """One source per default: what an unset flag resolves to is what its help text says."""
    from typer.testing import CliRunner

    from doctor.cli import app

    config = build_collect_config({}, FileConfig(), "diagnose")
    assert config.requests is None  # adaptive
    analysis = build_analyze_options({}, FileConfig(), None)
    text = re.sub(r"[\s│╭╮╰╯─]+", " ", CliRunner().invoke(app, ["diagnose", "--help"], terminal_width=400).output)
    expected = {
        "--route": f"(default {config.route})", "--concurrency": f"(default {config.concurrency})",
        "--requests": "(default: until every path is clearly within or over budget", "--warmup": f"(default {config.warmup})",
        "--duration": f"(default {config.duration_s:g})",
        "--stall-timeout": f"(default {config.stall_timeout_s:g})", "--deadline": f"(default {config.deadline_s:g})",
        "--scrape-interval": f"(default {config.scrape_interval_s:g})", "--since": f"default {config.since_s / 60:g}m)",
        "--fail-on": f"(default {analysis.fail_on.value})", "--ttft-budget": f"(default {analysis.budgets.ttft_s:g})",
        "--tpot-budget": f"(default {analysis.budgets.tpot_s:g})",
    }
    for flag, quoted in expected.items():
        line = re.search(re.escape(flag) + r" <[^>]+> .*?\.(?= --| [A-Z]|$)", text)
        assert line and quoted in line.group(), (flag, quoted, line and line.group())


@pytest.mark.parametrize("command", ["diagnose", "collect", "watch", "load", "sweep"])
def test_client_workers_come_from_the_file_under_the_flag_for_every_command(tmp_path, monkeypatch, command):
    monkeypatch.chdir(tmp_path)  # diagnose's default report is checked in the working directory
    path = tmp_path / "c.toml"
    path.write_text('[targets]\nengine = "http://127.0.0.1:9"\n[probe]\nclient_workers = 3\n')
    cfg = load_config(path)
    from_file, flag = resolve(command, {}, cfg).collect, resolve(command, {"client_workers": 2}, cfg).collect
    assert from_file is not None and flag is not None
    assert (from_file.client_workers, flag.client_workers) == (3, 2)
    unset = resolve(command, {}, FileConfig(targets={"engine": "http://127.0.0.1:9"})).collect
    assert unset is not None and unset.client_workers is None  # the probe chooses (doctor.probes.stream.shard_workers)


@pytest.mark.parametrize("value", [0, 257, -1])
def test_client_workers_out_of_bounds_in_the_file_or_the_flag_are_refused_by_name(tmp_path, value):
    path = tmp_path / "c.toml"
    path.write_text(f"[probe]\nclient_workers = {value}\n")
    cfg = load_config(path)
    bound = re.escape(f"must be a finite number >= 1 and <= 256, got {value}")
    with pytest.raises(UsageError, match=f"^\\[probe\\] client_workers in {re.escape(str(path))} {bound}$"):
        build_collect_config({}, cfg, "diagnose")
    with pytest.raises(UsageError, match=f"^--client-workers {bound}$"):
        build_collect_config({"client_workers": value}, FileConfig(), "diagnose")
    # the flag is checked in place of the file's value, not beside it
    assert build_collect_config({"client_workers": 4}, cfg, "diagnose").client_workers == 4
