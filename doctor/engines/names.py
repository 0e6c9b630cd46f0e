"""The engines llm-doctor reads, how each is named, and how each is recognised.

Recognition is by what an engine cannot help printing: its metric-name prefix (``vllm:``,
``sglang:``, ``llamacpp:``, ``tgi_``, ``trtllm_`` / ``nv_trt_llm_``), a phrase of its startup log,
or its ``server`` response header. Every table here is derived from the engines' records
(``doctor.engines.RECORDS``), where each rule names its source.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from doctor.engines import BY_ID, RECORDS, llamacpp, sglang, tgi, trtllm, vllm

VLLM, SGLANG, LLAMACPP, TGI, TRTLLM = vllm.RECORD.id, sglang.RECORD.id, llamacpp.RECORD.id, tgi.RECORD.id, trtllm.RECORD.id
#: A log or answer that names no engine llm-doctor knows: its facts keep neutral names and a
#: remediation names the limit, never one engine's flag (a wrong engine is worse than none).
UNKNOWN = "unknown"

#: Engine id -> how a sentence names it.
DISPLAY: dict[str, str] = {**{r.id: r.display for r in RECORDS}, UNKNOWN: "the unidentified engine"}

#: Metric-name prefixes, each engine's own (``EngineRecord.metric_prefixes``).
METRIC_PREFIXES: tuple[tuple[str, str], ...] = tuple((p, r.id) for r in RECORDS for p in r.metric_prefixes)

#: Phrases of a log that only one engine prints, tried in this order on the kept lines (every
#: engine's but vLLM's, whose phrases are tried last, with its header).
LOG_MARKERS: tuple[tuple[str, str], ...] = tuple((m, r.id) for r in RECORDS if r.id != VLLM for m in r.log_markers)

#: What only vLLM prints: a log none of these nor another engine's marker claims is an
#: unidentified engine's, not vLLM's.
VLLM_MARKERS: tuple[str, ...] = BY_ID[VLLM].log_markers

#: vLLM's record header (``INFO 10-14 09:31:02 [file.py:N]``), another engine never prints it.
_VLLM_HEADER = re.compile(r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d")

#: Metric names an engine exposes without its prefix (trtllm-serve's histograms).
UNPREFIXED: dict[str, str] = {name: r.id for r in RECORDS for name in r.unprefixed_metrics}

#: ``owned_by`` of the models an engine's ``/v1/models`` lists; TGI puts the model id there.
MODEL_OWNERS: dict[str, str] = {r.model_owner: r.id for r in RECORDS if r.model_owner}

#: A word of the ``Server`` response header -> the engine that sends it.
SERVER_HEADERS: dict[str, str] = {r.server_header.lower(): r.id for r in RECORDS if r.server_header}


#: The engines in a sentence: "vLLM, SGLang, llama.cpp, TGI or TensorRT-LLM" (the CLI's help).
ENGINE_LIST = ", ".join(r.display for r in RECORDS[:-1]) + f" or {RECORDS[-1].display}"
#: The engines after a "no": "vLLM (nor SGLang, llama.cpp, TGI, TensorRT-LLM)" (a log none of them wrote).
ENGINE_NOR_LIST = f"{RECORDS[0].display} (nor {', '.join(r.display for r in RECORDS[1:])})"


def display(engine: str | None) -> str:
    """How a sentence names ``engine``; an id not in ``DISPLAY`` as given, none as vLLM (no
    evidence said otherwise: the probe alone, against an OpenAI route)."""
    return DISPLAY.get(engine or VLLM, engine or "vLLM")


def engine_part(engine: str | None, part: str) -> str:
    """A part of the engine, in a sentence: "the vLLM server", "the SGLang command line"; of an
    unidentified one, "the unidentified engine's server" (its display name has its article)."""
    return f"{display(engine)}'s {part}" if engine == UNKNOWN else f"the {display(engine)} {part}"


def not_in_metrics(engine: str | None, what: str) -> str:
    """What a check or report says of ``what`` (a metric, or what it measures) absent from the engine's
    /metrics, in what is known: an identified engine does not expose it ("not exposed by llama.cpp:
    its /metrics has no ..."); of an unidentified engine (``UNKNOWN``) only what was observed, that
    its /metrics had none ("the unidentified engine's /metrics has no ..."): nothing says it lacks one,
    it may export it under a name no record knows."""
    if engine == UNKNOWN:
        return f"the unidentified engine's /metrics has no {what}"
    return f"not exposed by {display(engine)}: its /metrics has no {what}"


def engine_of_metric(name: str) -> str | None:
    """The engine a metric name belongs to, by its prefix; ``None`` for anyone else's."""
    return next((engine for prefix, engine in METRIC_PREFIXES if name.startswith(prefix)), UNPREFIXED.get(name))


def engine_of_metrics(names: Iterable[str]) -> str | None:
    """The engine most of ``names`` belong to (a scrape also holds process and Python metrics)."""
    counts: dict[str, int] = {}
    for name in names:
        engine = engine_of_metric(name)
        if engine is not None:
            counts[engine] = counts.get(engine, 0) + 1
    return max(counts, key=lambda e: counts[e]) if counts else None


@dataclass(frozen=True)
class LogIdentity:
    """Whose log it is and why: ``engine`` is ``None`` when only vLLM's parser can tell (no marker
    of any engine: its facts decide), ``UNKNOWN`` never here (``doctor.engine_readers.logs`` decides it)."""

    engine: str | None
    why: str


#: Lines read for identification: enough for any startup, bounded for a pasted megabyte.
_IDENTIFY_LINES = 20_000


def identify_log(lines: Iterable[str]) -> LogIdentity:
    """Score every engine by the kept lines that carry one of its markers (``LOG_MARKERS``,
    ``VLLM_MARKERS`` and vLLM's header) and take the one with most; a tie goes to the engine
    whose marker came first. A log of an inference server wrapping vLLM may quote another
    engine's word once; a count, not the first word, says whose lines these are."""
    counts: dict[str, int] = {}
    first: dict[str, str] = {}
    for n, text in enumerate(lines):
        if n >= _IDENTIFY_LINES:
            break
        hit = next(((marker, engine) for marker, engine in LOG_MARKERS if marker in text), None)
        if hit is None and (_VLLM_HEADER.search(text) or any(m in text for m in VLLM_MARKERS)):
            hit = ("vLLM's header or phrases", VLLM)
        if hit is not None:
            counts[hit[1]] = counts.get(hit[1], 0) + 1
            first.setdefault(hit[1], hit[0])
    if not counts:
        return LogIdentity(None, f"no line carries a marker of {ENGINE_LIST}")
    order = list(first)
    engine = max(order, key=lambda e: (counts[e], -order.index(e)))
    return LogIdentity(engine, f"{counts[engine]} line(s) with {display(engine)}'s markers (first: {first[engine]!r})")


def engine_of_headers(headers: Mapping[str, str]) -> str | None:
    """The engine a response's headers name (``SERVER_HEADERS``: llama-server's default
    ``Server: llama.cpp``). vLLM and SGLang both answer ``server: uvicorn`` and TGI sends no
    header of its own, which name none."""
    server = next((v for k, v in headers.items() if k.lower() == "server"), "").lower()
    return next((engine for word, engine in SERVER_HEADERS.items() if word in server), None)


def engine_of_owner(owned_by: str | None) -> str | None:
    """The engine that lists its models as ``owned_by`` (``MODEL_OWNERS``); ``None`` otherwise."""
    return MODEL_OWNERS.get((owned_by or "").strip().lower())


def engine_of_answers(headers: Mapping[str, str], owners: Iterable[str | None]) -> tuple[str, str] | None:
    """The engine an endpoint's own answers name, and which answer did: its ``Server`` header
    (``engine_of_headers``), else the ``owned_by`` of a model its ``/v1/models`` lists."""
    if (engine := engine_of_headers(headers)) is not None:
        return engine, "its Server header"
    return next(((e, "the owned_by of its /v1/models") for o in owners if (e := engine_of_owner(o)) is not None), None)
