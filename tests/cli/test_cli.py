"""The command line: help with examples, version, offline analyze, exit codes, clear errors."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from doctor import __version__
from doctor.checking.runner import AnalyzeOptions
from doctor.cli import app
from doctor.exit_codes import ExitCode, exit_code_for
from doctor.model import (
    FailOn,
    Finding,
    Remediation,
    Report,
    Severity,
    Symptom,
    SymptomClass,
    Verdict,
)
from tests.support import bundles

runner = CliRunner()
COMMANDS = ["diagnose", "collect", "analyze", "probe", "log", "size", "checks", "explain", "demo"]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help_with_an_example(command):
    result = runner.invoke(app, [command, "--help"])
    assert result.exit_code == 0
    assert "Example" in result.output


@pytest.mark.parametrize("command", [*COMMANDS, "watch", "load", "sweep", "compare", "metrics"])
def test_help_shows_no_value_after_a_switch_and_no_hard_break_inside_a_sentence(command):
    """typer showed ``--insecure <bool>`` (as if it took a value) and kept the docstrings' line
    breaks, so a paragraph was wrapped twice: "A target that is / down is retried ..."."""
    result = runner.invoke(app, [command, "--help"], env={"COLUMNS": "300"}, terminal_width=300)
    assert result.exit_code == 0 and "<bool>" not in result.output
    doc = app.registered_commands[[c.callback.__name__.removesuffix("_cmd") for c in app.registered_commands].index(command)]
    for paragraph in (doc.help or "").split("\n\n"):
        assert "\n" not in paragraph
    if command == "watch":
        assert "A target that is down is retried with backoff" in result.output


def test_version():
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and __version__ in result.output


@pytest.fixture
def no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("analyze touched the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def test_analyze_never_touches_the_network(saved_bundle, no_network, tmp_path):
    out = tmp_path / "r.json"
    result = runner.invoke(app, ["analyze", str(saved_bundle), "--json", str(out)])
    assert result.exit_code in (0, 1), result.output
    assert json.loads(out.read_text())["verdict"]["symptom"]


def test_analyze_writes_every_format(saved_bundle, tmp_path):
    paths = {k: tmp_path / f"r.{k}" for k in ("json", "html", "md")}
    args = ["analyze", str(saved_bundle)] + [x for k, p in paths.items() for x in (f"--{k}", str(p))]
    result = runner.invoke(app, args)
    assert result.exit_code in (0, 1), result.output
    assert all(p.stat().st_size > 0 for p in paths.values())


def test_analyze_format_json_prints_the_report(saved_bundle):
    result = runner.invoke(app, ["analyze", str(saved_bundle), "--format", "json"])
    assert json.loads(result.stdout)["report_version"] == 1


def test_unreadable_bundle_is_one_line_and_exit_2(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text("{not json")
    result = runner.invoke(app, ["analyze", str(bad)])
    assert result.exit_code == ExitCode.NO_DIAGNOSIS
    assert "not JSON" in result.output and "Traceback" not in result.output


@pytest.mark.parametrize("args", [["--set", "nonsense"], ["--set", "LD999.x=1"], ["--fail-on", "sometimes"], ["--format", "yaml"]])
def test_usage_errors_exit_2(saved_bundle, args):
    result = runner.invoke(app, ["analyze", str(saved_bundle), *args])
    assert result.exit_code == ExitCode.NO_DIAGNOSIS, result.output
    assert "error:" in result.output


def test_diagnose_without_targets_is_a_usage_error():
    result = runner.invoke(app, ["diagnose"])
    assert result.exit_code == ExitCode.NO_DIAGNOSIS and "nothing to diagnose" in result.output


def _report(symptom: Symptom, severities: list[Severity], *, felt: bool = True, conclusive: bool = True) -> Report:
    findings = [
        Finding("LD999", "x", "t", s, SymptomClass.GENERAL, "s", Remediation("a", "b", "c", "d"), felt=felt)
        for s in severities
    ]
    return Report(1, __version__, "", Verdict(symptom, "", conclusive=conclusive), findings, [], bundles.bundle())


@pytest.mark.parametrize(
    "symptom, severities, fail_on, expected",
    [
        (Symptom.HEALTHY, [], Severity.WARNING, ExitCode.HEALTHY),
        (Symptom.HEALTHY, [Severity.INFO], Severity.WARNING, ExitCode.HEALTHY),
        (Symptom.HEALTHY, [Severity.INFO], Severity.INFO, ExitCode.SYMPTOM),
        (Symptom.PROXY_ONLY, [Severity.WARNING], Severity.WARNING, ExitCode.SYMPTOM),
        (Symptom.PROXY_ONLY, [Severity.WARNING], Severity.CRITICAL, ExitCode.HEALTHY),
        (Symptom.INTER_TOKEN, [Severity.CRITICAL], Severity.CRITICAL, ExitCode.SYMPTOM),
        (Symptom.INCONCLUSIVE, [], Severity.WARNING, ExitCode.NO_DIAGNOSIS),
        # a finding at or above --fail-on wins over "could not diagnose" (every request refused)
        (Symptom.INCONCLUSIVE, [Severity.CRITICAL], Severity.WARNING, ExitCode.SYMPTOM),
        (Symptom.INCONCLUSIVE, [Severity.WARNING], Severity.CRITICAL, ExitCode.NO_DIAGNOSIS),
        # felt, the default: an unhealthy verdict or a felt finding at warning or above
        (Symptom.HEALTHY, [Severity.INFO], FailOn.FELT, ExitCode.HEALTHY),
        (Symptom.HEALTHY, [Severity.WARNING], FailOn.FELT, ExitCode.SYMPTOM),
        (Symptom.PROXY_ONLY, [], FailOn.FELT, ExitCode.SYMPTOM),
        (Symptom.INCONCLUSIVE, [Severity.CRITICAL], FailOn.FELT, ExitCode.SYMPTOM),
        (Symptom.INCONCLUSIVE, [], FailOn.FELT, ExitCode.NO_DIAGNOSIS),
    ],
)
def test_exit_codes(symptom, severities, fail_on, expected):
    assert exit_code_for(_report(symptom, severities), fail_on) is expected


@pytest.mark.parametrize("fail_on, expected", [
    (FailOn.FELT, ExitCode.HEALTHY), (FailOn.WARNING, ExitCode.SYMPTOM), (FailOn.CRITICAL, ExitCode.HEALTHY),
])
def test_a_risk_alone_exits_0_by_default_and_1_under_a_strict_gate(fail_on, expected):
    """A scheduled check pages only for what users felt; a strict gate still trips on risks."""
    assert exit_code_for(_report(Symptom.HEALTHY, [Severity.WARNING], felt=False), fail_on) is expected


@pytest.mark.parametrize("fail_on, expected", [(FailOn.FELT, ExitCode.HEALTHY), (FailOn.WARNING, ExitCode.NO_DIAGNOSIS)])
def test_within_budget_so_far_exits_0_by_default_and_2_under_a_strict_gate(fail_on, expected):
    """A run that ended before it could show the p90 within budget: nothing felt, nothing established."""
    assert exit_code_for(_report(Symptom.HEALTHY, [], conclusive=False), fail_on) is expected


def test_the_default_fail_on_is_felt():
    assert AnalyzeOptions().fail_on is FailOn.FELT


def test_config_file_rejects_secrets(tmp_path, saved_bundle):
    cfg = tmp_path / "llm-doctor.toml"
    cfg.write_text('[targets]\nengine = "http://x"\napi_key = "sk-abc"\n')
    result = runner.invoke(app, ["analyze", str(saved_bundle), "--config", str(cfg)])
    assert result.exit_code == ExitCode.NO_DIAGNOSIS and "secrets do not belong" in result.output


def test_diagnose_writes_the_html_report_by_default(monkeypatch, tmp_path, saved_bundle):
    """README promises llm-doctor-report.html when no --json/--html/--md is given."""
    from doctor.bundle import load_path

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("doctor.runs.pipeline.collect", lambda config, progress: load_path(saved_bundle))
    result = runner.invoke(app, ["diagnose", "--engine", "http://127.0.0.1:8000"])
    assert result.exit_code in (ExitCode.HEALTHY, ExitCode.SYMPTOM), result.output
    assert (tmp_path / "llm-doctor-report.html").stat().st_size > 0


def test_every_set_in_the_help_examples_is_a_real_option():
    """``analyze --help`` once showed ``--set LD201.stall_factor=8``, which fails."""
    import re

    from doctor.checking.registry import load_registry
    from doctor.checking.runner import validate_settings
    from doctor.settings.config_file import parse_set

    examples = [m for cmd in app.registered_commands for m in re.findall(r"--set (\S+)", cmd.callback.__doc__ or "")]
    assert examples  # the analyze example, at least
    validate_settings(load_registry(plugins=False), parse_set(examples))


def every_command():
    """``(name, click command)`` for the app and every command under it."""
    import typer

    def walk(command, name):
        yield name, command
        for sub_name, sub in getattr(command, "commands", {}).items():
            yield from walk(sub, f"{name} {sub_name}")
    return list(walk(typer.main.get_command(app), "llm-doctor"))


def test_help_prose_wraps_once():
    """The rich help formatter keeps a single line break: a paragraph wrapped in the source was
    wrapped again at the terminal's width, mid-sentence. Each paragraph is one line in the source
    (the examples' command lines are paragraphs of their own)."""
    import inspect

    for name, command in every_command():
        for paragraph in inspect.cleandoc(command.help or "").split("\n\n"):
            assert "\n" not in paragraph, (name, paragraph)
        for param in command.params:
            assert "\n" not in (getattr(param, "help", None) or ""), (name, param.name)


def test_every_documented_jq_example_reads_a_real_field():
    """The README once read ``log --json``'s facts at the top level, where they live under ``facts``.

    Each ``jq .path`` in the README and the documents of ``docs/`` (where the reference went) is resolved in the real output of the command on its line
    (``log`` or ``metrics`` of a fixture, a report for ``diagnose`` and ``analyze``), or of both
    ``log`` and ``metrics`` where the prose names no command; the lab's
    URL file (``jq -r``) is read by the README's own local-target example, tried by hand.
    """
    import re
    from pathlib import Path

    from reports import render_json
    from tests.support.report_cases import real_buffering_report

    root = Path(__file__).resolve().parents[2]
    outputs = {
        "log": runner.invoke(app, ["log", str(root / "fixtures/logs/startup-0.32.0-cpu-default.log"), "--json"]),
        "metrics": runner.invoke(app, ["metrics", str(root / "fixtures/metrics/0.32.0-cpu-idle.prom"),
                                       str(root / "fixtures/metrics/0.32.0-cpu-after-load.prom"), "--json"]),
    }
    documents = {name: json.loads(result.stdout) for name, result in outputs.items()}
    documents["diagnose"] = documents["analyze"] = json.loads(render_json(real_buffering_report()))
    examples = [(line, path) for document in (root / "README.md", *sorted((root / "docs").glob("*.md")))
                for line in document.read_text().splitlines() for path in re.findall(r"\bjq (\.[\w.]+)", line)]
    assert len(examples) >= 3
    for line, path in examples:
        named = [name for name in documents if f"{name} " in line]
        for name in named or list(outputs):
            value = documents[name]
            for key in path.strip(".").split("."):
                assert isinstance(value, dict) and key in value, (line, name, key)
                value = value[key]


@pytest.mark.parametrize("alias, code", [("queueing", "LD101"), ("prefill-bound", "LD102"), ("cold start", "LD103"),
                                         ("transport", "LD104")])
def test_explain_knows_the_names_the_issue_uses(alias, code):
    result = runner.invoke(app, ["explain", alias])
    assert result.exit_code == 0, result.output
    assert result.output.startswith(code)


def test_explain_prints_each_option_with_its_default_and_meaning():
    result = runner.invoke(app, ["explain", "gateway-overhead"])
    assert result.exit_code == 0, result.output
    options = result.output.split("## Options", 1)[1]
    assert "LD304.min_added_s = 0.05: added time below this is noise for interactive use" in options
    assert "(not documented)" not in options
    assert runner.invoke(app, ["explain", "LD208"]).output.startswith("LD508 gpu-xid-errors")  # a former code


def test_diagnose_keeps_a_bundle_that_reanalyses_alike(monkeypatch, tmp_path):
    """``--bundle`` from diagnose records the budgets, so ``analyze`` of it gives diagnose's verdict."""
    from doctor.bundle import load_path
    from tests.realvllm.scenarios import SCENARIOS

    scenario = SCENARIOS["proxy-buffering"]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("doctor.runs.pipeline.collect", lambda config, progress: load_path(scenario.recorded))
    live = runner.invoke(app, ["diagnose", "--engine", "http://127.0.0.1:8000", *scenario.budget_args(),
                               "--bundle", "kept.json.gz", "--md", "r.md"])
    assert "PROXY-ONLY" in live.output, live.output
    again = runner.invoke(app, ["analyze", "kept.json.gz"])
    assert "PROXY-ONLY" in again.output, again.output


# --- metrics: errors on stderr, exit 2, never a field of the JSON nor raw bytes -----------

def _saved_scrape(tmp_path: Path) -> Path:
    path = tmp_path / "ok.prom"
    path.write_text("# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 1\n")
    return path


@pytest.mark.parametrize("as_json", [[], ["--json"]])
def test_metrics_of_a_missing_file_is_one_line_on_stderr_and_exit_2(tmp_path, as_json):
    """``metrics ok.prom missing.prom --json`` once exited 0 with the error in a note."""
    for files in ([tmp_path / "missing.prom"], [_saved_scrape(tmp_path), tmp_path / "missing.prom"]):
        result = CliRunner().invoke(app, ["metrics", *map(str, files), *as_json])
        assert result.exit_code == ExitCode.NO_DIAGNOSIS, result.output
        assert result.stdout == "" and "missing.prom" in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1


def test_metrics_refuses_a_binary_file_without_printing_it(tmp_path):
    binary = tmp_path / "core.prom"
    binary.write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00\x1b[31m" + bytes(range(256)))
    result = CliRunner().invoke(app, ["metrics", str(binary)])
    assert result.exit_code == ExitCode.NO_DIAGNOSIS and result.stdout == ""
    assert "not a text file" in result.stderr and "\x1b" not in result.stderr and "ELF" not in result.stderr


def test_metrics_of_text_that_is_not_a_scrape_is_one_clean_line_on_stderr(tmp_path):
    junk = tmp_path / "junk.prom"
    junk.write_text("\x1b]0;owned\x07not metrics at all {{{\n")
    result = CliRunner().invoke(app, ["metrics", str(junk), "--json"])
    assert result.exit_code == ExitCode.NO_DIAGNOSIS and result.stdout == ""
    assert "cannot use" in result.stderr and "\x1b" not in result.stderr and "\x07" not in result.stderr


def test_metrics_of_a_good_scrape_prints_on_stdout(tmp_path):
    result = CliRunner().invoke(app, ["metrics", str(_saved_scrape(tmp_path)), "--json"])
    assert result.exit_code == ExitCode.HEALTHY and json.loads(result.stdout)["facts"]["running"] == 1
