"""Facts read from an engine's startup log: configuration, KV capacity, errors, stats over time.

The view re-parses the lines the log probe kept (``bundle.log.matched``) with the current reader
of the engine that wrote them (``doctor.engine_readers.logs``), so an old bundle gains what a
newer parser understands. The types are defined in ``doctor.logscan.parsed`` and re-exported
here, where checks import them from.
"""

from __future__ import annotations

from doctor.derive.missing import Missing
from doctor.engine_readers.logs import parse_engine_log
from doctor.engines.names import ENGINE_NOR_LIST
from doctor.evidence import Bundle
from doctor.logscan.parsed import Fact, LogFacts, Startup, StartupError, StatsPoint

__all__ = ["Fact", "LogFacts", "Startup", "StartupError", "StatsPoint", "derive_log_facts"]


def derive_log_facts(bundle: Bundle) -> LogFacts:
    """The ``log_facts`` view, re-parsed from the matched lines the bundle kept."""
    if bundle.log is None:
        raise Missing("no startup log (pass --log PATH)")
    facts = parse_engine_log(bundle.log.matched, source=bundle.log.source)
    if facts.empty:
        raise Missing(f"no {ENGINE_NOR_LIST} startup, stats or error line in the log {bundle.log.source}")
    return facts
