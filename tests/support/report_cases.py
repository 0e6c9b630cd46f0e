"""Reports to render in the renderer tests: real nginx traces, plus engine evidence around them.

The stream evidence is real (``fixtures/real-vllm/nginx``: vLLM 0.32 straight and behind an
nginx relay that buffers, see ``tests.support.nginx_traces``); the /metrics scrapes and log
lines around it are built with ``tests.support.bundles`` so every section of the report has
something to show. Reports are produced by the real ``doctor.checking.runner.analyze``.
"""

from __future__ import annotations

from doctor.checking.runner import analyze
from doctor.evidence import Bundle, Endpoint, EndpointsEvidence, HostEvidence, ModelInfo
from doctor.model import Report
from tests.support import bundles, nginx_traces

#: Startup-log lines as vLLM 0.32 prints them (from fixtures/real-vllm/logs).
LOG_LINES = [
    "INFO 11-29 09:12:01 [api_server.py:1812] vLLM API server version 0.32.0",
    ("INFO 11-29 09:12:01 [utils.py:326] non-default args: {'model': '/srv/models/tiny-llama', "
    "'max_model_len': 1024, 'max_num_seqs': 8}"),
    "INFO 11-29 09:12:09 [kv_cache_utils.py:1087] CPU KV cache size: 4,096 tokens",
    "INFO 11-29 09:12:09 [kv_cache_utils.py:1091] Maximum concurrency for 1,024 tokens per request: 4.00x",
]


def _scrapes(duration: float) -> object:
    """Scrapes every ~second over the probe: KV usage rises and falls, nothing waits."""
    points = []
    steps = max(int(duration), 4)
    for i in range(steps + 1):
        t = duration * i / steps
        phase = "before" if i == 0 else "after" if i == steps else "during"
        busy = 0 < i < steps
        points.append((phase, t - (0.1 if i == 0 else 0.0), {
            "vllm:kv_cache_usage_perc": round(0.05 + 0.25 * busy * (1 - abs(2 * i / steps - 1)), 3),
            "vllm:num_requests_running": 1 if busy else 0,
            "vllm:num_requests_waiting": 0,
            "vllm:num_preemptions_total": 0,
            "vllm:prompt_tokens_total": 78 * i,
            "vllm:generation_tokens_total": 200 * i,
            "vllm:time_to_first_token_seconds": {"sum": 0.05 * i, "count": i},
            "vllm:request_queue_time_seconds": {"sum": 0.001 * i, "count": i},
        }))
    return bundles.metrics(*points)


def real_buffering_bundle(case: str = "relay-default", keep_tokens: int = 200) -> Bundle:
    """vLLM direct vs an nginx relay that buffers (or ``case``), with scrapes, log and endpoints."""
    stream = nginx_traces.direct_vs(case, keep_tokens=keep_tokens)
    stream.shape.model = "tiny-llama"
    b = bundles.bundle(
        stream=stream,
        metrics=_scrapes(stream.duration_s),
        log=bundles.log(LOG_LINES),
        endpoints=EndpointsEvidence(endpoints=[
            Endpoint(role="engine", url="http://127.0.0.1:8000", version="0.32.0",
                     models=[ModelInfo(id="tiny-llama", max_model_len=1024)], health_status=200,
                     headers={"server": "uvicorn", "content-type": "text/event-stream; charset=utf-8"}),
            Endpoint(role="gateway", url="http://127.0.0.1:8080", health_status=200,
                     headers={"server": "nginx/1.22.1", "content-type": "text/event-stream; charset=utf-8",
                              "transfer-encoding": "chunked"}),
        ]),
        host=HostEvidence(hostname="lab", os="Linux 6.1", python="3.11.2", cpu_model="x86-64",
                          cpu_count_logical=2, cpu_count_physical=2, memory_total_bytes=8 << 30,
                          memory_available_bytes=5 << 30),
    )
    b.run.command = "diagnose"
    b.run.model = b.run.served_model_name = "tiny-llama"
    b.run.vllm_version = "0.32.0"
    b.run.engine_url, b.run.gateway_url = "http://127.0.0.1:8000", "http://127.0.0.1:8080"
    b.run.route, b.run.concurrency, b.run.max_tokens = "chat", 1, 200
    b.run.engine_config = {"max_model_len": 1024, "max_num_seqs": 8}
    return b


def real_buffering_report(case: str = "relay-default") -> Report:
    return analyze(real_buffering_bundle(case))
