"""Which parser reads a log: the engine whose marker its kept lines hold, else vLLM's.

The scanner keeps every engine's lines (``doctor.engines.openings``); the first line with
another engine's marker (``names.LOG_MARKERS``) decides, and a log no marker claims is vLLM's,
whose parser knows its many releases (``doctor.vllm_log.parser``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from doctor.engines import llamacpp, sglang, tgi, trtllm
from doctor.engines.names import LLAMACPP, SGLANG, TGI, TRTLLM, engine_of_log
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
    """The facts of the log's last startup, read by its engine's parser."""
    engine = engine_of_log(line.text for line in lines)
    parser = PARSERS.get(engine or "")
    return parser(lines, source) if parser is not None else parse_lines(lines, source)
