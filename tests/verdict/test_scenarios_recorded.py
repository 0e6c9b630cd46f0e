"""The real-vLLM scenarios, replayed offline from the bundles their live runs recorded.

``tests/realvllm/`` serves a tiny model with the CPU build of vLLM, probes it directly and
through a real nginx, and records each run's evidence bundle in ``fixtures/bundles/``
(provenance in ``fixtures/PROVENANCE.md``). Here ``llm-doctor analyze`` reads each bundle
with the budgets the live run used and must reach the live run's verdict: the same symptom,
the same primary remediation setting, and the scenario's finding. Runs in the default suite.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from doctor.bundle import load_path
from doctor.cli import app
from tests.realvllm.diagnose import explain, verdict_mismatches
from tests.realvllm.scenarios import SCENARIOS, Scenario

runner = CliRunner()


@pytest.mark.parametrize("scenario", SCENARIOS.values(), ids=list(SCENARIOS))
def test_recorded_real_vllm_bundle_reaches_the_live_verdict(scenario: Scenario, tmp_path: Path) -> None:
    assert scenario.recorded.exists(), f"{scenario.recorded} is missing: record it with LLM_DOCTOR_RECORD=1"
    out = tmp_path / "report.json"
    # --fail-on felt, today's default: the bundles recorded "warning", the default they were made with,
    # under which a healthy run short of the 29 fast answers it needs ("within budget so far") exits 2
    result = runner.invoke(app, ["analyze", str(scenario.recorded), *scenario.budget_args(), "--fail-on", "felt",
                                 "--json", str(out)])
    assert result.exit_code == (0 if scenario.symptom == "healthy" else 1), result.output
    report = json.loads(out.read_text())
    assert not verdict_mismatches(report, scenario), explain(report)


LIVE = {name: s for name, s in SCENARIOS.items() if not s.history}
HISTORY = {name: s for name, s in SCENARIOS.items() if s.history}


@pytest.mark.parametrize("scenario", LIVE.values(), ids=list(LIVE))
def test_recorded_bundle_holds_the_real_engines_evidence(scenario: Scenario) -> None:
    """What a live vLLM 0.32 gave: its /version, log, scrapes and streams, on the scenario's paths."""
    bundle = load_path(scenario.recorded)
    assert bundle.endpoints is not None and bundle.log is not None and bundle.metrics is not None
    assert {e.version for e in bundle.endpoints.endpoints if e.role == "engine"} == {"0.32.0"}
    assert any("CPU KV cache size" in line.text for line in bundle.log.matched)
    assert bundle.stream is not None
    paths = {r.path for r in bundle.stream.requests}
    assert paths == ({"direct", "gateway"} if scenario.via_gateway else {"direct"})


@pytest.mark.parametrize("scenario", HISTORY.values(), ids=list(HISTORY))
def test_recorded_history_bundle_holds_only_what_prometheus_kept(scenario: Scenario) -> None:
    """A history-only run: Prometheus answers over the window, no probe, no log, no scrape of its own."""
    bundle = load_path(scenario.recorded)
    assert bundle.prometheus is not None and bundle.prometheus.queries
    assert all(q.error is None for q in bundle.prometheus.queries)
    assert bundle.stream is None and bundle.log is None and bundle.metrics is None
