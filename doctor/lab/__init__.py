"""The lab: an embedded vLLM-compatible engine and a streaming gateway, for ``llm-doctor demo``
and for testing the diagnosis against engines that behave like the real thing.

- ``doctor.lab.scheduler``: the engine model (slots, KV blocks, chunked prefill, preemption,
  prefix caching); ``doctor.lab.engine``: vLLM's OpenAI-compatible HTTP API in front of it,
  with ``/metrics`` (``doctor.lab.metrics``) and a vLLM-format log (``doctor.lab.startup_log``);
- ``doctor.lab.gateway``: a relay that passes, buffers, compresses or serialises streams;
- ``doctor.lab.scenarios``: named set-ups with their expected verdicts, and ``start_lab``;
  ``doctor.lab.servers`` starts and stops the pair, and ``doctor.lab.serve`` is the child
  process ``start_lab`` runs them in.

Nothing is imported here, so that ``python -m doctor.lab.serve`` starts without importing
itself twice.
"""
