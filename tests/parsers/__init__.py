"""The parsers of logs and /metrics (``doctor.vllm_log``, ``doctor.vllm_metrics``) and each engine's records."""
