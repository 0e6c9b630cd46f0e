"""The parsers of logs and /metrics (``doctor.logscan``, ``doctor.engine_metrics``, ``doctor.engine_readers``) and each engine's records."""
