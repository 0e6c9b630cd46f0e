"""The JSON report validates against the published schema, and the schema pins the contract."""

from __future__ import annotations

import copy
import json

import jsonschema
import pytest

from doctor.bundle import load_path, write_file
from doctor.checking.runner import analyze
from reports.json_doc import SCHEMA_ID, render_json, report_schema
from tests.support import bundles
from tests.support.report_cases import real_buffering_report


def validator() -> jsonschema.Draft202012Validator:
    schema = report_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.fixture(scope="module")
def buffering() -> dict:
    return json.loads(render_json(real_buffering_report()))


def test_schema_is_the_packaged_file_and_names_its_id() -> None:
    assert report_schema()["$id"] == SCHEMA_ID


def test_report_with_findings_validates(buffering: dict) -> None:
    validator().validate(buffering)
    assert buffering["$schema"] == SCHEMA_ID
    assert buffering["verdict"]["symptom"] == "proxy-only"
    assert buffering["verdict"]["primary_remediation"]["setting"] == "proxy_buffering"
    assert {f["code"] for f in buffering["findings"]} >= {"LD301"}


@pytest.mark.parametrize("kinds", [
    {},  # nothing collected: inconclusive, no remediation
    {"log": bundles.log(["INFO 11-29 09:12:01 [api_server.py:1812] vLLM API server version 0.32.0"])},
    {"stream": bundles.stream([bundles.request("direct", i, ttft=0.05, gaps=[0.02] * 10, start=i) for i in range(4)])},
    {"stream": bundles.stream([bundles.request("direct", 0, ttft=0.05, gaps=[], outcome="connect")])},
], ids=["empty", "log-only", "healthy", "all-failed"])
def test_sparse_reports_validate(kinds: dict) -> None:
    data = json.loads(render_json(analyze(bundles.bundle(**kinds))))
    validator().validate(data)


@pytest.mark.parametrize("path, value", [
    (("verdict", "symptom"), "slow"),
    (("verdict", "summary"), None),
    (("verdict", "primary_remediation", "setting"), None),
    (("findings", 0, "severity"), "urgent"),
    (("findings", 0, "code"), "buffering"),
    (("report_version",), 2),
])
def test_schema_rejects_a_broken_contract(buffering: dict, path: tuple, value: object) -> None:
    data = copy.deepcopy(buffering)
    target = data
    for key in path[:-1]:
        target = target[key]
    if value is None:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    with pytest.raises(jsonschema.ValidationError):
        validator().validate(data)


def test_json_report_reanalyses_to_the_same_verdict(tmp_path) -> None:
    report = real_buffering_report()
    path = tmp_path / "report.json"
    write_file(path, render_json(report).encode("utf-8"))
    again = analyze(load_path(path))
    assert again.verdict.symptom is report.verdict.symptom
    assert [f.code for f in again.findings] == [f.code for f in report.findings]


def test_a_json_report_reanalyses_with_its_recorded_analysis(tmp_path) -> None:
    """``verdict.budgets`` is not read back; ``bundle.run.analysis`` is, by ``llm-doctor analyze``."""
    from typer.testing import CliRunner

    from doctor.cli import app
    from tests.realvllm.scenarios import SCENARIOS

    scenario = SCENARIOS["proxy-buffering"]
    runner = CliRunner()
    first = runner.invoke(app, ["analyze", str(scenario.recorded), *scenario.budget_args(),
                                "--set", "proxy-buffering.burst_factor=3.5", "--json", str(tmp_path / "r.json")])
    assert "PROXY-ONLY" in first.output, first.output
    report = json.loads((tmp_path / "r.json").read_text())
    validator().validate(report)
    recorded = report["bundle"]["run"]["analysis"]
    assert (recorded["ttft_budget_s"], recorded["tpot_budget_s"]) == (scenario.ttft_budget_s, scenario.tpot_budget_s)
    assert recorded["settings"] == {"LD301": {"burst_factor": "3.5"}}  # keyed by code
    again = runner.invoke(app, ["analyze", str(tmp_path / "r.json"), "--json", str(tmp_path / "again.json")])
    assert "PROXY-ONLY" in again.output, again.output
    assert json.loads((tmp_path / "again.json").read_text())["bundle"]["run"]["analysis"] == recorded
