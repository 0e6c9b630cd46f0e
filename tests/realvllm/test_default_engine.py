"""One vLLM server with default scheduling: a healthy run, then the same engine behind nginx.

The gateway reproduces what buffered tokens on a real deployment in the lab trial: nginx with
every default (``proxy_buffering on``, ``proxy_http_version 1.0``) in front of an upstream hop
whose body is close-delimited rather than chunked. Here that hop is a second nginx server,
unbuffered and HTTP/1.1 towards vLLM, answering the outer nginx's HTTP/1.0 request without
chunked encoding; the outer nginx then passes the stream on in 4 KiB bursts.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.realvllm.diagnose import explain, run_diagnose, verdict_mismatches
from tests.realvllm.scenarios import SCENARIOS
from tests.realvllm.server import VllmServer, serve_vllm
from tests.support import system
from tests.support.nginx import SKIP_REASON, free_port, nginx_binary, run_nginx

pytestmark = pytest.mark.realvllm

HEALTHY, BUFFERING = SCENARIOS["healthy"], SCENARIOS["proxy-buffering"]
assert HEALTHY.engine_args == BUFFERING.engine_args  # they share one server

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
