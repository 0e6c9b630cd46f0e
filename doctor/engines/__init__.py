"""Engines other than vLLM, as adapters onto the views the checks already read.

The checks read one vocabulary: the ``MetricsWindow`` fields (``running``, ``waiting``,
``kv_usage``, ``preemptions``, the latency histograms) and the ``LogFacts`` keys vLLM's log
gives (``kv_cache_tokens``, ``max_num_seqs``, ``max_model_len``, ``max_num_batched_tokens``).
Each engine here maps its own evidence into that vocabulary, so no check is written twice:

- ``names``: which engines exist, how they are called in text, and how each is recognised
  (metric prefixes, startup-log markers, response headers);
- ``openings``: the phrases of their logs that the log scanner's gate must keep (pure bytes,
  imported by ``doctor.vllm_log.patterns``);
- ``sglang``, ``llamacpp``, ``tgi``, ``trtllm``: each engine's startup and stats lines, parsed
  into ``LogFacts`` under the keys the checks read (over ``logbook``, the rules they share);
- ``capacity``: the settings an engine states in its /metrics (KV pool size, limits);
- ``logs``: which parser a log gets; ``normal``: the engine-neutral fact names that
  ``llm-doctor log --json`` and ``llm-doctor metrics --json`` print for every engine.

Metric names live with vLLM's in ``doctor.vllm_metrics.names`` (one table of names per
quantity, every engine's beside vLLM's), so scrapes and Prometheus history read them alike.
"""
