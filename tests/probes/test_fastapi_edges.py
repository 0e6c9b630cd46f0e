"""Real FastAPI edges in front of the test SSE server, served by a real uvicorn (one behind a real nginx).

The application's own route (``--gateway-route``), the framings those edges answer in, and the
edge checks' findings, on the edges ``tests/support/edges.py`` describes. Assertions are orders,
ratios and classifications, never absolute times.
"""

from __future__ import annotations

import json
import statistics

import pytest
from typer.testing import CliRunner

from doctor.checking.runner import AnalyzeOptions, analyze
from doctor.cli import app
from doctor.collection.collector import collect
from doctor.derive.stream_stats import path_stats
from doctor.foundation.clock import Clock
from doctor.model import Budgets, Symptom
from doctor.probes.gateway_route import parse_route
from doctor.probes.plan import CollectConfig
from doctor.probes.stream import run_stream_probe
from tests.support.edges import run_edge
from tests.support.nginx import NEEDS_NGINX, run_nginx
from tests.support.sse_server import SseServer

ROUTE = "POST /chat?prompt={prompt}&max_tokens={max_tokens}"
N = 16
GZIP_NGINX = ("location / { proxy_pass http://{upstream}; gzip on; gzip_types text/event-stream; "
              "gzip_min_length 0; }")


@pytest.fixture(scope="module")
def server():
    with SseServer() as srv:
        yield srv


def config(engine: str, gateway: str, **kw) -> CollectConfig:
    kw.setdefault("requests", 3)
    kw.setdefault("warmup", 1)
    kw.setdefault("max_tokens", N)
    return CollectConfig(engine=engine, gateway=gateway, gateway_route=parse_route(ROUTE), route="chat",
                         metrics=False, gpu=False, host=False, **kw)


def probe(engine: str, gateway: str, **kw):
    evidence, errors = run_stream_probe(config(engine, gateway, **kw), Clock(), lambda _msg: None)
    assert errors == []
    return {p: path_stats(p, None, [r for r in evidence.requests if r.path == p]) for p in ("direct", "gateway")}, evidence


def diagnose(engine: str, gateway: str, ttft_budget: float = 0.5, **kw):
    report = analyze(collect(config(engine, gateway, **kw)), AnalyzeOptions(budgets=Budgets(ttft_s=ttft_budget)))
    return report, {f.code: f for f in report.findings}


def test_the_playbook_edge_is_timed_like_the_engine_behind_it(server):
    engine = server.base(ttft=0.2, itl=0.02)
    with run_edge("playbook", engine) as (edge, app):
        stats, evidence = probe(engine, edge)
    direct, gateway = stats["direct"], stats["gateway"]
    assert direct.n_ok == gateway.n_ok == 3
    assert (direct.framing, direct.tokens_estimated) == ("openai-sse", False)
    assert (gateway.framing, gateway.tokens_estimated) == ("raw", True)
    # the application's route carried the same prompt the engine's route did, URL-decoded intact
    assert all(p.startswith("Request ") and "quick brown fox" in p for p in app.state.prompts)
    assert evidence.shape.gateway_route == ROUTE
    # one token per read, as written: TTFT, gaps and bursts as the engine's
    assert direct.events_per_read.p50 == gateway.events_per_read.p50 == 1.0
    assert 0.5 < gateway.itl.p50 / direct.itl.p50 < 2.0
    assert 0.5 < gateway.ttft.p50 / direct.ttft.p50 < 2.0
    assert statistics.median(r.tokens for r in gateway.requests) == N


def test_an_ndjson_edge_counts_one_token_per_line(server):
    engine = server.base(ttft=0.05, itl=0.01)
    with run_edge("ndjson", engine) as (edge, _):
        stats, _ = probe(engine, edge)
    gateway = stats["gateway"]
    assert (gateway.framing, gateway.tokens_estimated) == ("ndjson", False)
    assert [r.tokens for r in gateway.requests] == [N] * 4
    assert gateway.events_per_read.p50 == 1.0


def test_gzip_middleware_on_the_edge_is_named_with_its_setting(server):
    # edge and engine both say server: uvicorn: no header names the edge, --gateway-kind does
    engine = server.base(ttft=0.2, itl=0.01)
    with run_edge("gzip", engine) as (edge, _):
        _, findings = diagnose(engine, edge, gateway_kind="fastapi")
    assert findings["LD302"].remediation.setting == "GZipMiddleware"
    held = findings["LD307"]  # GZipMiddleware sends the response start with the first body
    assert "GZipMiddleware" in held.remediation.why and "Python edge" in held.summary
    assert findings["LD306"].severity.value == "info"


def test_a_blocking_client_in_an_async_generator_serialises_the_edge(server):
    engine = server.base(ttft=0.05, itl=0.02)
    with run_edge("blocking", engine) as (edge, _):
        report, findings = diagnose(engine, edge, concurrency=4, requests=4)
    assert report.verdict.symptom is Symptom.PROXY_ONLY
    serial = findings["LD303"]
    assert report.verdict.primary_remediation.setting == serial.remediation.setting == "gateway_streaming"
    assert "thread pool" in serial.remediation.why and "AsyncOpenAI" in serial.remediation.why


def test_the_playbook_edge_alone_is_healthy(server):
    engine = server.base(ttft=0.05, itl=0.02)
    with run_edge("playbook", engine) as (edge, _):
        report, findings = diagnose(engine, edge, requests=4, ttft_budget=2.0)  # a loaded CI machine is no symptom
    assert report.verdict.symptom is Symptom.HEALTHY, report.verdict.summary
    assert {code for code, f in findings.items() if f.severity.value != "info"} == set()


@pytest.mark.nginx
@NEEDS_NGINX
def test_nginx_gzip_in_front_of_the_playbook_edge_is_proxy_only_compression(server):
    engine = server.base(ttft=0.05, itl=0.02)
    with run_edge("playbook", engine) as (edge, _), run_nginx(GZIP_NGINX, int(edge.rsplit(":", 1)[1])) as gateway:
        report, findings = diagnose(engine, gateway, requests=4, max_tokens=32)
    assert report.verdict.symptom is Symptom.PROXY_ONLY, report.verdict.summary
    assert report.verdict.primary_remediation.setting == "gzip"
    assert findings["LD302"].severity.value == "critical"


def _diagnose_cli(engine: str, gateway: str, out, *extra: str) -> tuple[int, dict]:
    """``llm-doctor diagnose`` as the README shows it, on the application's own route."""
    result = CliRunner().invoke(app, ["diagnose", "--engine", engine, "--route", "chat", "--gateway", gateway,
                                      "--gateway-route", "POST /chat?prompt={prompt}", "--requests", "4",
                                      "--no-gpu", "--no-host", "--json", str(out), *extra])
    assert "Traceback" not in result.output, result.output
    return result.exit_code, json.loads(out.read_text())


def test_diagnose_on_the_playbook_edge_route_is_healthy_and_measured(server, tmp_path):
    engine = server.base(ttft=0.05, itl=0.005)
    with run_edge("playbook", engine) as (edge, app_):
        # a TTFT budget well above the 50 ms engine: a loaded shared CI machine must not make it a symptom
        code, doc = _diagnose_cli(engine, edge, tmp_path / "report.json", "--ttft-budget", "2")
    assert doc["verdict"]["symptom"] == "healthy", doc["verdict"]["summary"]
    assert code == 0
    paths = next(v for k, v in doc["views"].items() if k == "stream_stats")["paths"]
    direct, gateway = paths["direct"], paths["gateway"]
    assert gateway["framing"] == "raw" and gateway["tokens_estimated"] is True and gateway["n_ok"] == 4
    assert gateway["events_per_read"]["p50"] == direct["events_per_read"]["p50"] == 1.0
    assert 0.5 < gateway["itl"]["p50"] / direct["itl"]["p50"] < 2.0
    assert len(app_.state.prompts) == 5  # warm-up and measured requests reached the application's route


@pytest.mark.slow
@pytest.mark.nginx
@NEEDS_NGINX
def test_diagnose_with_nginx_gzip_in_front_of_the_playbook_edge_names_compression(server, tmp_path):
    engine = server.base(ttft=0.05, itl=0.02)
    with run_edge("playbook", engine) as (edge, _), run_nginx(GZIP_NGINX, int(edge.rsplit(":", 1)[1])) as gateway:
        code, doc = _diagnose_cli(engine, gateway, tmp_path / "report.json")
    assert code == 1
    verdict = doc["verdict"]
    assert verdict["symptom"] == "proxy-only" and verdict["primary_remediation"]["setting"] == "gzip"
