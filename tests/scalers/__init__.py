"""The autoscaler records, the manifest reader and ``llm-doctor scaling`` on real objects."""
