"""Which parser reads a log, and whose log it is: "unknown" over a guess.

The scanner keeps every engine's lines (``doctor.engines.openings``); ``names.identify_log``
scores each engine by the kept lines carrying its markers. Another engine's log goes to its
parser; a log vLLM's markers claim, or that no marker claims, goes to vLLM's parser (it knows
releases whose lines no marker list covers), and when that finds nothing either the log is an
unidentified engine's (``UNKNOWN``): its facts and remediations then speak of limits, not of
vLLM's flags. A wrong engine is worse than none.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from doctor.engines import llamacpp, sglang, tgi, trtllm
from doctor.engines.names import LLAMACPP, SGLANG, TGI, TRTLLM, UNKNOWN, VLLM, identify_log
from doctor.evidence.log import LogLine
from doctor.vllm_log.model import LogFacts
from doctor.vllm_log.parser import parse_lines

PARSERS: dict[str, Callable[[Iterable[LogLine], str], LogFacts]] = {
    SGLANG: sglang.parse,
    LLAMACPP: llamacpp.parse,
    TGI: tgi.parse,
    TRTLLM: trtllm.parse,
}


def parse_engine_log(lines: Sequence[LogLine], source: str = "") -> LogFacts:
    """The facts of the log's last startup, read by its engine's parser, with whose log it is."""
    identity = identify_log(line.text for line in lines)
    parser = PARSERS.get(identity.engine or "")
    if parser is not None:
        facts = parser(lines, source)
    else:
        facts = parse_lines(lines, source)
        if identity.engine != VLLM and facts.empty:
            facts.engine = UNKNOWN
    facts.identified_by = identity.why
    return facts
