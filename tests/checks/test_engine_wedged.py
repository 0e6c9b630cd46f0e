"""A wedged engine behind a green /health, diagnosed with defaults against a real HTTP server.

The SSE test server answers /health, /v1/models and /metrics with 200 while its chat route
accepts each request (200, headers) and never sends a token (``fail=hang``): its /metrics
counters stand still, as a vLLM whose engine core is stopped (vllm#39863). The probe's watchdog
must stop the run early and the verdict name the wedge, its check and the restart.
"""

from __future__ import annotations

import json

from typer.testing import CliRunner

from doctor.bundle import load_path
from doctor.cli import app
from doctor.evidence.stream import WEDGED
from tests.support.sse_server import SseServer


def test_a_wedged_engine_is_named_fast_with_defaults(tmp_path) -> None:
    report, saved = tmp_path / "r.json", tmp_path / "b.json"
    with SseServer() as srv:
        result = CliRunner().invoke(app, ["diagnose", "--engine", srv.base(fail="hang"), "--no-gpu", "--no-host",
                                          "--json", str(report), "--bundle", str(saved)], env={"COLUMNS": "200"})
    assert result.exit_code != 0, result.output
    verdict = json.loads(report.read_text())["verdict"]
    assert verdict["symptom"] == "pre-first-token"
    assert verdict["primary_code"] == "LD105"
    assert verdict["primary_remediation"]["setting"] == "restart_and_health_check"
    assert "/v1/completions" in verdict["primary_remediation"]["suggested"]
    assert not any("histograms" in m for m in verdict["missing"])  # frozen histograms are evidence, not missing

    bundle = load_path(saved)
    assert bundle.endpoints is not None and bundle.endpoints.endpoints[0].health_status == 200
    stream = bundle.stream
    assert stream is not None and stream.wedge is not None
    stop = stream.wedge
    # said within 30 s of the first request that got no token, on the probe's own clock
    assert stop.t_detected - stop.t_first_waiting < 30.0
    assert stop.t_detected - stop.t_first_waiting >= stop.bound_s
    # stopped early: only the requests in flight were sent (the warm-up), none waited out its stall timeout
    assert stop.sent == len(stream.requests) == stop.in_flight
    assert all(r.outcome == WEDGED and not r.tokens for r in stream.requests)
    assert stream.shape.stopped is not None and stream.shape.stopped.startswith("the engine stood still")
