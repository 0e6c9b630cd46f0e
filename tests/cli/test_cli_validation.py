"""Bad input fails fast and clearly: URLs, numbers, check keys, --format and --fail-on, plugins.

Every case here was once a traceback, a silently wrong run (``--ttft-budget 0`` replaced by the
default, ``--select LD999`` running nothing and exiting HEALTHY), or a failure found only after
the probe had run or a report file had been written.
"""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

import doctor.commands.catalogue
import doctor.runs.pipeline
from doctor.bundle import save
from doctor.cli import app
from doctor.exit_codes import ExitCode
from doctor.foundation.errors import UsageError
from doctor.model import Symptom
from doctor.settings import build_analyze_options, build_collect_config
from doctor.settings.config_file import FileConfig, load_config
from tests.support import bundles

runner = CliRunner()
ENGINE = "http://127.0.0.1:8000"


def words(text: str) -> str:
    """Rich help wraps and boxes lines; compare its words only."""
    return re.sub(r"[\s│╭╮╰╯─]+", " ", text)


@pytest.fixture
def collect_forbidden(monkeypatch):
    """Usage errors must stop ``diagnose`` before it sends anything."""

    def refuse(*args, **kwargs):
        raise AssertionError("diagnose probed before validating its options")

    monkeypatch.setattr(doctor.runs.pipeline, "collect", refuse)


# --- URLs ---------------------------------------------------------------------------------

@pytest.mark.parametrize("flag, key", [("--engine", "engine"), ("--gateway", "gateway"),
                                       ("--metrics-url", "metrics_url"), ("--prometheus", "prometheus")])
@pytest.mark.parametrize("url", ["http://[::1", "http://127.0.0.1:99999", "http://127.0.0.1:0",
                                 "ftp://host/x", "localhost:8000", "http:///v1"])
def test_bad_urls_are_usage_errors_naming_the_flag(flag, key, url):
    with pytest.raises(UsageError, match=re.escape(flag)):
        build_collect_config({key: url}, FileConfig(), "diagnose")


def test_bad_url_from_the_cli_is_one_line_without_secrets(collect_forbidden):
    result = runner.invoke(app, ["diagnose", "--engine", "http://user:hunter22@[::1"])
    assert result.exit_code == ExitCode.NO_DIAGNOSIS, result.output
    assert "--engine" in result.output and "Traceback" not in result.output
    assert "hunter22" not in result.output


def test_good_urls_pass_unchanged():
    config = build_collect_config({"engine": "http://[::1]:8000", "gateway": "https://llm.example.com/v1"},
                                  FileConfig(), "diagnose")
    assert (config.engine, config.gateway) == ("http://[::1]:8000", "https://llm.example.com/v1")


# --- numbers ------------------------------------------------------------------------------

@pytest.mark.parametrize("key, value", [
    ("rate", 0.0), ("rate", -1.0), ("rate", float("inf")), ("deadline", 0.0), ("deadline", float("nan")),
    ("stall_timeout", -1.0), ("max_tokens", -1), ("max_tokens", 0), ("prompt_tokens", 0),
    ("scrape_interval", 0.0), ("requests", -1), ("warmup", -1), ("concurrency", 0),
])
def test_probe_numbers_out_of_range_name_the_flag(key, value):
    flag = "--" + key.replace("_", "-")
    with pytest.raises(UsageError, match=f"^{re.escape(flag)} must be"):
        build_collect_config({"engine": ENGINE, key: value}, FileConfig(), "diagnose")


def test_zero_warmup_is_allowed_but_zero_requests_is_not():
    """No warm-up is a choice; no measured request is a probe that measures nothing (leave --requests
    out for the adaptive default)."""
    config = build_collect_config({"engine": ENGINE, "warmup": 0}, FileConfig(), "diagnose")
    assert (config.requests, config.warmup) == (None, 0)
    with pytest.raises(UsageError, match="--requests must be a finite number >= 1"):
        build_collect_config({"engine": ENGINE, "requests": 0}, FileConfig(), "diagnose")


def test_config_errors_keep_the_section_in_the_printed_message(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[probe]\nconcurrency = "x"\n')
    result = runner.invoke(app, ["collect", "--config", str(path), "--engine", ENGINE])
    assert result.exit_code == ExitCode.NO_DIAGNOSIS
    assert "[probe] concurrency must be an integer" in words(result.output)


def test_config_number_out_of_range_names_the_file_and_key(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text("[probe]\nconcurrency = 0\n")
    with pytest.raises(UsageError, match=r"\[probe\] concurrency in .*c\.toml must be"):
        build_collect_config({"engine": ENGINE}, load_config(path), "diagnose")


@pytest.mark.parametrize("since", ["-5m", "0", "inf", "nanm", "5x", "91d", "1e300"])
def test_since_must_be_a_positive_finite_duration_of_sane_length(since):
    """``1e300`` once passed as a window, to start a query long before the epoch."""
    with pytest.raises(UsageError, match="--since"):
        build_collect_config({"prometheus": "http://127.0.0.1:9090", "since": since}, FileConfig(), "diagnose")


def test_config_since_and_api_key_env_are_not_masked_by_flag_defaults(tmp_path, monkeypatch):
    """A flag default ("15m", "OPENAI_API_KEY") used to win over the file's value."""
    seen = {}

    def capture(config, progress):
        seen["config"] = config
        raise UsageError("captured")

    monkeypatch.setattr(doctor.runs.pipeline, "collect", capture)
    monkeypatch.setenv("ACME_KEY", "sk-from-acme-key")
    path = tmp_path / "c.toml"
    path.write_text('[targets]\nprometheus = "http://127.0.0.1:9090"\nsince = "2h"\n[probe]\napi_key_env = "ACME_KEY"\n')
    runner.invoke(app, ["diagnose", "--config", str(path), "--json", str(tmp_path / "r.json")])
    assert seen["config"].since_s == 7200
    assert seen["config"].http.api_key == "sk-from-acme-key"


@pytest.mark.parametrize("value", [0.0, -1.0, float("inf")])
@pytest.mark.parametrize("name", ["ttft", "tpot"])
def test_budgets_must_be_positive_and_are_never_replaced_by_the_default(name, value):
    with pytest.raises(UsageError, match=f"--{name}-budget must be"):
        build_analyze_options({f"{name}_budget": value}, FileConfig(), None)


def test_milliseconds_typed_as_seconds_are_refused_saying_so(saved_bundle):
    """``--ttft-budget 500 --tpot-budget 50`` once read HEALTHY against 500 s and 50 s."""
    result = runner.invoke(app, ["analyze", str(saved_bundle), "--ttft-budget", "500", "--tpot-budget", "50"])
    assert result.exit_code == ExitCode.NO_DIAGNOSIS
    assert "--ttft-budget is in seconds" in result.output and "give 0.5" in result.output
    assert "healthy" not in result.output.lower()
    with pytest.raises(UsageError, match=r"--tpot-budget is in seconds: 50 s .* give 0\.05"):
        build_analyze_options({"tpot_budget": 50.0}, FileConfig(), None)
    with pytest.raises(UsageError, match=r"--ttft-budget is in seconds: 120 s .*120 s or more are refused"):
        build_analyze_options({"ttft_budget": 120.0}, FileConfig(), None)
    with pytest.raises(UsageError, match=r"--tpot-budget is in seconds: 10 s .*10 s or more are refused"):
        build_analyze_options({"tpot_budget": 10.0}, FileConfig(), None)


def test_slow_budgets_a_cpu_engine_or_an_offline_batch_may_mean_are_kept():
    """A first token after 90 s, a token every 3 s: slow, but meant in seconds (CPU engines, batch jobs)."""
    budgets = build_analyze_options({"ttft_budget": 119.0, "tpot_budget": 9.9}, FileConfig(), None).budgets
    assert (budgets.ttft_s, budgets.tpot_s) == (119.0, 9.9)
    result = runner.invoke(app, ["analyze", "--help"], env={"COLUMNS": "300"})
    assert "under 120: 500 ms is 0.5" in " ".join(result.output.split())


def test_negative_regional_budget_names_the_region(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text("[budgets]\nttft = 0.5\n[budgets.regions.eu]\nttft = -1\n")
    cfg = load_config(path)
    assert build_analyze_options({}, cfg, "us").budgets.ttft_s == 0.5
    with pytest.raises(UsageError, match=r"\[budgets\.regions\.eu\] ttft"):
        build_analyze_options({}, cfg, "eu")


def test_negative_budget_from_the_cli_is_a_usage_error_not_a_verdict(saved_bundle):
    result = runner.invoke(app, ["analyze", str(saved_bundle), "--ttft-budget", "-1"])
    assert result.exit_code == ExitCode.NO_DIAGNOSIS
    assert "--ttft-budget must be" in result.output and "healthy" not in result.output.lower()


# --- check keys ---------------------------------------------------------------------------

@pytest.mark.parametrize("flag", ["--select", "--ignore"])
def test_check_key_matching_nothing_is_a_usage_error(saved_bundle, flag):
    result = runner.invoke(app, ["analyze", str(saved_bundle), flag, "LD999"])
    assert result.exit_code == ExitCode.NO_DIAGNOSIS, result.output
    assert flag in result.output and "LD999" in result.output and "llm-doctor checks" in result.output


@pytest.mark.parametrize("key", ["LD1", "ld101", "ALL", "requests-queued-before-prefill"])
def test_check_keys_may_be_codes_prefixes_names_or_all(saved_bundle, key):
    result = runner.invoke(app, ["analyze", str(saved_bundle), "--ignore", key])
    assert result.exit_code in (ExitCode.HEALTHY, ExitCode.SYMPTOM, ExitCode.NO_DIAGNOSIS)
    assert "matches no check" not in result.output


def test_diagnose_rejects_an_unknown_select_before_probing(collect_forbidden):
    result = runner.invoke(app, ["diagnose", "--engine", ENGINE, "--select", "LD999"])
    assert result.exit_code == ExitCode.NO_DIAGNOSIS and "matches no check" in result.output


# --- --format and --fail-on ---------------------------------------------------------------

@pytest.mark.parametrize("args", [["--format", "yaml"], ["--fail-on", "sometimes"]])
def test_analyze_validates_output_options_before_writing(saved_bundle, tmp_path, args):
    out = tmp_path / "f.json"
    result = runner.invoke(app, ["analyze", str(saved_bundle), *args, "--json", str(out)])
    assert result.exit_code == ExitCode.NO_DIAGNOSIS and "error:" in result.output
    assert not out.exists()


@pytest.mark.parametrize("args", [["--format", "yaml"], ["--fail-on", "sometimes"]])
def test_diagnose_validates_output_options_before_probing(collect_forbidden, tmp_path, args):
    result = runner.invoke(app, ["diagnose", "--engine", ENGINE, *args, "--json", str(tmp_path / "f.json")])
    assert result.exit_code == ExitCode.NO_DIAGNOSIS and "error:" in result.output


# --- exit codes: a failing service is a failure, not "could not diagnose" -----------------

def test_every_request_failing_exits_1_with_an_inconclusive_verdict(tmp_path):
    path = tmp_path / "refused.json"
    reqs = [bundles.request("direct", i, ttft=0.1, gaps=[], outcome="connect-error") for i in range(4)]
    save(bundles.bundle(stream=bundles.stream(reqs)), path)
    result = runner.invoke(app, ["analyze", str(path), "--format", "json"])
    report = json.loads(result.stdout)
    assert report["verdict"]["symptom"] == Symptom.INCONCLUSIVE.value
    assert any(f["severity"] == "critical" for f in report["findings"])
    assert result.exit_code == ExitCode.SYMPTOM


# --- help texts ---------------------------------------------------------------------------

@pytest.mark.parametrize("command", ["probe", "log", "checks"])
def test_json_switch_help_says_stdout(command):
    assert "JSON to stdout (a switch, not a path)" in words(runner.invoke(app, [command, "--help"]).output)


@pytest.mark.parametrize("command", ["diagnose", "analyze"])
def test_json_path_help_says_path(command):
    assert "Write the JSON report to PATH" in words(runner.invoke(app, [command, "--help"]).output)


# --- catalogue commands never show a traceback --------------------------------------------

@pytest.mark.parametrize("args", [["checks"], ["checks", "--json"], ["explain", "LD101"]])
def test_catalogue_commands_report_registry_errors_as_one_line(monkeypatch, args):
    def broken_registry(*a, **kw):
        raise UsageError("two checks claim 'LD101': checks.a and checks.b")

    monkeypatch.setattr(doctor.commands.catalogue, "load_registry", broken_registry)
    result = runner.invoke(app, args)
    assert result.exit_code == ExitCode.NO_DIAGNOSIS
    assert "two checks claim" in result.output
    assert isinstance(result.exception, SystemExit)  # typer.Exit, not the UsageError escaping


def test_explain_unknown_check_is_a_usage_error():
    result = runner.invoke(app, ["explain", "LD999"])
    assert result.exit_code == ExitCode.NO_DIAGNOSIS and "llm-doctor checks" in result.output


def test_a_count_too_large_for_a_float_is_a_usage_error():
    result = CliRunner().invoke(app, ["diagnose", "--engine", "http://127.0.0.1:9", "--requests", "9" * 400])
    assert result.exit_code == 2 and "--requests" in result.output
    assert "Traceback" not in result.output


def test_a_header_value_can_come_from_the_environment(monkeypatch, capsys):
    monkeypatch.setenv("GATEWAY_TOKEN", "tok-from-env-1234")
    opts = {"engine": ENGINE, "header": ["X-Gateway-Token: @env:GATEWAY_TOKEN", "Accept: text/event-stream"]}
    config = build_collect_config(opts, FileConfig(), "diagnose")
    assert config.http.headers == {"X-Gateway-Token": "tok-from-env-1234", "Accept": "text/event-stream"}
    assert "tok-from-env-1234" in config.http.secrets()  # redacted wherever it appears
    assert "warning" not in capsys.readouterr().err


def test_an_unset_header_variable_is_a_usage_error(monkeypatch):
    monkeypatch.delenv("GATEWAY_TOKEN", raising=False)
    with pytest.raises(UsageError, match="GATEWAY_TOKEN"):
        build_collect_config({"engine": ENGINE, "header": ["X-Gateway-Token: @env:GATEWAY_TOKEN"]}, FileConfig(), "diagnose")


def test_a_credential_typed_on_the_command_line_is_warned_about(capsys):
    build_collect_config({"engine": ENGINE, "header": ["Authorization: Bearer typed-1234", "Accept: */*"]},
                         FileConfig(), "diagnose")
    err = capsys.readouterr().err
    assert "Authorization" in err and "@env:" in err and "ps" in err
    assert "typed-1234" not in err and "Accept" not in err


# --- sizes: bounded by what is sane, and by what the engine says it accepts ---------------

@pytest.mark.parametrize("key, value", [
    ("requests", 99_999_999_999), ("prompt_tokens", 100_000_000), ("max_tokens", 10**9), ("concurrency", 10**6),
    ("warmup", 10**9), ("deadline", 1e12), ("duration", 1e12), ("rate", 1e9),
])
def test_probe_sizes_beyond_sane_are_usage_errors(key, value):
    """``--requests 99999999999`` once ate 24 GB planning its schedule; 10**8 prompt tokens built a
    prompt of hundreds of MB before the first byte was sent."""
    flag = "--" + key.replace("_", "-")
    with pytest.raises(UsageError, match=f"^{re.escape(flag)} must be a finite number .* and <= "):
        build_collect_config({"engine": ENGINE, key: value}, FileConfig(), "diagnose")


@pytest.mark.parametrize("args", [["--requests", "99999999999"], ["--prompt-tokens", "100000000"]])
def test_an_insane_size_is_one_line_before_anything_is_sent(collect_forbidden, args):
    result = runner.invoke(app, ["diagnose", "--engine", ENGINE, *args])
    assert result.exit_code == ExitCode.NO_DIAGNOSIS, result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1


@pytest.mark.parametrize("command, args", [
    ("diagnose", ["--prompt-tokens", "10000"]),
    ("diagnose", ["--prompt-tokens", "8100", "--max-tokens", "100"]),
    ("load", ["--prompt-tokens", "100:9000"]),
])
def test_a_request_longer_than_the_engines_max_model_len_is_refused_before_sending(tmp_path, command, args):
    """The engine announced ``max_model_len`` 8192 on /v1/models; 10 million prompt tokens once
    went out anyway, every request refused, and left a 47 MB report."""
    from tests.support.sse_server import SseServer

    with SseServer() as srv:
        result = runner.invoke(app, [command, "--engine", srv.base(max_model_len=8192), "--no-gpu", "--no-host",
                                     "--no-metrics", "--requests", "2", "--json", str(tmp_path / "r.json"), *args])
        sent = len(srv.log.requests)
    assert result.exit_code == ExitCode.NO_DIAGNOSIS, result.output
    assert "max_model_len" in result.output and "8192" in result.output and "Traceback" not in result.output
    assert sent == 0 and not (tmp_path / "r.json").exists()


def test_a_request_within_max_model_len_is_sent(tmp_path):
    from tests.support.sse_server import SseServer

    with SseServer() as srv:
        result = runner.invoke(app, ["diagnose", "--engine", srv.base(max_model_len=8192, n=4), "--no-gpu", "--no-host",
                                     "--no-metrics", "--requests", "2", "--warmup", "0", "--prompt-tokens", "8000",
                                     "--max-tokens", "4", "--json", str(tmp_path / "r.json")])
    assert result.exit_code in (ExitCode.HEALTHY, ExitCode.SYMPTOM), result.output
    assert (tmp_path / "r.json").exists()



def test_another_models_max_model_len_never_refuses_the_named_one():
    """A gateway listing several models (LiteLLM): the limit of the model asked for, or none; never the
    first listed in its place, which once refused a run with exit 2."""
    from doctor.evidence.endpoints import ModelInfo
    from doctor.probes.plan import CollectConfig, over_context

    models = [ModelInfo("small", max_model_len=2048), ModelInfo("large", max_model_len=131072)]
    config = CollectConfig(engine=ENGINE, model="unlisted", prompt_tokens=4000, max_tokens=100)
    assert over_context(config, models) is None
    assert over_context(CollectConfig(engine=ENGINE, model="large", prompt_tokens=4000, max_tokens=100), models) is None
    assert "2048" in (over_context(CollectConfig(engine=ENGINE, prompt_tokens=4000, max_tokens=100), models) or "")

# --- small ones a reviewer notices first --------------------------------------------------

@pytest.mark.parametrize("gateway", ["http://127.0.0.1:8000", "http://127.0.0.1:8000/", "HTTP://127.0.0.1:8000",
                                     "http://localhost:8000/", "http://LOCALHOST:8000", "http://[::1]:8000"])
def test_a_gateway_equal_to_the_engine_is_warned(capsys, gateway):
    build_collect_config({"engine": ENGINE, "gateway": gateway}, FileConfig(), "diagnose")
    assert "--gateway is the same URL as --engine" in capsys.readouterr().err


@pytest.mark.parametrize("gateway", ["http://127.0.0.1:8080", "http://localhost:8080/", "https://localhost:8000"])
def test_a_real_gateway_is_not_warned(capsys, gateway):
    build_collect_config({"engine": ENGINE, "gateway": gateway}, FileConfig(), "diagnose")
    assert "same URL" not in capsys.readouterr().err


@pytest.mark.parametrize("gpus", ["0", "-1"])
def test_load_refuses_a_price_for_no_gpu(gpus):
    """``--gpus 0`` was read as "not given" and priced one GPU."""
    result = runner.invoke(app, ["load", "--engine", ENGINE, "--gpu-hour-price", "2", "--gpus", gpus])
    assert result.exit_code == ExitCode.NO_DIAGNOSIS and "--gpus must be" in result.output, result.output
