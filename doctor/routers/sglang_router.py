"""SGLang's router (``sglang-router`` on PyPI, the "SGLang Model Gateway"), 0.3.2.

The same Rust lineage as vllm-router, renamed: its families are ``smg_*`` since the gateway
rename (``sgl_router_*`` before: ``fixtures/routers/sglang-router/metrics.txt``, from its source).
Flags and defaults from its own ``sglang-router launch --help`` (``fixtures/router-cli/sglang-router.txt``);
metric names from its /metrics in front of two test servers (``fixtures/routers/sglang-router/*.prom``)
and its binary (``smg_worker_retries_total``, written at the first retry). It counts each
replica's requests as circuit-breaker outcomes (one per request, success or failure) and binds
0.0.0.0 unless ``--host`` says otherwise.
"""

from __future__ import annotations

from doctor.routers.record import RouterRecord, RouterSetting

RECORD = RouterRecord(
    id="sglang-router",
    display="SGLang router",
    prefixes=("smg_", "sgl_router_"),
    metrics={
        "requests": "smg_worker_cb_outcomes_total",
        "in_flight": "smg_worker_requests_active",
        "retries": "smg_worker_retries_total",
        "ejections": "smg_worker_cb_state",
        "health": "smg_worker_health",
    },
    lacks={
        "queue": "no gauge of the --max-concurrent-requests queue (smg_http_rate_limit_total counts its refusals)",
        "saturation": "no pool-saturation gauge",
    },
    replica_label="worker",
    settings={
        "policy": RouterSetting("--policy", "cache_aware", r"\| policy: (\w+)"),
        "max_concurrent": RouterSetting("--max-concurrent-requests", "-1", r"max_concurrent_requests = (-?\d+)"),
        "queue_size": RouterSetting("--queue-size", "100"),
        "queue_timeout": RouterSetting("--queue-timeout-secs", "60"),
        "rate_limit": RouterSetting("--rate-limit-tokens-per-second"),
        "retries": RouterSetting("--retry-max-retries", "5"),
        "health_interval": RouterSetting("--health-check-interval-secs", "60"),
        "health_endpoint": RouterSetting("--health-check-endpoint", "/health"),
        "health_timeout": RouterSetting("--health-check-timeout-secs"),
        "health_failures": RouterSetting("--health-failure-threshold", "3"),
        "balance_abs": RouterSetting("--balance-abs-threshold", "64", r"balance_abs_threshold: (\d+)"),
        "balance_rel": RouterSetting("--balance-rel-threshold", "1.5", r"balance_rel_threshold: ([\d.]+)"),
        "cache_threshold": RouterSetting("--cache-threshold", "0.3", r"cache_threshold: ([\d.]+)"),
        "circuit_breaker": RouterSetting("--cb-failure-threshold", "10"),
    },
    no_settings={},
    worker_list="/workers",
    metrics_port="--prometheus-port (default 29000)",
    evidence="run",
    docs="sglang-router launch --help (0.3.2); https://github.com/sgl-project/sglang (sgl-model-gateway)",
)
