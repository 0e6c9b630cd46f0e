"""The proxy-only checks on bundles measured through a REAL nginx (the Debian package's binary).

The upstream is ``SseServer`` on a known schedule; the stream probe measures the direct and the
gateway path in one run and the checks read the resulting bundle exactly as ``diagnose`` would.
Assertions are classifications and settings, never times. The configurations are those of the
recorded trial in ``fixtures/real-vllm/nginx`` (nginx.conf there), so these tests and the
fixtures made from that trial must agree.
"""

from __future__ import annotations

import pytest

from doctor.checking.registry import load_registry
from doctor.checking.runner import run_check
from doctor.collection.collector import CollectConfig
from doctor.derive import Evidence
from doctor.foundation.clock import Clock
from doctor.model import Outcome
from doctor.probes.stream import run_stream_probe
from tests.support.bundles import bundle
from tests.support.nginx import NEEDS_NGINX, run_nginx
from tests.support.sse_server import SseServer

pytestmark = [pytest.mark.nginx, NEEDS_NGINX]

PROXY = "location / { proxy_pass http://{upstream}; %s }"
SCHEDULE = {"ttft": 0.05, "itl": 0.003, "n": 80}
REGISTRY = load_registry(plugins=False)


@pytest.fixture(scope="module")
def server():
    with SseServer() as srv:
        yield srv


def probe_through(server: SseServer, conf: str, opts: dict[str, object], **config: object) -> Evidence:
    """One request per path (unless ``config`` says otherwise) through nginx configured with ``conf``."""
    with run_nginx(conf, server.port) as gateway:
        cfg = CollectConfig(
            engine=server.base(**SCHEDULE),
            gateway=gateway + server.base(**SCHEDULE, **opts)[len(server.url) :],
            route="chat",
            **{"requests": 1, "warmup": 0, **config},
        )
        stream, errors = run_stream_probe(cfg, Clock(), lambda _msg: None)
    assert stream is not None, errors
    return Evidence(bundle(stream=stream))


def check(code: str, evidence: Evidence, settings: dict | None = None):
    return run_check(REGISTRY.find(code), evidence, settings or {})


@pytest.mark.parametrize(
    ("conf", "opts"),
    [
        pytest.param(PROXY % "", {"framing": "close"}, marks=pytest.mark.slow),
        pytest.param(
            PROXY % "proxy_buffer_size 16k; proxy_buffers 8 16k; proxy_busy_buffers_size 32k;",
            {"framing": "close"}, marks=pytest.mark.slow,
        ),
        (PROXY % "proxy_ignore_headers X-Accel-Buffering;", {"framing": "close", "xaccel": "no"}),
    ],
    ids=["relay-4k", "relay-16k", "x-accel-ignored"],
)
def test_buffering_configurations_fire_with_the_nginx_directive(server, conf, opts):
    result = check("LD301", probe_through(server, conf, opts))
    assert result.outcome is Outcome.FINDING, result.message
    rem = result.finding.remediation
    assert (rem.setting, rem.suggested) == ("proxy_buffering", "off")
    assert "nginx" in (rem.where or "")


@pytest.mark.parametrize(
    ("conf", "opts"),
    [
        (PROXY % "", {}),
        pytest.param(PROXY % "proxy_buffering off;", {"framing": "close"}, marks=pytest.mark.slow),
        pytest.param(PROXY % "", {"framing": "close", "xaccel": "no"}, marks=pytest.mark.slow),
    ],
    ids=["pass-through", "buffering-off", "x-accel-no"],
)
def test_streaming_configurations_pass(server, conf, opts):
    evidence = probe_through(server, conf, opts)
    for code in ("LD301", "LD302"):
        result = check(code, evidence)
        assert result.outcome is Outcome.PASS, (code, result.message)


@pytest.mark.slow
def test_gzip_fires_both_buffering_and_compression(server):
    evidence = probe_through(
        server, "gzip on; gzip_types text/event-stream; gzip_min_length 1; " + PROXY % "", {}
    )
    compression = check("LD302", evidence)
    assert compression.outcome is Outcome.FINDING
    assert (compression.finding.remediation.setting, compression.finding.severity.value) == (
        "gzip",
        "critical",
    )
    assert check("LD301", evidence).outcome is Outcome.FINDING


def test_a_short_proxy_read_timeout_cuts_stalled_streams(server):
    # The upstream pauses 4 s before token 5; nginx gives up after 2 s without upstream data. (With
    # 0.5 s, a loaded machine read the last token up to 190 ms late: the cuts looked 312-448 ms idle,
    # not one timeout; 2 s keeps that lag well inside the check's 20 % tolerance.)
    evidence = probe_through(
        server,
        PROXY % "proxy_read_timeout 2s; proxy_buffering off;",
        {"stall": "5:4"},
        stall_timeout_s=10.0,
        requests=2,  # two cuts after the same idle time make a fixed timeout
    )
    gateway = [r for r in evidence.bundle.stream.requests if r.path == "gateway"]
    assert all(not r.ok for r in gateway), [r.outcome for r in gateway]
    result = check("LD305", evidence, {"LD305": {"min_idle_s": "0.2"}})
    assert result.outcome is Outcome.FINDING, result.message
    assert result.finding.remediation.setting == "proxy_read_timeout"
    assert check("LD305", evidence).outcome is Outcome.PASS  # 2 s is below the default floor of 5 s
