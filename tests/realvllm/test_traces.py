"""The real vLLM CPU build exporting its per-request spans to llm-doctor's OTLP receiver.

One server, with the queueing incident's flags (``--max-num-seqs 2``), started with
``--otlp-traces-endpoint`` pointing at the port ``diagnose --otlp-listen`` then listens on, and
``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf``. First the healthy control (no other users):
every probe request's span says it queued about nothing. Then the queueing incident's users (a
process of their own): the slow requests' own spans say they waited in the queue, request by request.
Both times every hop of every request is at least ``-TOLERANCE_S`` and the hops sum to the client's
own TTFT: the engine's TTFT never exceeds what the client felt by more than the tolerance.

With ``LLM_DOCTOR_RECORD=1`` the queueing run's bundle becomes ``fixtures/bundles/realvllm-traced-queueing.json.gz``
(``run_diagnose`` records each run under the scenario's name; the queued run is the last).
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from doctor.derive.request_hops import TOLERANCE_S
from tests.realvllm.diagnose import explain, run_diagnose
from tests.realvllm.load import user_load
from tests.realvllm.scenarios import SCENARIOS
from tests.realvllm.server import serve_vllm
from tests.support.nginx import free_port

pytestmark = pytest.mark.realvllm

def _hops(report: dict[str, Any]) -> dict[str, Any]:
    view = report["views"]["request_hops"]
    assert "missing" not in view, f"{view}\n{explain(report)}"
    return view


def _summed(view: dict[str, Any]) -> None:
    """Request by request, the hops sum to the client's TTFT and none is below the tolerance."""
    for row in view["requests"]:
        assert row["engine_span"] and row["request_id"], row
        if row["ttft"] is None:  # no first token before the probe stopped waiting: no TTFT to split
            continue
        assert sum(h["seconds"] for h in row["hops"]) == pytest.approx(row["ttft"], abs=1e-6), row
        assert all(h["seconds"] >= -TOLERANCE_S for h in row["hops"]), row["hops"]
        assert row["engine_ttft"] <= row["ttft"] + TOLERANCE_S, row


def test_real_vllm_spans_explain_each_slow_request(tiny_model: Path, tmp_path: Path) -> None:
    port = free_port()
    scenario = SCENARIOS["users-queueing"]
    engine_args = [*scenario.engine_args, "--otlp-traces-endpoint", f"http://127.0.0.1:{port}/v1/traces"]
    # named for itself: with LLM_DOCTOR_RECORD=1 the harness keeps the last run's bundle (the queued one)
    # as the scenario's recorded fixture, which must not be the queueing incident's own
    traced = dataclasses.replace(scenario, name="traced-queueing",
                                 probe_args=[*scenario.probe_args, "--otlp-listen", f"127.0.0.1:{port}"])
    with serve_vllm(tiny_model, tmp_path / "vllm.log", engine_args, env={"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}) as server:
        control = run_diagnose(traced, tmp_path / "control", engine=server.url)
        assert scenario.load is not None
        with user_load(server.url, scenario.load, tmp_path / "users.jsonl", server.log):
            queued = run_diagnose(traced, tmp_path / "queued", engine=server.url)
    calm = _hops(control)
    _summed(calm)
    # the healthy control: nothing ahead of the probe's requests in the engine
    assert all(row["queue"] < 0.1 * row["engine_ttft"] for row in calm["requests"]), calm["requests"]
    busy = _hops(queued)
    _summed(busy)
    slow = [busy["requests"][i] for i in busy["slow"]]
    assert slow and busy["slow_hop"] == "queue", busy
    assert all(row["slowest_hop"] == "queue" and row["queue"] > 0.5 * row["ttft"] for row in slow), slow
    assert busy["others"] > 0 and busy["others_queue"]["n"] == busy["others"]  # the users' own spans
    # the terminal explains the three slowest, one line each
    text = subprocess.run([sys.executable, "-m", "doctor", "analyze", str(tmp_path / "queued" / "bundle.json.gz")],
                          capture_output=True, text=True, timeout=300).stdout
    timed = [row for row in busy["requests"] if row["ttft"] is not None]
    lines = [line for line in text.splitlines() if line.lstrip().startswith("- request")]
    assert len(lines) == min(3, len(timed)), text
    # the verdict's reasoning names the slow requests' own hop
    assert any("slowest request" in line and "queue" in line for line in queued["verdict"]["reasoning"]), queued["verdict"]
