"""A real nginx in front of the lab engine behaves as it did in front of a real vLLM 0.32.

fixtures/real-vllm/nginx: with nginx's defaults (``proxy_buffering on``, ``proxy_http_version
1.0``) vLLM's chunked stream still passed token by token; only a close-delimited upstream body
got buffered into 4 KiB bursts. The lab engine must answer nginx's HTTP/1.0 request chunked, as
uvicorn does, or the lab would show buffering where production shows none.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from doctor.lab.engine import LabEngine
from doctor.lab.scheduler import EngineConfig
from tests.support.lab_client import chat_body, run_streams
from tests.support.nginx import NEEDS_NGINX, run_nginx

pytestmark = [pytest.mark.nginx, NEEDS_NGINX]

DEFAULTS = "location / { proxy_pass http://{upstream}; }"
HTTP11 = 'location / { proxy_pass http://{upstream}; proxy_http_version 1.1; proxy_set_header Connection ""; }'


@pytest.fixture(scope="module")
def engine() -> Iterator[LabEngine]:
    lab = LabEngine(EngineConfig(step_base_s=0.005))
    lab.start()
    yield lab
    lab.stop()


@pytest.mark.parametrize("conf", [DEFAULTS, HTTP11], ids=["defaults", "http11-upstream"])
def test_nginx_passes_the_lab_stream_token_by_token(engine: LabEngine, conf: str):
    with run_nginx(conf, engine.port) as base:
        relayed = run_streams(base, [chat_body(max_tokens=60)], concurrency=1)[0]
    direct = run_streams(engine.url, [chat_body(max_tokens=60)], concurrency=1)[0]
    assert len(relayed.tokens) == 60
    assert relayed.headers["server"].startswith("nginx")
    assert relayed.events_per_read < 1.5 and direct.events_per_read < 1.5
