"""Structured output through the application's own ``--payload``: the probe sends the payload's
unconstrained twins first, and LD108 (a schema's first-request compile) is told apart from LD212
(every constrained token slower) against the test SSE server planting one or the other."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from doctor.cli import app
from doctor.probes.payload import constraints, unconstrained
from tests.support.sse_server import SseServer

SCHEMA = {"type": "json_schema", "json_schema": {"name": "order", "schema": {
    "type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]}}}
BODY = {"messages": [{"role": "user", "content": "Pick a product code."}], "max_tokens": 16, "response_format": SCHEMA}


@pytest.mark.parametrize(("body", "expected"), [
    (BODY, ["response_format:json_schema"]),
    ({"messages": [], "response_format": {"type": "text"}}, []),
    ({"messages": [], "response_format": {"type": "json_object"}}, ["response_format:json_object"]),
    ({"messages": [], "tools": [{"type": "function", "function": {"name": "f"}}]}, ["tools"]),
    ({"messages": [], "tools": [{"type": "function"}], "tool_choice": "none"}, []),
    ({"input": "x", "text": {"format": {"type": "json_schema", "schema": {}}}}, ["text.format:json_schema"]),
    ({"prompt": "x", "guided_json": {"type": "object"}}, ["guided_json"]),
    ({"prompt": "x", "response_format": "oops"}, ["response_format:oops"]),
])
def test_constraints_name_what_changes_the_engines_work(body: dict[str, Any], expected: list[str]) -> None:
    assert constraints(body) == expected


def test_the_twin_keeps_the_prompt_and_drops_only_the_constraints() -> None:
    body = {**BODY, "tools": [{"type": "function"}], "tool_choice": "auto", "text": {"format": {}, "verbosity": "low"}}
    twin = unconstrained(body)
    assert twin == {"messages": BODY["messages"], "max_tokens": 16, "text": {"verbosity": "low"}}
    assert constraints(twin) == [] and body["response_format"] == SCHEMA  # the original is untouched


def diagnose(srv: SseServer, tmp_path: Path, body: dict[str, Any], *budgets: str, **server: object) -> dict[str, Any]:
    payload, report = tmp_path / "request.json", tmp_path / "report.json"
    payload.write_text(json.dumps(body))
    result = CliRunner().invoke(app, [
        "diagnose", "--engine", srv.base(**server), "--route", "chat", "--payload", str(payload), "--requests", "6",
        "--no-gpu", "--no-host", "--no-metrics", *budgets, "--json", str(report)])
    assert result.exit_code in (0, 1), result.output
    return json.loads(report.read_text())


def outcomes(report: dict[str, Any]) -> dict[str, str]:
    return {r["code"]: r["outcome"] for r in report["results"] if r["code"] in ("LD108", "LD212")}


def test_a_slow_first_constrained_request_is_the_schemas_compile(tmp_path: Path) -> None:
    with SseServer() as srv:
        report = diagnose(srv, tmp_path, BODY, "--ttft-budget", "0.5", ttft=0.03, itl=0.005, compile=1.0)
    stream = report["bundle"]["stream"]
    assert stream["shape"]["constraints"] == ["response_format:json_schema"]
    assert [c["outcome"] for c in stream["controls"]] == ["ok", "ok"]
    assert outcomes(report) == {"LD108": "finding", "LD212": "pass"}
    verdict = report["verdict"]
    assert verdict["symptom"] == "pre-first-token", verdict
    assert verdict["primary_remediation"]["setting"] == "structured_outputs_config"
    finding = next(f for f in report["findings"] if f["code"] == "LD108")
    assert "compile" in finding["summary"]


@pytest.mark.slow
def test_every_constrained_token_slower_is_steady_constrained_decoding(tmp_path: Path) -> None:
    with SseServer() as srv:
        report = diagnose(srv, tmp_path, {**BODY, "max_tokens": 12}, "--tpot-budget", "0.05",
                          ttft=0.03, itl=0.02, masked=4)
    assert outcomes(report) == {"LD108": "pass", "LD212": "finding"}
    verdict = report["verdict"]
    assert verdict["symptom"] == "inter-token", verdict
    assert verdict["primary_remediation"]["setting"] == "structured_outputs_config"


def test_a_free_text_payload_sends_no_twin(tmp_path: Path) -> None:
    body = {k: v for k, v in BODY.items() if k != "response_format"}
    with SseServer() as srv:
        report = diagnose(srv, tmp_path, body, ttft=0.03, itl=0.005, compile=1.0)
    assert report["bundle"]["stream"]["controls"] == []
    assert outcomes(report) == {"LD108": "not-applicable", "LD212": "not-applicable"}


@pytest.mark.slow
def test_a_tool_call_argument_held_back_names_the_parser(tmp_path: Path) -> None:
    """Tokens 4-26 of each constrained answer come in one event after a silence, their usage counted."""
    body = {"messages": BODY["messages"], "max_tokens": 32, "stream_options": {"continuous_usage_stats": True},
            "tools": [{"type": "function", "function": {"name": "lookup_order", "parameters": {"type": "object"}}}]}
    with SseServer() as srv:
        # 24 held tokens at 30 ms: a 0.72 s silence, past the 0.5 s budget a freeze is held to (felt)
        report = diagnose(srv, tmp_path, body, ttft=0.03, itl=0.03, held="3:24")
    assert report["bundle"]["stream"]["shape"]["constraints"] == ["tools"]
    assert outcomes(report) == {"LD108": "pass", "LD212": "finding"}
    finding = next(f for f in report["findings"] if f["code"] == "LD212")
    assert "one event carrying 24 tokens" in finding["summary"]
    verdict = report["verdict"]
    assert verdict["symptom"] == "inter-token", verdict
    assert verdict["primary_remediation"]["setting"] == "tool_call_parser"
