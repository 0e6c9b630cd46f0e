"""vLLM's router (``vllm-router`` on PyPI, a Rust binary with a Python launcher), 0.1.17.

Flags and defaults from its own ``--help`` (``fixtures/router-cli/vllm-router.txt``); metric names
from its /metrics in front of real replicas (``fixtures/routers/vllm-router/``) and the names its
binary holds. Its /metrics listens on ``--prometheus-port`` (29000), not on the serving port; its
replicas are listed at ``/workers``. It publishes no gauge of its own admission queue: a request
held by ``--max-concurrent-requests`` (a token bucket refilled at that many per second unless
``--rate-limit-tokens-per-second``) is seen only as time between the router and the replica. A
request gives its token back when the replica's answer starts (its headers): a stream holds it
for milliseconds, a whole (non-streamed) answer until it is complete, so the cap queues streams
behind whole answers (seen here in front of real vLLM replicas, tests/realvllm/test_router.py).
"""

from __future__ import annotations

from doctor.routers.record import RouterRecord, RouterSetting

RECORD = RouterRecord(
    id="vllm-router",
    display="vLLM router",
    prefixes=("vllm_router_",),
    metrics={
        "requests": "vllm_router_processed_requests_total",
        "in_flight": "vllm_router_running_requests",
        "retries": "vllm_router_retries_total",
        "ejections": "vllm_router_cb_state",
        "health": "vllm_router_worker_health",
    },
    lacks={
        "queue": "no gauge of the --max-concurrent-requests queue: its wait shows as time in the router",
        "saturation": "no pool-saturation gauge",
    },
    replica_label="worker",
    settings={
        "policy": RouterSetting("--policy", "cache_aware", r"\| policy: (\w+)"),
        "max_concurrent": RouterSetting("--max-concurrent-requests", "32768"),
        "queue_size": RouterSetting("--queue-size", "100", r"Started request queue with size: (\d+)"),
        "queue_timeout": RouterSetting("--queue-timeout-secs", "60", r"Started request queue with size: \d+, timeout: (\d+)s"),
        "rate_limit": RouterSetting("--rate-limit-tokens-per-second", None),
        "retries": RouterSetting("--retry-max-retries", "5"),
        "health_interval": RouterSetting("--health-check-interval-secs", "60", r"Started health checker for workers with (\d+)s interval"),
        "health_endpoint": RouterSetting("--health-check-endpoint", "/health"),
        "health_timeout": RouterSetting("--health-check-timeout-secs", "5"),
        "health_failures": RouterSetting("--health-failure-threshold", "3"),
        "balance_abs": RouterSetting("--balance-abs-threshold", "64"),
        "balance_rel": RouterSetting("--balance-rel-threshold", "1.5"),
        "cache_threshold": RouterSetting("--cache-threshold", "0.3"),
        "circuit_breaker": RouterSetting("--cb-failure-threshold", "10"),
    },
    no_settings={},
    worker_list="/workers",
    metrics_port="--prometheus-port (default 29000)",
    evidence="run",
    docs="vllm-router --help (0.1.17); https://github.com/vllm-project/router",
)
