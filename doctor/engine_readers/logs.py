"""Which parser reads a log, and whose log it is: "unknown" over a guess.

The scanner keeps every engine's lines (``doctor.engines.openings``); ``names.identify_log``
scores each engine by the kept lines carrying its markers. Another engine's log goes to the
parser its record names; a log vLLM's markers claim, or that no marker claims, goes to vLLM's parser (it knows
releases whose lines no marker list covers), and when that finds nothing either the log is an
unidentified engine's (``UNKNOWN``): its facts and remediations then speak of limits, not of
vLLM's flags. A wrong engine is worse than none.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Sequence
from functools import cache

from doctor.engine_readers.vllm import parse_lines
from doctor.engines import BY_ID
from doctor.engines.names import UNKNOWN, VLLM, identify_log
from doctor.evidence.log import LogLine
from doctor.logscan.parsed import LogFacts

LogParser = Callable[[Iterable[LogLine], str], LogFacts]


@cache
def parser_of(engine: str) -> LogParser:
    """The log parser ``engine``'s record names (``EngineRecord.log_parser``, ``module:function``):
    named, not imported, by the record, which sits below the parsers it names."""
    module, _, function = BY_ID[engine].log_parser.partition(":")
    parser: LogParser = getattr(importlib.import_module(module), function)
    return parser


def parse_engine_log(lines: Sequence[LogLine], source: str = "") -> LogFacts:
    """The facts of the log's last startup, read by its engine's parser, with whose log it is."""
    identity = identify_log(line.text for line in lines)
    if identity.engine is not None and identity.engine != VLLM:
        facts = parser_of(identity.engine)(lines, source)
    else:
        facts = parse_lines(lines, source)
        if identity.engine != VLLM and facts.empty:
            facts.engine = UNKNOWN
    facts.identified_by = identity.why
    return facts
