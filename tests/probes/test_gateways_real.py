"""Real gateways from Debian's packages in front of the real SSE server, each streaming and each holding.

nginx, Apache httpd, lighttpd, HAProxy, Caddy and Varnish each run as the test's own process
(``tests/support/nginx.py``, ``tests/support/gateways_real.py``) in front of the test SSE server,
which is also the direct path and says ``server: uvicorn`` as vLLM does. ``llm-doctor diagnose``
runs as the README shows it, with a few requests. Every configuration that streams token by
token must be HEALTHY with exit 0; every one that holds the stream must be proxy-only with the
answering gateway's own setting, or, where no header names the gateway (lighttpd and HAProxy add
none by default), "an unidentified gateway" with that setting among the possibilities, and the
gateway's own setting once ``--gateway-kind`` names it.

Which configurations hold was measured (docs/gateways.md, "Measured on real gateways"): lighttpd
and HAProxy hold by default, nginx, Apache httpd, Caddy and Varnish stream by default. Apache
httpd streamed in every configuration tried, mod_deflate included (gzip flushed per event): its
compressed stream is a risk, not a felt latency. Assertions are classes, names and settings, never
times.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from doctor.cli import app
from tests.support import gateways_real
from tests.support.gateways_real import run_gateway
from tests.support.nginx import NEEDS_NGINX, run_nginx
from tests.support.sse_server import SseServer

SCHEDULE = {"ttft": 0.05, "itl": 0.003, "n": 80}
UNIDENTIFIED = "an unidentified gateway"


@dataclass(frozen=True)
class Case:
    kind: str  # "nginx" or a gateways_real.PRODUCTS key
    conf: str  # the variant's configuration (see run_gateway / run_nginx)
    streams: bool
    named: str = ""  # how the remediation names the gateway
    setting: str = ""  # the primary remediation's setting
    code: str = ""  # the finding that names it
    gateway_kind: str | None = None  # --gateway-kind, when the case passes it
    # words the terminal's remediation must show without -v (the gateway's own switch among the suspects), with
    # the hint to name it by --gateway-kind: stock HAProxy and lighttpd send no header of their own
    mentions: str = ""


NGINX_STREAM = "location / { proxy_pass http://{upstream}; proxy_buffering off; proxy_http_version 1.1; }"
CASES = [
    Case("nginx", "location / { proxy_pass http://{upstream}; }", True),
    Case("nginx", NGINX_STREAM, True),
    Case("nginx", "location / { proxy_pass http://{upstream}; gzip on; gzip_types text/event-stream; gzip_min_length 0; }",
         False, "nginx", "gzip", "LD302"),
    Case("apache", "", True),
    Case("apache", "ProxyPass / http://127.0.0.1:{upstream}/ flushpackets=on", True),
    Case("lighttpd", "server.stream-response-body = 2", True),
    Case("lighttpd", "", False, UNIDENTIFIED, "response buffering", "LD301", mentions="server.stream-response-body = 2"),
    Case("lighttpd", "", False, "lighttpd", "server.stream-response-body", "LD301", gateway_kind="lighttpd"),
    Case("haproxy", "option http-no-delay", True),
    Case("haproxy", "", False, UNIDENTIFIED, "response buffering", "LD301", mentions="option http-no-delay"),
    Case("haproxy", "", False, "HAProxy", "option http-no-delay", "LD301", gateway_kind="haproxy"),
    Case("caddy", "", True),
    Case("caddy", "flush_interval -1", True),
    Case("caddy", "site:encode gzip", True),
    Case("caddy", "buffer_responses", False, "Caddy", "buffer_responses", "LD301"),
    Case("varnish", "", True),
    Case("varnish", "sub vcl_backend_response { set beresp.do_stream = false; }", False, "Varnish", "beresp.do_stream", "LD301"),
    Case("varnish", "sub vcl_backend_response { set beresp.do_gzip = true; }", False, "Varnish", "beresp.do_gzip", "LD302"),
]
#: The family each gateway's own headers name (None: it adds none, so only --gateway-kind names it).
NAMED_BY_HEADERS = {"nginx": "nginx", "apache": "apache", "lighttpd": None, "haproxy": None, "caddy": "caddy",
                    "varnish": "varnish"}
#: Apache httpd compresses per event with mod_deflate: a risk (LD302 warning) naming its own module, no felt latency.
APACHE_DEFLATE = "AddOutputFilterByType DEFLATE text/event-stream"


#: Slow as a whole: each case starts a real gateway and diagnoses a stream through it (~2 s, ~55 s the file).
pytestmark = [pytest.mark.gateways, pytest.mark.slow]


def case_id(case: Case) -> str:
    what = "streams" if case.streams else "holds"
    conf = case.conf.replace("{upstream}", "").replace("http://", "")[:40] or "default"
    return f"{case.kind}-{what}-{case.gateway_kind or ''}-{conf}"


@pytest.fixture(scope="module")
def server() -> Iterator[SseServer]:
    with SseServer() as srv:
        yield srv


@contextlib.contextmanager
def gateway(kind: str, conf: str, upstream: int) -> Iterator[str]:
    if kind == "nginx":
        with run_nginx(conf, upstream) as url:
            yield url
    else:
        with run_gateway(kind, conf.replace("{upstream}", str(upstream)), upstream) as url:
            yield url


def diagnose(engine: str, gateway_url: str, out: Path, *extra: str) -> tuple[int, dict, str]:
    """``llm-doctor diagnose`` with a few requests per path; the exit code, the JSON report and the terminal's text."""
    result = CliRunner().invoke(app, ["diagnose", "--engine", engine, "--gateway", gateway_url, "--route", "chat",
                                      "--requests", "4", "--warmup", "1", "--no-metrics", "--no-gpu", "--no-host",
                                      "--json", str(out), *extra], env={"COLUMNS": "100"})
    assert "Traceback" not in result.output, result.output
    return result.exit_code, json.loads(out.read_text()), " ".join(result.output.split())


def needs(kind: str) -> list[pytest.MarkDecorator]:
    """The marks of a case on ``kind``: skipped without its program locally, an error in CI."""
    return [pytest.mark.nginx, NEEDS_NGINX] if kind == "nginx" else [gateways_real.needs(kind)]


@pytest.mark.parametrize("case", [pytest.param(c, marks=needs(c.kind), id=case_id(c)) for c in CASES])
def test_a_real_gateway_is_healthy_when_it_streams_and_named_with_its_setting_when_it_holds(server, tmp_path, case):
    engine = server.base(**SCHEDULE)
    extra = ["--gateway-kind", case.gateway_kind] if case.gateway_kind else []
    with gateway(case.kind, case.conf, server.port) as url:
        code, report, terminal = diagnose(engine, url + engine[len(server.url):], tmp_path / "report.json", *extra)
    assert_named_by_its_own_headers(report, case.kind, case.gateway_kind)
    verdict = report["verdict"]
    findings = {f["code"]: f for f in report["findings"]}
    if case.streams:
        felt = {c: f["severity"] for c, f in findings.items() if f["severity"] != "info"}
        assert verdict["symptom"] == "healthy", (verdict["summary"], felt)
        assert code == 0, (verdict["summary"], felt)
        return
    assert verdict["symptom"] == "proxy-only", verdict["summary"]
    assert code == 1
    finding = findings[case.code]
    rem = finding["remediation"]
    assert verdict["primary_remediation"]["setting"] == rem["setting"] == case.setting
    assert rem["where"].startswith(case.named), rem["where"]
    identified = next(e for e in finding["evidence"] if e["name"] == "gateway identified")
    assert identified["value"].startswith(case.named)
    if case.mentions:
        assert case.mentions in rem["suggested"] and case.mentions in terminal, terminal
        assert "--gateway-kind" in terminal, terminal


def assert_named_by_its_own_headers(report: dict, kind: str, gateway_kind: str | None) -> None:
    """The gateway view names what only the gateway path shows: vLLM's ``server: uvicorn``, passed on by
    all but nginx (Caddy appends it), is the engine's and never a hop."""
    gw = report["views"]["gateway"]
    assert (gw["primary"] or {}).get("family") == (gateway_kind or NAMED_BY_HEADERS[kind]), gw["hops"]
    assert all(hop["family"] != "uvicorn" for hop in gw["hops"]), gw["hops"]
    assert ("server: uvicorn" in gw["engine"]) == (kind != "nginx"), gw["engine"]


@gateways_real.needs("apache")
def test_apache_mod_deflate_is_a_risk_named_in_its_own_module(server, tmp_path):
    """mod_deflate flushes per event behind mod_proxy: tokens arrive as direct, the compression is a risk."""
    engine = server.base(**SCHEDULE)
    with gateway("apache", APACHE_DEFLATE, server.port) as url:
        code, report, _ = diagnose(engine, url + engine[len(server.url):], tmp_path / "report.json")
    assert_named_by_its_own_headers(report, "apache", None)
    finding = next(f for f in report["findings"] if f["code"] == "LD302")
    assert finding["severity"] == "warning"
    assert finding["remediation"]["setting"] == "mod_deflate"
    assert finding["remediation"]["where"].startswith("Apache httpd")
    assert "LD301" not in {f["code"] for f in report["findings"]}
    # a risk makes no unhealthy headline and no exit 1 (issue 20, item 1)
    assert report["verdict"]["symptom"] == "healthy", report["verdict"]["summary"]
    assert code == 0


@gateways_real.needs("varnish")
def test_a_varnish_between_bytes_timeout_is_named_in_varnish_terms(server, tmp_path):
    """The engine pauses 1.5 s before token 5; Varnish's backend gives up after 0.5 s without a byte."""
    engine = server.base(**SCHEDULE, stall="5:1.5")
    vcl = "sub vcl_backend_fetch { set bereq.between_bytes_timeout = 0.5s; }"
    with gateway("varnish", vcl, server.port) as url:
        _, report, _ = diagnose(engine, url + engine[len(server.url):], tmp_path / "report.json",
                             "--set", "LD305.min_idle_s=0.2")
    finding = next(f for f in report["findings"] if f["code"] == "LD305")
    assert finding["remediation"]["setting"] == "between_bytes_timeout"
    assert finding["remediation"]["where"].startswith("Varnish")
