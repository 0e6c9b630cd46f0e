"""The LiteLLM proxy: its ``x-litellm-*`` headers name it; it runs on uvicorn and passes that ``Server`` header on.
"""

from __future__ import annotations

from doctor.gateways.record import NOT_RECORDED, GatewayRecord, IdleTimeout, Phrasing, Suspect

RECORD = GatewayRecord(
    id="litellm",
    display="LiteLLM proxy",
    kind="litellm",
    tokens=("litellm",),
    tell_headers=("x-litellm-",),
    wraps="uvicorn",
    buffering=NOT_RECORDED,
    compression=NOT_RECORDED,
    response_start=NOT_RECORDED,
    idle_timeout=IdleTimeout("stream_timeout", "LiteLLM: the model's `litellm_params.stream_timeout: {s}` "
                             "(and `request_timeout` in `litellm_settings`)"),
    connection_cap=Phrasing(
        "max_parallel_requests", "at least {c}, or unset for the deployment",
        where="{name}: the model's `litellm_params.max_parallel_requests` (and the key's or team's "
              "`max_parallel_requests`)",
        why="{name} answers 429 once a deployment, key or team has `max_parallel_requests` in flight; a "
            "stream counts for its whole answer. Raise it to what the engine batches.",
        suspect=Suspect(4, "LiteLLM `max_parallel_requests`")),
    retries=Phrasing(
        "num_retries", "0 for the streaming models (or a timeout above the longest answer)",
        where="{name}: `router_settings.num_retries` and the model's `litellm_params.num_retries`, with "
              "`timeout` / `stream_timeout` above the longest answer",
        why="{name} sent the same request to the engine again (about {timeout} per try here): each retry "
            "prefills the prompt again while the engine still works on the abandoned try."),
    connect_timeout=NOT_RECORDED,
)
