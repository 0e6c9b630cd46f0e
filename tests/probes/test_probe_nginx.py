"""The probe through a REAL nginx: configurations that hold the stream back and ones that do not.

The upstream is ``SseServer`` on a known schedule (first token 50 ms after the request, then
one every ``ITL``); the direct path to it runs paired with the gateway path in the same probe,
so every assertion compares the gateway with the direct path, or configurations with each
other, by order and ratio — never against an absolute time. The cases reproduce the trial of
nginx 1.22 in front of vLLM (../shared/fixtures/real-vllm/nginx/): a chunked upstream passes
token by token through nginx's defaults; a close-delimited one (a relay hop) comes out in
4 KiB bursts, 16 KiB with ``proxy_buffer_size 16k``; gzip holds the whole answer.
"""

from __future__ import annotations

import pytest

from doctor.collection.collector import CollectConfig
from doctor.derive.stream_stats import PathStats, path_stats
from doctor.foundation.clock import Clock
from doctor.probes.stream import run_stream_probe
from tests.support import system
from tests.support.nginx import NEEDS_NGINX, run_nginx
from tests.support.sse_server import SseServer

pytestmark = [pytest.mark.nginx, NEEDS_NGINX]

ITL = 0.003
N = 120  # tokens: several 4 KiB bursts of ~240-byte events
PROXY = "location / { proxy_pass http://{upstream}; %s }"
CASES = {
    "pass-through": (PROXY % "", {}),
    "http11-buffered": (PROXY % 'proxy_http_version 1.1; proxy_set_header Connection "";', {}),
    "relay-4k": (PROXY % "", {"framing": "close"}),
    "relay-16k": (PROXY % "proxy_buffer_size 16k; proxy_buffers 8 16k; proxy_busy_buffers_size 32k;", {"framing": "close"}),
    "gzip": ("gzip on; gzip_types text/event-stream; gzip_min_length 1; " + PROXY % "", {}),
    "buffering-off": (PROXY % "proxy_buffering off;", {"framing": "close"}),
    "x-accel-no": (PROXY % "", {"framing": "close", "xaccel": "no"}),
    "x-accel-ignored": (PROXY % "proxy_ignore_headers X-Accel-Buffering;", {"framing": "close", "xaccel": "no"}),
}


@pytest.fixture(scope="module")
def server():
    with SseServer() as srv:
        yield srv


@pytest.fixture(scope="module")
def measured(server):
    """Per case: (direct PathStats, gateway PathStats), each case probed once."""
    cache: dict[str, tuple[PathStats, PathStats]] = {}

    def get(case: str) -> tuple[PathStats, PathStats]:
        if case not in cache:
            conf, opts = CASES[case]
            schedule = {"ttft": 0.05, "itl": ITL, "n": N}
            with run_nginx(conf, server.port) as gateway:
                config = CollectConfig(engine=server.base(**schedule),
                                       gateway=gateway + server.base(**schedule, **opts)[len(server.url):],
                                       route="chat", requests=2, warmup=0)
                evidence, errors = run_stream_probe(config, Clock(), lambda _msg: None)
            assert errors == []
            stats = tuple(path_stats(p, None, [r for r in evidence.requests if r.path == p]) for p in ("direct", "gateway"))
            assert all(s.n_ok == 2 for s in stats)
            cache[case] = stats  # type: ignore[assignment]
        return cache[case]

    return get


@pytest.mark.parametrize("case", ["pass-through", "http11-buffered", "buffering-off", "x-accel-no"])
def test_configurations_that_pass_tokens_through_match_the_direct_path(measured, case):
    direct, gateway = measured(case)
    # Token by token, as direct. Events are 3 ms apart, so a client slowed by a busy machine may
    # find two in one read; a 4 KiB proxy buffer would hold ~17 (see the relay-4k case).
    assert direct.events_per_read.p50 <= 2 and gateway.events_per_read.p50 <= 2
    assert gateway.bytes_per_read.p50 < 1024
    # the stream is spread over the same span, and the first token is not held behind the headers
    assert 0.5 < gateway.first_to_last_token.p50 / direct.first_to_last_token.p50 < 2
    assert gateway.headers_to_first_token.p50 > 0.5 * direct.headers_to_first_token.p50


@pytest.mark.parametrize("case", ["relay-4k", "x-accel-ignored"])
@pytest.mark.slow
def test_default_buffering_of_a_close_delimited_upstream_shows_4k_bursts(measured, case):
    direct, gateway = measured(case)
    assert gateway.events_per_read.p50 >= 8 * direct.events_per_read.p50  # ~17 events of ~240 bytes
    assert gateway.bytes_per_read.p50 >= 10 * direct.bytes_per_read.p50
    # headers arrive with the first burst, and that burst waits for ~16 more tokens
    assert gateway.headers_to_first_token.p50 < 0.2 * direct.headers_to_first_token.p50
    assert gateway.ttft.p50 - direct.ttft.p50 > 8 * ITL


@pytest.mark.slow
def test_a_larger_proxy_buffer_makes_larger_later_bursts(measured):
    _, small = measured("relay-4k")
    _, large = measured("relay-16k")
    assert large.bytes_per_read.p50 > 2 * small.bytes_per_read.p50
    assert large.events_per_read.p50 > 2 * small.events_per_read.p50
    assert large.ttft.p50 > small.ttft.p50


def test_gzip_holds_the_whole_answer_to_the_end(measured):
    direct, gateway = measured("gzip")
    assert gateway.first_to_last_token.p50 < 0.1 * direct.first_to_last_token.p50
    assert gateway.events_per_read.max >= N / 2
    assert gateway.ttft.p50 > direct.ttft.p50 + (N / 2) * ITL
    assert gateway.headers.get("content-encoding") == "gzip"


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    """A self-signed certificate for 127.0.0.1 (openssl CLI)."""
    import shutil
    import subprocess

    if shutil.which("openssl") is None:
        system.missing("the openssl command is not installed (apt-get install openssl)")
    d = tmp_path_factory.mktemp("tls")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(d / "key.pem"), "-out", str(d / "cert.pem")],
                   check=True, capture_output=True)
    return d


@pytest.mark.parametrize("verify, outcome", [(False, "ok"), ("ca", "ok"), (True, "tls")])
def test_tls_gateway(server, certificate, verify, outcome):
    conf = (f"server {{ listen 127.0.0.1:{{port}} ssl; ssl_certificate {certificate}/cert.pem; "
            f"ssl_certificate_key {certificate}/key.pem; location / {{ proxy_pass http://{{upstream}}; }} }}")
    with run_nginx(conf, server.port) as base:
        gateway = base.replace("http://", "https://") + server.base(itl=0.002, n=5)[len(server.url):]
        config = CollectConfig(gateway=gateway, route="chat", requests=2, warmup=0)
        config.http.verify = str(certificate / "cert.pem") if verify == "ca" else verify
        evidence, _ = run_stream_probe(config, Clock(), lambda _msg: None)
    # a path whose TLS fails on its first request is not asked again (doctor/probes/sampling.py)
    assert [t.outcome for t in evidence.requests] == [outcome] * (2 if outcome == "ok" else 1)
    if outcome == "ok":
        first, second = sorted(evidence.requests, key=lambda t: t.t_sent)
        assert first.connection_reused is False and second.connection_reused is True  # TLS kept alive
        assert first.t_sent < first.t_connected <= first.t_headers <= first.t_first_token


def test_llm_doctor_probe_reports_the_burst_pattern_of_a_buffering_nginx(server):
    import json

    from typer.testing import CliRunner

    from doctor.cli import app

    conf, opts = CASES["relay-4k"]
    schedule = {"ttft": 0.05, "itl": ITL, "n": N}
    with run_nginx(conf, server.port) as gateway:
        result = CliRunner().invoke(app, ["probe", "--json", "--requests", "2", "--warmup", "0",
                                          "--engine", server.base(**schedule),
                                          "--gateway", gateway + server.base(**schedule, **opts)[len(server.url):]])
    assert result.exit_code == 0, result.output
    paths = json.loads(result.stdout[result.stdout.index("{"):])["paths"]
    direct, burst = paths["direct"], paths["gateway"]
    assert burst["events_per_read"]["p50"] >= 8 * direct["events_per_read"]["p50"]
    assert burst["headers_to_first_token"]["p50"] < 0.2 * direct["headers_to_first_token"]["p50"]
