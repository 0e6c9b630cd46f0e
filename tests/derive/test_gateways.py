"""Gateways beyond nginx, identified from what they answer with and named in the remediation.

Each test puts a real HTTP relay on 127.0.0.1 (``tests/support/gateway_personas.py``) that
answers as that gateway does, headers and behaviour, in front of the test SSE server; plain
nginx and the Ingress controllers' nginx are the real nginx binary. The stream probe measures
both paths and ``analyze`` reads the bundle as ``diagnose`` would. Assertions are the gateway
identified, the setting named and the words naming it, never times.
"""

from __future__ import annotations

import pytest

from doctor.checking.runner import AnalyzeOptions, analyze
from doctor.checklib import (
    buffering_remediation,
    compression_remediation,
    idle_timeout_remediation,
    response_start_remediation,
)
from doctor.collection.collector import collect
from doctor.derive import Evidence
from doctor.derive.gateway import identify
from doctor.gateways import BY_ID, IdleTimeout, Phrasing
from doctor.model import Budgets, Symptom
from doctor.probes.plan import CollectConfig
from tests.support.bundles import FIXTURES, bundle, request, stream
from tests.support.gateway_personas import GatewayPersona
from tests.support.nginx import NEEDS_NGINX, run_nginx
from tests.support.sse_server import SseServer

SCHEDULE = {"ttft": 0.05, "itl": 0.003, "n": 80}


@pytest.fixture(scope="module")
def server():
    with SseServer() as srv:
        yield srv


def diagnose(engine: str, gateway: str, settings: dict | None = None, **kw):
    kw.setdefault("requests", 1)
    kw.setdefault("warmup", 0)
    config = CollectConfig(engine=engine, gateway=gateway, route="chat", metrics=False, gpu=False, host=False, **kw)
    bundle = collect(config)
    report = analyze(bundle, AnalyzeOptions(budgets=Budgets(ttft_s=5.0), settings=settings or {}))
    return report, {f.code: f for f in report.findings}, Evidence(bundle).get("gateway")


def through(server: SseServer, persona: str, opts: dict | None = None, **behaviour):
    """The engine's URL with ``opts``, and a persona relaying the same options to it."""
    engine = server.base(**SCHEDULE, **(opts or {}))
    return engine, GatewayPersona(persona, server.url, **behaviour), engine[len(server.url):]


def test_an_envoy_that_buffers_the_body_is_told_to_stream_its_ext_proc(server):
    engine, persona, opts = through(server, "envoy", buffer=-1)
    with persona as gw:
        report, findings, gateway = diagnose(engine, gw.url + opts)
    assert gateway.family == "envoy" and "server: envoy" in gateway.primary.tells
    assert "x-envoy-upstream-service-time" in gateway.primary.tells
    rem = findings["LD301"].remediation
    assert (rem.setting, rem.suggested) == ("ext_proc processing_mode.response_body_mode", "STREAMED (or NONE)")
    assert rem.where.startswith("Envoy") and "BUFFERED" in rem.why
    assert report.verdict.symptom is Symptom.PROXY_ONLY
    assert report.verdict.primary_remediation.setting == rem.setting


def test_kong_keeps_the_engines_server_header_and_is_named_by_its_via(server):
    engine, persona, opts = through(server, "kong", buffer=4096)
    with persona as gw:
        _, findings, gateway = diagnose(engine, gw.url + opts)
    assert gateway.family == "kong"
    # SseServer says server: uvicorn as vLLM does; the direct path carries it too: the engine's, not a hop
    assert [h.family for h in gateway.hops] == ["kong"] and gateway.engine == ["server: uvicorn"]
    rem = findings["LD301"].remediation
    assert (rem.setting, rem.suggested) == ("response_buffering", "false")
    assert rem.where.startswith("Kong") and "X-Accel-Buffering: no" in rem.why


def test_litellm_reports_its_own_share_of_the_first_token(server):
    engine, persona, opts = through(server, "litellm", delay=0.4)
    with persona as gw:
        _, findings, gateway = diagnose(engine, gw.url + opts, requests=2)
    assert gateway.family == "litellm" and gateway.litellm_overhead.n == 2
    finding = findings["LD308"]
    assert finding.remediation.setting == "LITELLM_LOG"
    assert "LiteLLM reports" in finding.summary and "the upstream's share" in finding.summary
    assert "LD301" not in findings  # it streams: only its own time is added


def test_a_plain_relay_through_litellm_is_no_overhead_finding(server):
    engine, persona, opts = through(server, "litellm")
    with persona as gw:
        _, findings, gateway = diagnose(engine, gw.url + opts, requests=2)
    assert gateway.litellm_overhead.n == 2
    assert "LD308" not in findings


@pytest.mark.parametrize(
    ("persona", "setting", "named"),
    [("aws-alb", "idle_timeout.timeout_seconds", "AWS ALB"), ("cloudflare", "Cloudflare proxy read timeout", "Cloudflare")],
)
def test_an_idle_timeout_in_front_names_that_hops_setting(server, persona, setting, named):
    # The engine pauses 1.5 s before token 5; the hop gives up after 0.5 s without upstream data.
    engine, relay, opts = through(server, persona, {"stall": "5:1.5"}, idle=0.5)
    with relay as gw:
        _, findings, gateway = diagnose(engine, gw.url + opts, {"LD305": {"min_idle_s": "0.2"}}, requests=2,
                                        stall_timeout_s=10.0)
    assert gateway.hop(persona) is not None
    rem = findings["LD305"].remediation
    assert rem.setting == setting
    assert named in rem.why and named in " ".join(e.value for e in findings["LD305"].evidence if isinstance(e.value, str))


PROXY = "location / { proxy_pass http://{upstream}; }"


@pytest.mark.nginx
@NEEDS_NGINX
@pytest.mark.parametrize(
    ("kind", "setting", "suggested"),
    [
        (None, "proxy_buffering", "off"),
        ("f5-nginx-ingress", "nginx.org/proxy-buffering", '"False"'),
        ("ingress-nginx", "nginx.ingress.kubernetes.io/proxy-buffering", '"off"'),
    ],
)
def test_a_buffering_nginx_is_named_as_the_controller_the_user_says_it_is(server, kind, setting, suggested):
    engine = server.base(**SCHEDULE, framing="close")
    with run_nginx(PROXY, server.port) as gateway_url:
        _, findings, gateway = diagnose(engine, gateway_url + engine[len(server.url):], gateway_kind=kind)
    rem = findings["LD301"].remediation
    assert (rem.setting, rem.suggested) == (setting, suggested)
    identified = next(e for e in findings["LD301"].evidence if e.name == "gateway identified")
    if kind is None:
        # headers alone cannot tell nginx from an Ingress controller: said, and both annotations offered
        assert gateway.primary.inferred and "inferred" in identified.source
        assert "nginx.org/proxy-buffering" in rem.why and "nginx.ingress.kubernetes.io/proxy-buffering" in rem.why
    else:
        assert identified.source.startswith("--gateway-kind") and "server: nginx" in identified.source
    if kind == "ingress-nginx":
        assert "does not buffer by default" in rem.why


#: (gateway headers, remediation, a citation its text makes, the report holding it, what the report says)
CITED = [
    ({"server": "envoy"}, "buffering", "PR #329", "envoy-gie-pr329-vllm-stream-through-buffered-extproc.md",
     "response is set to buffered mode"),
    ({"server": "envoy"}, "buffering", "`end_of_stream`", "envoy-extproc-45437-sse-events-split-across-body-chunks.md",
     "buffers until envoy sends the `end_of_stream` flag"),
    ({"cf-ray": "1"}, "buffering", "cloudflared#1095", "cloudflare-cloudflared-sse-buffering-reports.md",
     "text/event-stream header the tunnel will not buffer it"),
    ({"cf-ray": "1"}, "buffering", "(#1449)", "cloudflare-cloudflared-sse-buffering-reports.md", "When using `GET`"),
    ({"cf-ray": "1"}, "timeout", "not an SSE comment", "cloudflare-leyabierta28-524-until-first-byte.md",
     "instead of an SSE comment"),
    ({"server": "awselb/2.0"}, "buffering", "application load balancer does not support streaming response from Lambda",
     "aws-alb-lambda-apigw-streaming-all-chunks-at-once.md", "does not support streaming response from Lambda"),
    ({"server": "uvicorn"}, "buffering", "PR #2753", "starlette-gzip-pr2753-32kib-buffering-of-streams.md",
     "buffered 32KiB at a time"),
    ({"server": "uvicorn"}, "buffering", "entirely into memory (PR #1028)",
     "starlette-basehttpmiddleware-pr1028-streaming-loaded-into-memory.md", "loaded entirely into memory"),
    ({"server": "traefik"}, "compression", "v3.3", "traefik-compress-middleware-sse-regressions.md",
     "upgraded from v2.11 to v3.3"),
]


@pytest.mark.parametrize(("headers", "which", "citation", "report", "quote"), CITED,
                         ids=[f"{c[3].split('-')[0]}:{c[2][:24]}" for c in CITED])
def test_every_cited_report_says_what_the_remediation_cites_it_for(headers, which, citation, report, quote):
    gw = identify([headers], engine=())  # an engine that sends none of these: each names its own hop
    rem = {"buffering": lambda: buffering_remediation(gw, "bursts", "re-run"),
           "compression": lambda: compression_remediation(gw, "gzip", "re-run"),
           "timeout": lambda: idle_timeout_remediation(gw, gw.family, 100.0, 300.0, "re-run")}[which]()
    assert citation in rem.why
    assert quote in (FIXTURES / "gateway-reports" / report).read_text()


@pytest.mark.parametrize(
    ("headers", "kind", "family", "families"),
    [
        ([{"server": "nginx/1.22.1"}], None, "nginx", ["nginx"]),
        ([{"server": "nginx"}], "ingress-nginx", "ingress-nginx", ["ingress-nginx"]),  # the user's word replaces it
        ([{"server": "cloudflare", "cf-ray": "8d-AMS"}, {"x-envoy-upstream-service-time": "4"}], None, "envoy",
         ["cloudflare", "envoy"]),  # a CDN in front is an outer hop
        ([{"server": "uvicorn", "x-litellm-call-id": "1"}], None, "litellm", ["litellm"]),  # LiteLLM's own uvicorn
        ([{"server": "uvicorn", "x-amzn-trace-id": "Root=1"}], None, "aws-alb", ["aws-alb"]),  # vLLM's own, passed on
        ([{"server": "uvicorn"}], None, None, []),  # what vLLM sends names no gateway
        ([{"server": "uvicorn"}], "FastAPI", "uvicorn", ["uvicorn"]),
        ([{}], "traefik", "traefik", ["traefik"]),
        ([{"server": "Hypothetical/1"}], None, None, []),
    ],
)
def test_identification_rules(headers, kind, family, families):
    gw = identify(headers, kind)
    assert gw.family == family and [h.family for h in gw.hops] == families


#: (gateway responses, the direct path's responses, the family named, the hops, what was the engine's)
ENGINE_CASES = [
    # Apache httpd, lighttpd, HAProxy pass vLLM's Server on: the engine's, not a Python edge
    ([{"server": "uvicorn"}], [{"server": "uvicorn"}], None, [], ["server: uvicorn"]),
    # Caddy appends it
    ([{"server": "Caddy, uvicorn"}], [{"server": "uvicorn"}], "caddy", ["caddy"], ["server: uvicorn"]),
    ([{"server": "uvicorn", "via": "1.1 varnish (Varnish/7.1)", "x-varnish": "32770", "age": "0"}],
     [{"server": "uvicorn"}], "varnish", ["varnish"], ["server: uvicorn"]),
    ([{"via": "1.1 edge-3 (Varnish/7.6)"}], [], "varnish", ["varnish"], []),
    # Apache httpd is told by the shape of its Keep-Alive header, inferred
    ([{"server": "uvicorn", "keep-alive": "timeout=5, max=100"}], [{"server": "uvicorn"}], "apache", ["apache"],
     ["server: uvicorn"]),
    ([{"server": "Apache/2.4.62 (Debian)"}], [{"server": "uvicorn"}], "apache", ["apache"], []),
    ([{"server": "lighttpd/1.4.69"}], [{"server": "uvicorn"}], "lighttpd", ["lighttpd"], []),
    # a Python edge in front of an engine that does not say uvicorn is named
    ([{"server": "uvicorn"}], [{"server": "llama.cpp"}], "uvicorn", ["uvicorn"], []),
    # a CDN in front of both paths names no gateway hop
    ([{"server": "uvicorn", "cf-ray": "8d-AMS"}], [{"server": "uvicorn", "cf-ray": "8c-AMS"}], None, [],
     ["server: uvicorn"]),
]


@pytest.mark.parametrize(("seen", "direct", "family", "families", "engine"), ENGINE_CASES)
def test_what_the_direct_path_also_carries_is_the_engines(seen, direct, family, families, engine):
    gw = identify(seen, engine=direct)
    assert (gw.family, [h.family for h in gw.hops], gw.engine) == (family, families, engine)
    assert gw.name == ("an unidentified gateway" if family is None else gw.primary.name)


def test_apache_told_by_its_keep_alive_is_inferred_and_says_so():
    gw = identify([{"keep-alive": "timeout=5, max=100"}, {"keep-alive": "timeout=5, max=99"}])
    assert gw.primary.inferred and "Keep-Alive" in gw.primary.note
    assert gw.primary.tells == ["keep-alive: timeout=5, max=100"]  # one is enough: max counts down


def test_an_unidentified_gateway_is_given_the_usual_suspects_never_one_products_knob():
    gw = identify([{"server": "uvicorn"}])
    rems = [buffering_remediation(gw, "bursts", "re-run"), compression_remediation(gw, "gzip", "re-run"),
            response_start_remediation(gw, "re-run"), idle_timeout_remediation(gw, None, 60.0, 300.0, "re-run")]
    assert [r.setting for r in rems] == ["response buffering", "response compression", "gateway_response_start",
                                         "upstream idle timeout"]
    for rem in rems:
        assert rem.where.startswith("an unidentified gateway") and rem.why.startswith("An unidentified gateway")
        assert "--gateway-kind" in rem.why and "--gateway-kind" in rem.where  # the terminal prints where, not why
        assert all(product in rem.suggested + rem.why for product in ("nginx", "HAProxy", "lighttpd", "Varnish", "Caddy"))
    # the switches the terminal shows without -v: in the suggestion, where one setting per product exists
    assert all("HAProxy `option http-no-delay`" in rem.suggested for rem in rems[:1])


NEW_FAMILIES = ["apache", "lighttpd", "haproxy", "caddy", "varnish", "traefik"]


@pytest.mark.parametrize("family", NEW_FAMILIES)
def test_each_new_gateway_has_its_own_setting_for_every_behaviour(family):
    record = BY_ID[family]
    assert all(isinstance(row, Phrasing) for row in (record.buffering, record.compression, record.response_start))
    assert isinstance(record.idle_timeout, IdleTimeout)
    gw = identify([{}], family)
    for rem in (buffering_remediation(gw, "bursts", "re-run"), compression_remediation(gw, "gzip", "re-run"),
                response_start_remediation(gw, "re-run"), idle_timeout_remediation(gw, family, 60.0, 300.0, "re-run")):
        assert "proxy_buffering" not in rem.setting and "unidentified" not in rem.why
        assert rem.where.startswith(gw.name.split(" (")[0])


def test_only_an_nginx_named_by_its_headers_is_inferred():
    assert identify([{"server": "nginx"}]).primary.inferred
    assert not identify([{"server": "nginx"}], "nginx").primary.inferred
    plain = buffering_remediation(identify([{"server": "nginx"}], "nginx"), "bursts", "re-run")
    assert "nginx.org/proxy-buffering" not in plain.why  # the user said plain nginx


def test_litellm_overhead_header_values_that_are_not_durations_are_left_out():
    reqs = [request("gateway", i, ttft=0.2, gaps=[0.01] * 3, start=i * 5.0,
                    headers={"x-litellm-overhead-duration-ms": value}) for i, value in enumerate(("12.5", "nan", "-3", "fast", "40"))]
    gw = Evidence(bundle(stream=stream(reqs))).get("gateway")
    assert (gw.litellm_overhead.n, gw.litellm_overhead.min, gw.litellm_overhead.max) == (2, 0.0125, 0.04)
