"""A gateway's own connection cap and its retries, reproduced with the real HAProxy and nginx binaries.

Each test runs its gateway as its own process with its own configuration and port
(``tests/support/gateways_real.py``, ``tests/support/nginx.py``) in front of the test SSE server, which
answers /metrics from its own accounting (``Counts``): the engine's waiting gauge,
its running gauge and the requests it took in are known exactly. ``collect`` then ``analyze`` read
the run as ``diagnose`` does. Assertions are the verdict's class, the check and the setting named,
never times. docs/gateways.md records what each verdict said.
"""

from __future__ import annotations

import pytest

from checks.error_rate import failure_key
from doctor.checking.runner import AnalyzeOptions, analyze
from doctor.collection.collector import collect
from doctor.model import Budgets, Outcome, Report, Symptom
from doctor.probes.plan import CollectConfig
from tests.support.bundles import request
from tests.support.gateways_real import needs, run_gateway
from tests.support.nginx import NEEDS_NGINX, run_nginx
from tests.support.sse_server import SseServer

#: One answer is ~0.35 s: four concurrent answers behind a cap of one make a staircase of whole answers.
SCHEDULE = {"ttft": 0.05, "itl": 0.01, "n": 30}
BUDGETS = Budgets(ttft_s=0.5)


def diagnose(server: SseServer, gateway: str, opts: dict[str, object], **kw: object) -> Report:
    """Concurrency 4 on both paths unless ``kw`` says otherwise, the engine's /metrics scraped around and during the probe."""
    engine = server.base(**opts)
    config = CollectConfig(engine=engine, gateway=gateway + engine[len(server.url):], route="chat", gpu=False,
                           host=False, **{"concurrency": 4, "requests": 8, "warmup": 1, **kw})
    return analyze(collect(config), AnalyzeOptions(budgets=BUDGETS))


def result(report: Report, code: str):
    return next(r for r in report.results if r.code == code)


@needs("haproxy")
@pytest.mark.slow
def test_haproxy_maxconn_queues_streams_and_is_named():
    # `option http-no-delay`: HAProxy otherwise coalesces small writes, which LD301 reports on its own.
    with SseServer() as server, run_gateway("haproxy", "option http-no-delay\n  server engine {upstream} maxconn 1",
                                                        server.port) as gateway:
        report = diagnose(server, gateway, SCHEDULE, gateway_kind="haproxy")
    assert report.verdict.symptom is Symptom.PROXY_ONLY, report.verdict.summary
    assert report.verdict.primary_code == "LD309"
    rem = report.verdict.primary_remediation
    assert rem.setting == "maxconn" and "server" in rem.where
    cap = {e.name: e.value for e in result(report, "LD309").finding.evidence}
    assert cap["engine waiting max"] == 0
    # 1, give or take a stream ending between the engine's count and the client's stamp
    assert cap["gateway streams the engine ran"] < 4
    serialisation = result(report, "LD303")
    assert serialisation.outcome is Outcome.PASS and "LD309" in serialisation.message
    assert all(f.remediation.setting != "replicas" for f in report.findings)


@needs("haproxy")
def test_haproxy_maxconn_without_the_engines_metrics_is_named_from_the_probes_own_timings():
    """Stock HAProxy names itself in no header, and without the engine's /metrics no waiting gauge says
    the queue is not the engine's: 8 concurrent streams through `maxconn 2` once read as a serialising
    edge ("async streaming client in the edge"). The probe's first and last tokens show the cap."""
    with SseServer() as server, run_gateway("haproxy", "option http-no-delay\n  server engine {upstream} maxconn 2",
                                                        server.port) as gateway:
        report = diagnose(server, gateway, SCHEDULE, concurrency=8, requests=8, metrics=False)
    assert report.bundle.metrics is None  # the engine's /metrics was not read: no waiting gauge
    assert report.verdict.symptom is Symptom.PROXY_ONLY, report.verdict.summary
    assert report.verdict.primary_code == "LD309", report.verdict.summary
    rem = report.verdict.primary_remediation
    assert rem.setting == "gateway connection limit" and "HAProxy `maxconn` on the server line" in rem.suggested
    assert "--gateway-kind" in rem.where  # nothing named HAProxy: its own spelling is one flag away
    cap = {e.name: e.value for e in result(report, "LD309").finding.evidence}
    assert cap["gateway streams at once (most)"] == 2  # the maxconn, give or take none: each starts as one ends
    assert cap["direct streams at once (most)"] > 2
    serialisation = result(report, "LD303")
    assert serialisation.outcome is Outcome.PASS and "LD309" in serialisation.message


NGINX_LOCATION = 'location / { proxy_pass http://engine; proxy_buffering off; proxy_http_version 1.1; proxy_set_header Connection ""; }'


@NEEDS_NGINX
@pytest.mark.parametrize(("conf", "status", "setting"), [
    pytest.param("upstream engine { server {upstream} max_conns=1; }\n"
                 "server { listen 127.0.0.1:{port}; " + NGINX_LOCATION + " }", 502, "max_conns", marks=pytest.mark.slow),
    ("upstream engine { server {upstream}; }\nlimit_conn_zone $binary_remote_addr zone=per_client:1m;\n"
     "server { listen 127.0.0.1:{port}; limit_conn per_client 1; " + NGINX_LOCATION + " }", 503, "limit_conn"),
], ids=["max_conns", "limit_conn"])
def test_nginx_limits_refuse_streams_themselves_and_are_named(conf, status, setting):
    with SseServer() as server, run_nginx(conf, server.port) as gateway:
        report = diagnose(server, gateway, SCHEDULE)
        received = server.received
    assert report.verdict.symptom is Symptom.PROXY_ONLY, report.verdict.summary
    assert report.verdict.primary_code == "LD309"
    assert report.verdict.primary_remediation.setting == setting
    cap = result(report, "LD309").finding
    assert f"HTTP {status}" in cap.summary and "never reached it" in cap.summary
    took = next(e.value for e in cap.evidence if e.name == "requests the engine took in")
    assert took == received
    errors = result(report, "LD501").finding
    assert errors.remediation.setting == "gateway_limit"
    assert all(f.remediation.setting != "replicas" for f in report.findings)


@NEEDS_NGINX
def test_nginx_retrying_on_timeout_multiplies_the_engines_requests():
    # Two server lines on one engine whose headers take 0.6 s; nginx gives each try 250 ms, then the next.
    conf = ("upstream engine { server {upstream} max_fails=0; server {upstream} max_fails=0; }\n"
            "server { listen 127.0.0.1:{port}; location / { proxy_pass http://engine; proxy_read_timeout 250ms; "
            "proxy_next_upstream error timeout non_idempotent; proxy_buffering off; } }")
    slow = {"head": 0.6, "ttft": 0.05, "itl": 0.01, "n": 16}
    with SseServer() as server, run_nginx(conf, server.port) as gateway:
        report = diagnose(server, gateway, slow, requests=3, concurrency=1, warmup=0)
        received = server.received
    retries = result(report, "LD310").finding
    assert retries is not None, result(report, "LD310").message
    values = {e.name: e.value for e in retries.evidence}
    sent = values["requests the probe sent"]
    assert values["requests the engine took in"] == received > sent
    assert values["engine requests per gateway request"] == 2.0  # one try per upstream server line
    assert "exact" in retries.summary
    assert retries.remediation.setting == "proxy_next_upstream"
    assert report.verdict.symptom is Symptom.PROXY_ONLY
    assert report.verdict.primary_code == "LD310"


@pytest.mark.parametrize(("status", "headers", "body", "key"), [
    (502, {"content-type": "text/html", "server": "nginx"}, "<html><head><title>502 Bad Gateway</title>", "gateway-refused"),
    (503, {"x-envoy-overloaded": "true"}, "upstream connect error or disconnect/reset before headers. reset reason: overflow",
     "gateway-refused"),
    (503, {"content-type": "application/json"}, '{"error": {"message": "queue full"}}', "http-503"),
])
def test_ld501_names_the_gateways_limit_only_for_its_own_refusals(status, headers, body, key):
    req = request("gateway", 1, ttft=0, gaps=[], outcome="http-status")
    req.status, req.headers, req.body_excerpt = status, headers, body
    assert failure_key(req, direct_answers=True) == key
    assert failure_key(req) != "gateway-refused"  # the engine may be down: its error page is about the engine
