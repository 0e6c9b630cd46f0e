"""What would complete a verdict: the evidence to add, as the report's ``missing`` list words it.

Texts only, kept beside no logic: the decompositions (``doctor.verdict.split``) and the decision
(``doctor.verdict.decide``) name which one applies.
"""

from __future__ import annotations

#: What the split of TTFT into queue and prefill needs from the engine (vLLM V1 and SGLang export both;
#: TGI's TTFT is derived from its queue and prefill histograms; llama.cpp has neither).
NO_SERVER_SPLIT = "the engine's TTFT and queue-time histograms in /metrics"
DIRECT_PATH = "a direct path (--engine) to separate the gateway from the engine"
METRICS = "/metrics (--metrics-url) to split server queue and prefill time"
METRICS_OFF = "/metrics, left out by --no-metrics, to split server queue and prefill time"
USAGE_TRAILERS = "usage trailers (completion tokens) to count tokens, not chunks"

LONGER_DURATION = "a longer --duration, so that the probe can show the p90 within budget"
GATEWAY_OR_ENGINE = "a direct path (--engine) or /metrics (--metrics-url) to tell the gateway from the engine"

NO_WITNESS = "a stream probe (--engine and/or --gateway), or /metrics or Prometheus history with requests in it"
INTERRUPTED = "a run left to finish (it was interrupted)"
LONGER_DEADLINE = "a --deadline longer than one answer"
ONE_SUCCESS = "one successful streamed request (see the error findings)"
