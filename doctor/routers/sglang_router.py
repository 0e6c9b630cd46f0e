"""SGLang's router (``sglang-router``; the same Rust lineage as vllm-router, prefix ``sgl_router_``).

Metric names from its source (``src/metrics.rs``: ``describe_gauge!("sgl_router_worker_health")``,
``counter!("sgl_router_processed_requests_total", "worker" => ...)``) and its docs' metrics table
(``fixtures/routers/sglang-router/PROVENANCE.md``); flags from its launcher, which shares
vllm-router's spellings. Held by recorded evidence: see docs/routers.md for whether its wheel ran here.
"""

from __future__ import annotations

from doctor.routers.record import RouterRecord, RouterSetting

RECORD = RouterRecord(
    id="sglang-router",
    display="SGLang router",
    prefixes=("sgl_router_",),
    metrics={
        "requests": "sgl_router_processed_requests_total",
        "in_flight": "sgl_router_running_requests",
        "retries": "sgl_router_retries_total",
        "ejections": "sgl_router_cb_state",
        "health": "sgl_router_worker_health",
    },
    lacks={
        "queue": "no gauge of the --max-concurrent-requests queue (sgl_router_job_queue_depth counts worker-management jobs)",
        "saturation": "no pool-saturation gauge",
    },
    replica_label="worker",
    settings={
        "policy": RouterSetting("--policy", "cache_aware"),
        "max_concurrent": RouterSetting("--max-concurrent-requests"),
        "queue_size": RouterSetting("--queue-size"),
        "queue_timeout": RouterSetting("--queue-timeout-secs"),
        "rate_limit": RouterSetting("--rate-limit-tokens-per-second"),
        "retries": RouterSetting("--retry-max-retries"),
        "health_interval": RouterSetting("--health-check-interval-secs"),
        "health_endpoint": RouterSetting("--health-check-endpoint", "/health"),
        "health_timeout": RouterSetting("--health-check-timeout-secs"),
        "health_failures": RouterSetting("--health-failure-threshold"),
        "balance_abs": RouterSetting("--balance-abs-threshold"),
        "balance_rel": RouterSetting("--balance-rel-threshold"),
        "cache_threshold": RouterSetting("--cache-threshold"),
        "circuit_breaker": RouterSetting("--cb-failure-threshold"),
    },
    no_settings={},
    worker_list="/workers",
    metrics_port="--prometheus-port (default 29000)",
    docs="https://github.com/sgl-project/sglang (sgl-router/src/metrics.rs, docs/router)",
)
