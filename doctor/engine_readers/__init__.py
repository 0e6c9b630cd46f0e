"""Each engine's readers, as adapters onto the views the checks read.

The checks read one vocabulary: the ``MetricsWindow`` fields (``running``, ``waiting``,
``kv_usage``, ``preemptions``, the latency histograms) and the ``LogFacts`` keys vLLM's log
gives (``kv_cache_tokens``, ``max_num_seqs``, ``max_model_len``, ``max_num_batched_tokens``).
Each engine here maps its own evidence into that vocabulary, so no check is written twice:

- ``vllm``: vLLM's startup and stats lines, tuned to every release from 0.1.7 (with
  ``vllm_patterns``, what vLLM printed, release by release; ``vllm_startup``, the startup being
  read; ``vllm_config``, its arguments and config); ``vllm_lora``: its LoRA slots in /metrics;
- ``sglang``, ``llamacpp``, ``tgi``, ``trtllm``: each engine's startup and stats lines, parsed
  into ``LogFacts`` under the keys the checks read (over ``logbook``, the rules they share),
  each under its engine's record id in ``logs.PARSERS``;
- ``capacity``: the settings an engine states in its /metrics (KV pool size, limits);
- ``logs``: which parser a log gets; ``normal``: the engine-neutral fact names that
  ``llm-doctor log --json`` and ``llm-doctor metrics --json`` print for every engine.

What each engine is (its names, markers, metric names, flags) is its record in
``doctor.engines``, below this package and below ``doctor.logscan`` and ``doctor.engine_metrics``,
which this package reads.
"""
