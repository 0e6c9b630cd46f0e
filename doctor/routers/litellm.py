"""LiteLLM's router (its proxy's load balancing across the deployments of one model group).

Metric names from its Prometheus docs (``docs/proxy/prometheus.md``: ``litellm_deployment_state``
0 healthy / 1 partial / 2 outage, ``litellm_deployment_cooled_down``,
``litellm_deployment_total_requests``); settings from its router config (``router_settings``:
``routing_strategy``, ``num_retries``, ``allowed_fails``, ``cooldown_time``). Held by recorded
evidence (``fixtures/routers/litellm/PROVENANCE.md``); the LiteLLM proxy as a gateway is LD308's.
"""

from __future__ import annotations

from doctor.routers.record import RouterRecord, RouterSetting

RECORD = RouterRecord(
    id="litellm",
    display="LiteLLM router",
    prefixes=("litellm_deployment_",),
    metrics={
        "requests": "litellm_deployment_total_requests",
        "retries": "litellm_deployment_failure_responses",
        "ejections": "litellm_deployment_cooled_down",
        "health": "litellm_deployment_state",
    },
    lacks={
        "in_flight": "no per-deployment in-flight gauge",
        "queue": "no queue of its own (requests wait in the proxy's worker)",
        "saturation": "no pool-saturation gauge",
    },
    replica_label="api_base",
    settings={
        "policy": RouterSetting("router_settings.routing_strategy", "simple-shuffle"),
        "retries": RouterSetting("router_settings.num_retries"),
        "circuit_breaker": RouterSetting("router_settings.allowed_fails / cooldown_time"),
        "rate_limit": RouterSetting("model_list[].litellm_params.rpm / tpm"),
        "max_concurrent": RouterSetting("model_list[].litellm_params.max_parallel_requests"),
        "health_interval": RouterSetting("general_settings.health_check_interval", "300"),
    },
    no_settings={
        "queue_size": "no router queue",
        "queue_timeout": "no router queue",
        "health_endpoint": "health checks send a completion, not a route",
        "health_timeout": "no separate setting",
        "health_failures": "allowed_fails (circuit_breaker)",
        "balance_abs": "no balance threshold",
        "balance_rel": "no balance threshold",
        "cache_threshold": "no prefix-cache routing",
    },
    worker_list=None,
    docs="https://docs.litellm.ai/docs/proxy/prometheus; https://docs.litellm.ai/docs/routing",
)
