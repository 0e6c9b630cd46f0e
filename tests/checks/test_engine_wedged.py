"""A wedged engine behind a green /health, and a hung server that answers nothing at all, each diagnosed
against a real server on 127.0.0.1.

The SSE test server answers /health, /v1/models and /metrics with 200 while its chat route
accepts each request (200, headers) and never sends a token (``fail=hang``): its /metrics
counters stand still, as a vLLM whose engine core is stopped (vllm#39863). The probe's watchdog
must stop the run early and the verdict name the wedge, its check and the restart. A hung server
is a real TCP listener that accepts every connection and never writes a byte: the run must name it
(hung, restart it, a health check with a timeout) after two requests, each held to the hung bound
instead of the probe's own duration.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from doctor.bundle import load_path
from doctor.checking.runner import AnalyzeOptions, analyze
from doctor.checklib import CONNECT_TIMEOUTS, hung_gateway_remediation
from doctor.cli import app
from doctor.collection.collector import collect
from doctor.evidence.stream import HEAD_TIMEOUT, SILENT_BASIS, WEDGED
from doctor.probes import deadlines
from doctor.probes.plan import CollectConfig
from tests.support.hostile_server import blackholed_port, silent_port
from tests.support.nginx import NEEDS_NGINX, run_nginx
from tests.support.sse_server import SseServer


@pytest.mark.slow
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


#: The hung bound a silent target's response heads are held to, here: its default
#: (``deadlines.HUNG_FLOOR_S``, 5 s) is a tuning the tests below do not assert, and 1 s saves each
#: of them 8 s of waiting for two heads that never come.
HUNG_FLOOR_S = 1.0


@pytest.mark.slow
def test_a_server_that_accepts_and_never_answers_is_named_hung_long_before_the_probes_duration(monkeypatch) -> None:
    monkeypatch.setattr(deadlines, "HUNG_FLOOR_S", HUNG_FLOOR_S)
    duration = 300.0  # the probe's own duration and stall timeout: what the run would otherwise wait
    with silent_port() as url:
        config = CollectConfig(engine=url, gpu=False, host=False, duration_s=duration, stall_timeout_s=duration)
        config.http.timeout_s = 2.0  # each GET's --timeout (10 s by default)
        bundle = collect(config)
    report = analyze(bundle, AnalyzeOptions())
    assert report.verdict.primary_code == "LD501"
    rem = report.verdict.primary_remediation
    assert rem is not None and rem.setting == "restart_and_health_check" and "restart the server" in rem.suggested
    assert "hung" in report.verdict.summary
    finding = next(f for f in report.findings if f.code == "LD501")
    assert "hung" in finding.summary and "answers nothing at all" in finding.remediation.why

    assert bundle.endpoints is not None and bundle.endpoints.endpoints[0].unanswered_s == 2.0
    assert bundle.metrics is None or not bundle.metrics.scrapes  # its /metrics is the same silent server
    stream = bundle.stream
    assert stream is not None
    # ended early by behaviour, not by the clock: each head was held to the hung bound (not the
    # 300 s stall timeout), and the run stopped after the warm-up and one measured request
    assert all(r.outcome == HEAD_TIMEOUT and r.head_deadline_basis == SILENT_BASIS for r in stream.requests)
    assert all(r.head_deadline_s == HUNG_FLOOR_S < duration for r in stream.requests)
    assert len(stream.requests) == 2  # the warm-up and one measured: head-timeout is decisive
    assert stream.shape.stopped is not None and "head-timeout is not one to retry" in stream.shape.stopped


@pytest.mark.slow
@NEEDS_NGINX
def test_a_gateway_waiting_on_a_blackholed_upstream_is_the_gateway_not_a_server_to_restart(monkeypatch) -> None:
    """nginx in front of an engine address that drops connection attempts waits its 60 s
    ``proxy_connect_timeout`` and answers nothing within the probe's 2 s --timeout: the gateway or
    its upstream, named by its connect timeout, not "restart the server now"."""
    monkeypatch.setattr(deadlines, "HUNG_FLOOR_S", HUNG_FLOOR_S)
    with blackholed_port() as upstream, run_nginx("location / { proxy_pass http://{upstream}; }", upstream) as gateway:
        config = CollectConfig(gateway=gateway, gateway_kind="nginx", gpu=False, host=False, metrics=False)
        config.http.timeout_s = 2.0  # each GET's --timeout: under nginx's 60 s proxy_connect_timeout
        bundle = collect(config)
    assert bundle.endpoints is not None and bundle.endpoints.endpoints[0].unanswered_s == 2.0
    report = analyze(bundle, AnalyzeOptions())
    finding = next(f for f in report.findings if f.code == "LD501")
    assert "gateway: hung-gateway" in finding.summary, finding.summary
    rem = finding.remediation
    assert rem is not None and rem.setting == "proxy_connect_timeout" and "proxy_connect_timeout" in (rem.where or "")
    assert "the gateway or its upstream" in rem.why and "restart the server" not in rem.suggested
    primary = report.verdict.primary_remediation
    assert primary is None or primary.setting != "restart_and_health_check"
    stream = bundle.stream
    assert stream is not None and stream.requests
    assert all("the gateway or its upstream" in (r.error or "") for r in stream.requests)


def test_a_gateway_unidentified_lists_every_connect_timeout() -> None:
    rem = hung_gateway_remediation(None, 10.0, "rerun")
    assert "proxy_connect_timeout" in rem.suggested and "timeout connect" in rem.suggested
    assert all(f"`{p.setting}`" in rem.suggested for p in CONNECT_TIMEOUTS.values())  # read from the one table
    assert rem.suggested.count("`connect_timeout`") == 2  # Envoy (with its AI Gateway alias) and Kong
    assert "nginx `proxy_connect_timeout` (60 s default);" in rem.suggested  # the table's default, beside its setting
    assert rem.suggested.count(" default)") == sum(1 for p in set(CONNECT_TIMEOUTS.values()) if p.default)
    assert "10 s --timeout" in rem.why and "--gateway-kind" in rem.where
