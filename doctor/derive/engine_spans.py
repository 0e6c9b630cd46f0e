"""vLLM's span per request: its name, the attributes the join reads, and how to read them.

``OutputProcessor.do_tracing`` (``vllm/v1/engine/output_processor.py``) sets them, named in
``vllm/tracing/utils.py``; every latency counts from the request's arrival, where the span starts.
Both the per-request join (``request_hops``) and the stalls (``request_stalls``) read them.
"""

from __future__ import annotations

from typing import Any

from doctor.evidence import Span
from doctor.foundation import wire

ENGINE_SPAN = "llm_request"
QUEUE = "gen_ai.latency.time_in_queue"
TTFT = "gen_ai.latency.time_to_first_token"
PREFILL = "gen_ai.latency.time_in_model_prefill"
DECODE = "gen_ai.latency.time_in_model_decode"
E2E = "gen_ai.latency.e2e"
REQUEST_ID = "gen_ai.request.id"
PROMPT_TOKENS = "gen_ai.usage.prompt_tokens"
COMPLETION_TOKENS = "gen_ai.usage.completion_tokens"


def seconds(attributes: dict[str, Any], key: str) -> float | None:
    """A latency attribute in seconds; None when absent, not a number, or negative."""
    value = wire.number(attributes.get(key))
    return value if value is not None and value >= 0 else None


def count(attributes: dict[str, Any], key: str) -> int | None:
    """A token-count attribute; None when absent or not a number."""
    return wire.number(attributes.get(key), int)


def is_engine_span(span: Span) -> bool:
    """vLLM's per-request span: by its name, or by the latency attributes it carries."""
    return span.name == ENGINE_SPAN or TTFT in span.attributes
