"""TensorRT-LLM's log: the executor's limits and the paged KV cache it allocated.

Formats from ``NVIDIA/TensorRT-LLM`` (the C++ runtime's ``trtGptModelInflightBatching.cpp``
prints ``TRTGptModel maxNumSequences: N`` and its siblings; the KV cache manager prints
``Number of tokens per block: N.`` and ``[MemUsageChange] Allocated X GiB for max tokens in
paged KV cache (N).``, ``Using N tokens in paged KV cache.`` before 0.9), the lines that Triton's
TensorRT-LLM backend and ``trtllm-serve`` both print, checked against logs pasted in public
issues (``fixtures/engines/trtllm/``). The KV pool is allocated twice by the PyTorch flow (a
dry run, then the real pool), so the last allocation wins.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from doctor.engines.logbook import RESOLVED, STATED, Logbook
from doctor.engines.names import TRTLLM
from doctor.evidence.log import LogLine
from doctor.vllm_log.model import LogFacts
from doctor.wire import number

_VERSION = re.compile(r"(?:Engine version|TensorRT[ -]LLM version:?) (?P<version>\d+\.\d+[\w.+-]*)")
_MODEL = re.compile(r"TRTGptModel (?P<key>max\w+): (?P<n>\d+)")
_BLOCK = re.compile(r"Number of tokens per block: (?P<n>\d+)|tokens per block=(?P<m>\d+)")
_ALLOCATED = re.compile(r"Allocated (?P<gib>\d+(?:\.\d+)?) GiB for max tokens in paged KV cache \((?P<n>\d+)\)")
_USING = re.compile(r"Using (?P<n>\d+) tokens in paged KV cache")

#: ``TRTGptModel max*`` -> check keys.
_MODEL_KEYS = {
    "maxNumSequences": "max_num_seqs",
    "maxBatchSize": "max_batch_size",
    "maxSequenceLen": "max_model_len",
    "maxNumTokens": "max_num_batched_tokens",
    "maxBeamWidth": "max_beam_width",
}

#: TensorRT-LLM's name for a check key, for the fact's note.
OWN_NAMES = {
    "max_num_seqs": "maxNumSequences",
    "max_model_len": "maxSequenceLen (--max_seq_len)",
    "max_num_batched_tokens": "maxNumTokens (--max_num_tokens)",
    "kv_cache_tokens": "max tokens in paged KV cache",
    "block_size": "tokens per block",
}


def parse(lines: Iterable[LogLine], source: str = "") -> LogFacts:
    """The facts of the last TensorRT-LLM startup in ``lines``."""
    book = Logbook(TRTLLM, source)
    for line in lines:
        text = line.text
        if match := _VERSION.search(text):
            book.fact(line, "version", match["version"], STATED)
        elif match := _MODEL.search(text):
            if key := _MODEL_KEYS.get(match["key"]):
                _own(book, line, key, number(match["n"], int), STATED)
        elif match := _ALLOCATED.search(text):
            # A later allocation replaces the one before it: the last pool is the one that serves.
            _last(book, line, "kv_cache_tokens", number(match["n"], int))
            _last(book, line, "kv_cache_memory_gib", number(match["gib"]))
        elif match := _USING.search(text):
            _own(book, line, "kv_cache_tokens", number(match["n"], int), STATED)
        elif match := _BLOCK.search(text):
            _own(book, line, "block_size", number(match["n"] or match["m"], int), STATED)
        else:
            book.error(line, text)
    return book.result()


def _last(book: Logbook, line: LogLine, key: str, value: object) -> None:
    """State ``key`` as resolved, replacing an earlier allocation's value."""
    book.forget(key)
    _own(book, line, key, value, RESOLVED)


def _own(book: Logbook, line: LogLine, key: str, value: object, rank: int) -> None:
    own = OWN_NAMES.get(key)
    book.fact(line, key, value, rank, note=f"TensorRT-LLM {own}" if own else None)
