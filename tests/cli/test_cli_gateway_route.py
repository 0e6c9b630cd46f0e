"""The gateway-route flags and config keys: checked before anything is sent, said plainly when wrong."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from doctor.cli import app

runner = CliRunner()
GATEWAY = "http://127.0.0.1:9"  # nothing listens: a usage error must come before any connection


@pytest.mark.parametrize("extra, message", [
    (["--gateway-route", "FETCH /chat?prompt={prompt}"], "method must be one of"),
    (["--gateway-route", "POST /chat"], "must hold {prompt}"),
    (["--gateway-route", "POST /chat?prompt={prompt}", "--gateway-payload", "/nonexistent/body.json"], "cannot read --gateway-payload"),
    (["--gateway-payload", "body.json"], "needs --gateway-route"),
    (["--framing", "sse"], "--framing must be one of"),
    (["--text-field", "a..b"], "--text-field must be a dotted path"),
])
def test_bad_gateway_route_flags_are_usage_errors(extra, message):
    result = runner.invoke(app, ["diagnose", "--gateway", GATEWAY, *extra])
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output


def test_a_gateway_route_needs_a_gateway():
    result = runner.invoke(app, ["diagnose", "--engine", GATEWAY, "--gateway-route", "POST /chat?prompt={prompt}"])
    assert result.exit_code == 2 and "--gateway-route needs --gateway" in result.output


def test_config_file_keys_reach_the_probe(tmp_path, monkeypatch):
    body = tmp_path / "body.json"
    body.write_text('{"input": "{prompt}", "n": {max_tokens}}')
    (tmp_path / "llm-doctor.toml").write_text(
        '[targets]\ngateway = "http://127.0.0.1:9"\ngateway_kind = "FastAPI"\n'
        f'[probe]\ngateway_route = "PUT /gen"\ngateway_payload = "{body}"\nframing = "ndjson"\ntext_field = "out.text"\n'
        'requests = 1\nwarmup = 0\ndeadline = 5\n')
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["collect", "--no-metrics", "--no-gpu", "--no-host", "-o", str(tmp_path / "b.json")])
    assert "Traceback" not in result.output
    shape = json.loads((tmp_path / "b.json").read_text())["stream"]["shape"]
    assert (shape["gateway_route"], shape["gateway_payload_source"], shape["framing"], shape["text_field"], shape["gateway_kind"]) == (
        "PUT /gen", str(body), "ndjson", "out.text", "fastapi")
    # only --gateway on the application's route: said plainly what cannot be compared
    assert "no direct path to compare" in " ".join(result.output.split())
