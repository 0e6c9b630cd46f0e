"""One vLLM server with default scheduling: a healthy run, the same engine behind nginx, an
application's JSON-schema request whose grammar compiles on its first request, then the same
engine wedged (its engine-core process stopped, last, since it stops the engine).

The gateway reproduces what buffered tokens on a real deployment in the lab trial: nginx with
every default (``proxy_buffering on``, ``proxy_http_version 1.0``) in front of an upstream hop
whose body is close-delimited rather than chunked. Here that hop is a second nginx server,
unbuffered and HTTP/1.1 towards vLLM, answering the outer nginx's HTTP/1.0 request without
chunked encoding; the outer nginx then passes the stream on in 4 KiB bursts.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.realvllm.diagnose import explain, run_diagnose, verdict_mismatches
from tests.realvllm.scenarios import SCENARIOS
from tests.realvllm.server import VllmServer, serve_vllm
from tests.support import system
from tests.support.nginx import SKIP_REASON, free_port, nginx_binary, run_nginx

pytestmark = pytest.mark.realvllm

HEALTHY, BUFFERING = SCENARIOS["healthy"], SCENARIOS["proxy-buffering"]
STRUCTURED, WEDGED = SCENARIOS["structured-output"], SCENARIOS["engine-wedged"]
assert HEALTHY.engine_args == BUFFERING.engine_args == STRUCTURED.engine_args == WEDGED.engine_args  # they share one server

#: Outer server: nothing but proxy_pass (every nginx default). Inner: the usual SSE recipe,
#: which still answers an HTTP/1.0 request close-delimited.
RELAY = """
server { listen 127.0.0.1:{port}; location / { proxy_pass http://127.0.0.1:INNER; } }
server { listen 127.0.0.1:INNER; location / {
    proxy_pass http://{upstream}; proxy_http_version 1.1; proxy_set_header Connection "";
    proxy_buffering off; } }
"""


@pytest.fixture(scope="module")
def engine(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    log = tmp_path_factory.mktemp("vllm-default") / "vllm.log"
    with serve_vllm(tiny_model, log, HEALTHY.engine_args) as server:
        yield server


def test_healthy_engine_yields_healthy_with_no_warning(engine: VllmServer, tmp_path: Path) -> None:
    report = run_diagnose(HEALTHY, tmp_path, engine=engine.url, log=engine.log)
    assert not verdict_mismatches(report, HEALTHY), explain(report)


def test_default_nginx_buffering_a_close_delimited_hop_is_proxy_only(engine: VllmServer, tmp_path: Path) -> None:
    if nginx_binary() is None:
        system.missing(SKIP_REASON)
    port = engine.url.rsplit(":", 1)[1]
    with run_nginx(RELAY.replace("INNER", str(free_port())), int(port)) as gateway:
        report = run_diagnose(BUFFERING, tmp_path, engine=engine.url, gateway=gateway, log=engine.log)
    assert not verdict_mismatches(report, BUFFERING), explain(report)


def test_structured_output_first_request_compiles_its_schema(engine: VllmServer, tmp_path: Path) -> None:
    """The probe sends the payload's unconstrained twins first, then the constrained requests: the
    first of those waits for xgrammar to compile the schema, the repeats hit its cache."""
    report = run_diagnose(STRUCTURED, tmp_path, engine=engine.url, log=engine.log)
    assert not verdict_mismatches(report, STRUCTURED), explain(report)
    stream = report["bundle"]["stream"]
    assert stream["shape"]["constraints"] == ["response_format:json_schema"]
    assert len(stream["controls"]) == 2 and all(c["outcome"] == "ok" for c in stream["controls"])
    decoding = next(r for r in report["results"] if r["code"] == "LD212")
    assert decoding["outcome"] in ("pass", "not-applicable"), explain(report)  # the compile, not steady decoding


def engine_core(api_server: int) -> psutil.Process:
    """vLLM v1's engine-core process: a child of the API server, titled ``EngineCore`` (``VLLM::EngineCore_DP0``)."""
    for child in psutil.Process(api_server).children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if "EngineCore" in child.name() or "EngineCore" in " ".join(child.cmdline()):
                return child
    raise AssertionError(f"no EngineCore process under the API server (pid {api_server})")


def test_stopped_engine_core_behind_green_health_is_wedged(engine: VllmServer, tmp_path: Path) -> None:
    """SIGSTOP the engine core, diagnose with the default probe, SIGCONT: the wedge, said within 30 s."""
    core = engine_core(engine.pid)
    core.suspend()
    try:
        report = run_diagnose(WEDGED, tmp_path, engine=engine.url, log=engine.log)
    finally:
        core.resume()
    assert not verdict_mismatches(report, WEDGED), explain(report)
    health = [e["health_status"] for e in report["bundle"]["endpoints"]["endpoints"] if e["role"] == "engine"]
    assert health == [200]  # the green light that misleads a load balancer
    stop = report["bundle"]["stream"]["wedge"]
    assert stop is not None, explain(report)
    assert stop["t_detected"] - stop["t_first_waiting"] < 30.0  # the probe's own clock
