"""llm-d's endpoint picker (EPP) behind the Kubernetes Gateway API Inference Extension.

An Envoy ``ext_proc`` service: the gateway asks it which pod serves each request. Metric names
from the extension's metrics guide (``site-src/guides/metrics.md``: ``inference_pool_*``) and its
flow control (``inference_extension_flow_control_*``, renamed ``llm_d_epp_flow_control_*`` in the
llm-d router); the staleness incident (direct 40 ms, 9.7 s through the picker, pool saturation
1.0 with idle replicas) is llm-d-router#2408. Held by recorded evidence only: it needs Kubernetes
and Envoy (``fixtures/routers/llm-d-epp/PROVENANCE.md``). Its settings live in its
``EndpointPickerConfig`` and the ``InferencePool``, not in flags.
"""

from __future__ import annotations

from doctor.routers.record import RouterRecord, RouterSetting

RECORD = RouterRecord(
    id="llm-d-epp",
    display="llm-d endpoint picker (Inference Gateway)",
    prefixes=("inference_pool_", "inference_extension_", "llm_d_epp_"),
    metrics={
        "requests": "inference_extension_scheduler_attempts_total",
        "queue": "inference_extension_flow_control_queue_size",
        "health": "inference_pool_ready_pods",
        "saturation": "inference_extension_flow_control_pool_saturation",
        "in_flight": "inference_pool_per_pod_queue_size",
    },
    lacks={
        "retries": "the picker does not retry: Envoy's retry policy does",
        "ejections": "no ejection counter: a pod leaves the pool when its readiness fails",
    },
    replica_label="model_server_pod",
    settings={
        "policy": RouterSetting("EndpointPickerConfig schedulingProfiles (scorer weights: prefix, queue, kv-cache)"),
        "queue_size": RouterSetting("EndpointPickerConfig flowControl maxBytes / per-band capacity"),
        "queue_timeout": RouterSetting("EndpointPickerConfig flowControl defaultRequestTTL"),
        "health_interval": RouterSetting("--refresh-metrics-interval (metrics staleness threshold: stalenessPolicy)", "50ms"),
        "health_endpoint": RouterSetting("InferencePool failureMode (FailClose / FailOpen)", "FailClose"),
        "balance_abs": RouterSetting("EndpointPickerConfig queue-scorer weight"),
        "cache_threshold": RouterSetting("EndpointPickerConfig prefix-cache-scorer weight"),
    },
    no_settings={
        "max_concurrent": "admission is flow control's capacity (queue_size)",
        "rate_limit": "no rate limit of its own",
        "retries": "Envoy's retry policy, not the picker's",
        "health_timeout": "the metrics fetch, not a health check",
        "health_failures": "pods leave the pool by Kubernetes readiness",
        "balance_rel": "one weight per scorer, no ratio",
        "circuit_breaker": "Envoy's outlier detection, not the picker's",
    },
    worker_list=None,
    metrics_port="its metrics port (9090), apart from the ext_proc port (9002)",
    docs="https://gateway-api-inference-extension.sigs.k8s.io/guides/metrics/; https://llm-d.ai/docs/dev/operations/observability/router-metrics",
)
