"""Sizing: parameters, weight bytes and KV cache capacity from a model's config, as vLLM computes them.

Pure functions over a parsed ``config.json`` (no I/O but ``load_config_text``): ``architecture``
reads the config, ``params`` counts, ``weights`` prices the dtype or quantisation, ``kv`` holds
vLLM's KV cache arithmetic, ``budget`` turns a card or a byte count into one rank's budget,
``plan`` composes them, and ``against_log`` compares the result with what the engine logged.
"""
