"""Reading vLLM's own logs: startup facts, startup errors and the periodic stats lines.

``prefixes`` turns physical lines into records (wrappers, process prefixes, colours, glued and
wrapped lines); ``patterns`` holds what vLLM printed, release by release, and the scanner's
gate; ``scanner`` keeps the lines that matter from a stream in bounded memory; ``parser`` turns
kept lines into ``model.LogFacts`` (with ``startup_state``, ``engine_config`` and
``printed_values`` for the startup being read, the engine's arguments and config, and how a
printed value reads); ``command`` is ``llm-doctor log``. The file handling (stdin, ``.gz``, bad input) is the probe's: ``doctor.probes.logfile.read_log``.
"""
