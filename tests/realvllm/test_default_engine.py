"""One vLLM server with default scheduling: a healthy run, the same engine behind nginx, and an
application's JSON-schema request whose grammar compiles on its first request.

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

HEALTHY, BUFFERING, STRUCTURED = SCENARIOS["healthy"], SCENARIOS["proxy-buffering"], SCENARIOS["structured-output"]
assert HEALTHY.engine_args == BUFFERING.engine_args == STRUCTURED.engine_args  # they share one server

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
