"""TensorRT-LLM's log: the executor's limits and the paged KV cache it allocated.

Formats from ``NVIDIA/TensorRT-LLM`` (the C++ runtime's ``trtGptModelInflightBatching.cpp``
prints ``TRTGptModel maxNumSequences: N`` and its siblings; the KV cache manager prints
``Number of tokens per block: N.`` and ``[MemUsageChange] Allocated X GiB for max tokens in
paged KV cache (N).``, ``Using N tokens in paged KV cache.`` before 0.9), the lines that Triton's
TensorRT-LLM backend and ``trtllm-serve`` both print, checked against logs pasted in public
issues (``fixtures/engines/trtllm/``). The KV pool is allocated twice by the PyTorch flow (a
dry run, then the real pool), so the last allocation wins, and so does the limits line it prints
after each (``max_seq_len=N, max_num_requests=N, max_num_tokens=N, max_batch_size=N``,
``_torch/pyexecutor``).

Serving readings come in three shapes: the executor's per-iteration statistics as JSON
(``IterationStats``: ``numActiveRequests``, ``numQueuedRequests``, ``kvCacheStats``, the runtime
batch limits; printed by the executor API and served by ``/metrics``), the Triton backend's
older batch-manager statistics (``libtensorrtllm.cc``: ``"Active Request Count"``, ``"Max KV cache
blocks"``, ..., which a terminal may have wrapped inside a key) and the PyTorch backend's
iteration log (``print_iter_log``: ``iter = N, ... num_scheduled_requests: N``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from doctor.engine_readers.logbook import RESOLVED, STATED, Logbook
from doctor.engines.trtllm import RECORD
from doctor.evidence.log import LogLine
from doctor.foundation.wire import number
from doctor.logscan.parsed import LogFacts, StatsPoint

_VERSION = re.compile(r"(?:Engine version|TensorRT[ -]LLM version:?) (?P<version>\d+\.\d+[\w.+-]*)")
_MODEL = re.compile(r"TRTGptModel (?P<key>max\w+): (?P<n>\d+)")
_BLOCK = re.compile(r"Number of tokens per block: (?P<n>\d+)|tokens per block=(?P<m>\d+)")
_ALLOCATED = re.compile(r"Allocated (?P<gib>\d+(?:\.\d+)?) GiB for max tokens (?:in paged KV cache )?\((?P<n>\d+)\)")
_USING = re.compile(r"Using (?P<n>\d+) tokens in paged KV cache")
_LIMITS = re.compile(r"\bmax_seq_len=\d+, max_num_requests=\d+")
_LIMIT = re.compile(r"\b(?P<key>max_seq_len|max_num_requests|max_num_tokens|max_batch_size)=(?P<n>\d+)")
_NUMBER = re.compile(r'"(?P<key>[A-Za-z][\w ]{0,40})":(?P<n>-?\d+(?:\.\d+)?)')
_RECORD_END = re.compile(r'"timestamp":"[^"]{0,40}"')  # the last key of a sorted IterationStats record
_OLD_STATS = re.compile(r'\{"Active Request Count":')
_ITER = re.compile(r"\bnum_scheduled_requests: (?P<n>\d+)")  # on a line that holds "iter = "
_ITER_STATS_LINES = 8  # a wrapped batch-manager record spans a few terminal lines

#: trtllm-serve's limits line -> check keys.
_LIMIT_KEYS = {
    "max_seq_len": "max_model_len",
    "max_num_requests": "max_num_seqs",
    "max_num_tokens": "max_num_batched_tokens",
    "max_batch_size": "max_batch_size",
}

#: Iteration statistics (``IterationStats`` JSON, and the Triton backend's older names) -> what
#: they give: a reading of the point, or a limit of the executor.
_STAT_READINGS = {
    "numActiveRequests": "running", "Active Request Count": "running",
    "numQueuedRequests": "waiting",
    "usedNumBlocks": "used_blocks", "Used KV cache blocks": "used_blocks",
    "maxNumBlocks": "max_blocks", "Max KV cache blocks": "max_blocks",
}
_STAT_LIMITS = {
    "tokensPerBlock": "block_size", "Tokens per KV cache block": "block_size",
    "maxNumActiveRequests": "max_num_seqs", "Max Request Count": "max_num_seqs",
    "maxBatchSizeRuntime": "max_batch_size",
    "maxNumTokensRuntime": "max_num_batched_tokens",
}

#: ``TRTGptModel max*`` -> check keys.
_MODEL_KEYS = {
    "maxNumSequences": "max_num_seqs",
    "maxBatchSize": "max_batch_size",
    "maxSequenceLen": "max_model_len",
    "maxNumTokens": "max_num_batched_tokens",
    "maxBeamWidth": "max_beam_width",
}

#: TensorRT-LLM's name for a check key, for the fact's note: what its log calls it, with the
#: ``trtllm-serve`` flag that sets it as its record spells it (``EngineRecord.flags``).
OWN_NAMES = {
    "max_num_seqs": "maxNumSequences",
    **{key: f"{name} ({RECORD.flags[key]})" for key, name in (("max_model_len", "maxSequenceLen"),
                                                               ("max_num_batched_tokens", "maxNumTokens"))},
    "kv_cache_tokens": "max tokens in paged KV cache",
    "block_size": "tokens per block",
}


def parse(lines: Iterable[LogLine], source: str = "") -> LogFacts:
    """The facts of the last TensorRT-LLM startup in ``lines``."""
    book = Logbook(RECORD, source, OWN_NAMES)
    pending: list[LogLine] = []  # a batch-manager record a terminal wrapped, not yet read
    for line in lines:
        text = line.text
        if pending:
            if line.no == pending[-1].no + 1 and len(pending) < _ITER_STATS_LINES and "}" not in pending[-1].text:
                pending.append(line)
                continue
            _stats_record(book, pending)
            pending = []
        if '"iterLatencyMS"' in text or _OLD_STATS.search(text):
            pending = [line]
        elif "iter = " in text and (match := _ITER.search(text)):
            book.stat(line, StatsPoint(line=line.no, running=number(match["n"])))
        elif _LIMITS.search(text):
            for limit in _LIMIT.finditer(text):  # printed again after the final KV allocation
                book.forget(_LIMIT_KEYS[limit["key"]])
                book.own(line, _LIMIT_KEYS[limit["key"]], number(limit["n"], int), RESOLVED)
        elif match := _VERSION.search(text):
            book.fact(line, "version", match["version"], STATED)
        elif match := _MODEL.search(text):
            if key := _MODEL_KEYS.get(match["key"]):
                book.own(line, key, number(match["n"], int), STATED)
        elif match := _ALLOCATED.search(text):
            # A later allocation replaces the one before it: the last pool is the one that serves.
            _last(book, line, "kv_cache_tokens", number(match["n"], int))
            _last(book, line, "kv_cache_memory_gib", number(match["gib"]))
        elif match := _USING.search(text):
            book.own(line, "kv_cache_tokens", number(match["n"], int), STATED)
        elif match := _BLOCK.search(text):
            book.own(line, "block_size", number(match["n"] or match["m"], int), STATED)
        else:
            book.error(line, text)
    if pending:
        _stats_record(book, pending)
    return book.result()


def _stats_record(book: Logbook, lines: list[LogLine]) -> None:
    """The iteration statistics of ``lines`` (one JSON record, an array of them, or a record a
    terminal wrapped over several lines): one point per record, its limits as facts."""
    text = "".join(line.text for line in lines)
    start = 0
    for end in [m.end() for m in _RECORD_END.finditer(text)] + [len(text)]:
        if start < end:
            _stats_point(book, lines[0], text[start:end])
        start = end


def _stats_point(book: Logbook, line: LogLine, record: str) -> None:
    numbers = {m["key"]: value for m in _NUMBER.finditer(record) if (value := number(m["n"])) is not None}
    readings = {_STAT_READINGS[k]: v for k, v in numbers.items() if k in _STAT_READINGS}
    if not readings:
        return
    for name, key in _STAT_LIMITS.items():
        if name in numbers:
            book.own(line, key, int(numbers[name]), STATED)
    blocks, size = readings.get("max_blocks"), numbers.get("tokensPerBlock", numbers.get("Tokens per KV cache block"))
    if blocks and size:
        book.own(line, "kv_cache_tokens", int(blocks * size), STATED - 1)  # below an allocation line
    used = readings.get("used_blocks")
    book.stat(line, StatsPoint(
        line=line.no, running=readings.get("running"), waiting=readings.get("waiting"),
        kv_usage_pct=used / blocks * 100 if used is not None and blocks else None,
    ))


def _last(book: Logbook, line: LogLine, key: str, value: object) -> None:
    """State ``key`` as resolved, replacing an earlier allocation's value."""
    book.forget(key)
    book.own(line, key, value, RESOLVED)

