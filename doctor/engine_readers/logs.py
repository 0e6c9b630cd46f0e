"""Which parser reads a log, and whose log it is: "unknown" over a guess.

The scanner keeps every engine's lines (``doctor.engines.openings``); ``names.identify_log``
scores each engine by the kept lines carrying its markers. Another engine's log goes to its
reader (``PARSERS``); a log vLLM's markers claim, or that no marker claims, goes to vLLM's (it knows
releases whose lines no marker list covers), and when that finds nothing either the log is an
unidentified engine's (``UNKNOWN``): its facts and remediations then speak of limits, not of
vLLM's flags. A wrong engine is worse than none.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from doctor.engine_readers import llamacpp, sglang, tgi, trtllm, vllm
from doctor.engines.names import LLAMACPP, SGLANG, TGI, TRTLLM, UNKNOWN, VLLM, identify_log
from doctor.evidence.log import LogLine
from doctor.logscan.parsed import LogFacts

LogParser = Callable[[Iterable[LogLine], str], LogFacts]


#: Each engine's log reader, by its record's id (``doctor.engines``): imported here, above both,
#: because the records sit below the readers and may not name them (``tests/project/test_layering.py``);
#: ``tests/parsers/test_engine_records.py`` holds every record to a reader.
PARSERS: Mapping[str, LogParser] = {
    VLLM: vllm.parse_lines,
    SGLANG: sglang.parse,
    LLAMACPP: llamacpp.parse,
    TGI: tgi.parse,
    TRTLLM: trtllm.parse,
}


def parse_engine_log(lines: Sequence[LogLine], source: str = "") -> LogFacts:
    """The facts of the log's last startup, read by its engine's parser, with whose log it is."""
    identity = identify_log(line.text for line in lines)
    facts = PARSERS[identity.engine or VLLM](lines, source)
    if identity.engine is None and facts.empty:
        facts.engine = UNKNOWN
    facts.identified_by = identity.why
    return facts
