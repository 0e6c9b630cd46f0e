"""llama.cpp's ``llama-server`` log: build, context, slots and the KV cache it allocated.

Formats from ``ggml-org/llama.cpp`` (``src/llama-context.cpp``, ``src/llama-kv-cache.cpp``,
``tools/server``), checked against logs pasted in public issues (``fixtures/engines/llamacpp/``).
The server splits one context of ``n_ctx`` KV cells between ``n_slots`` slots (``-np``), so
the concurrent-request limit is the slot count and the tokens per request ``n_ctx_slot``.
Facts go under the keys the checks read (``max_num_seqs`` for the slots, ``max_model_len`` for
the context per slot, ``kv_cache_tokens`` for the cells, ``max_num_batched_tokens`` for
``n_batch``), each with a note naming llama.cpp's own setting. llama-server prints no periodic
stats line; its queue and KV occupancy are in ``/metrics`` and ``/slots``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from doctor.engine_readers.logbook import RESOLVED, STATED, Logbook
from doctor.engines.llamacpp import RECORD
from doctor.evidence.log import LogLine
from doctor.foundation.wire import number
from doctor.logscan.parsed import LogFacts

_BUILD = re.compile(r"(?:^|\s)(?:build|version): (?P<n>\d+) \((?P<commit>[0-9a-f]+)\)")
# Searched from the first "build info |" only (``_build_info``): a lazy ``.*?`` from every
# repetition of it on one line read the rest of the line once per repetition.
_BUILD_INFO_START = re.compile(r"\bbuild info \|")
_BUILD_INFO = re.compile(r"\bbuild=(?P<n>\d+)(?:.*?\bcommit=\"(?P<commit>[0-9a-f]+)\")?")
_CONTEXT = re.compile(r"(?:llama_context|llama_new_context_with_model): (?P<key>n_\w+) *= (?P<n>\d+)\s*$")
_KV = re.compile(
    r"llama_kv_cache(?:_unified)?: size = +(?P<mib>\d+(?:\.\d+)?) MiB \( *(?P<cells>\d+) cells,"
    r"(?:.*?K \((?P<dtype>\w+)\))?"
)
_SLOTS = re.compile(r"initializing(?: slots)?, n_slots = (?P<n>\d+)(?:, n_ctx_slot = (?P<ctx>\d+))?")
_SLOT = re.compile(r"new slot,? n_ctx(?:_slot)? = (?P<ctx>\d+)")
# The server of late 2023 to early 2024 (b1500-b2000) listed its slots under "Available slots:",
# one " -> Slot N - max context: C" each, numbered from 0: the last one's N + 1 is the slot count.
_LISTED_SLOT = re.compile(r"-> Slot (?P<id>\d{1,6}) - max context: (?P<ctx>\d+)")
# ... and its build in a JSON record: {"message":"build info","build":1794,"commit":"1fc2f26"}.
_BUILD_JSON = re.compile(r"\"message\":\"build info\",\"build\":(?P<n>\d{1,9}),\"commit\":\"(?P<commit>[0-9a-f]+)\"")
# The server's structured logs of 2024: JSON lines (``"msg":"initializing slots","n_slots":1``, key
# order by build) and ``INFO [ init] initializing slots | tid=... n_slots=1``; both print the slot
# context as ``n_ctx_slot``.
_SLOTS_KV = re.compile(r"\bn_slots\"?[=:] ?(?P<n>\d+)")  # on an "initializing slots" line
_SLOT_KV = re.compile(r"\bn_ctx_slot\"?[=:] ?(?P<ctx>\d+)")  # on a "new slot" line
# Builds before the llama_context rename print the KV cache's size here (``K (f16)``, MLA ``c^KV (q8_0)``).
_KV_SELF = re.compile(r"KV self size *= *(?P<mib>\d+(?:\.\d+)?) MiB, (?:K|c\^KV) \((?P<dtype>\w+)\)")
_UNIFIED = re.compile(r"llama_context: kv_unified *= *(?P<on>true|false)")
_SEQ_WARNING = re.compile(r"llama_context: n_ctx_(?:seq|per_seq) \((?P<n>\d+)\) <")  # a per-sequence context shorter than training
_READY = re.compile(r"main: server is listening on (?P<url>\S+)")

#: ``llama_context: n_* = N`` -> check keys (``n_seq_max`` is the slots, ``n_ctx`` the cells).
_CONTEXT_KEYS = {
    "n_ctx": "n_ctx",
    "n_ctx_per_seq": "max_model_len",
    "n_ctx_seq": "max_model_len",  # its name since 2025
    "n_batch": "max_num_batched_tokens",
    "n_ubatch": "n_ubatch",
    "n_seq_max": "max_num_seqs",
}

#: llama-server's name for a check key, for the fact's note: what its log calls it, with the flag
#: that sets it (as its record spells it, ``EngineRecord.flags``, where the flag sets it alone).
OWN_NAMES = {
    **{key: f"{name} ({RECORD.flags[key]})" for key, name in (("max_num_seqs", "n_slots"), ("max_num_batched_tokens", "n_batch"))},
    "max_model_len": "n_ctx_slot (--ctx-size / slots)",
    "kv_cache_tokens": "KV cells (--ctx-size)",
}


def parse(lines: Iterable[LogLine], source: str = "") -> LogFacts:
    """The facts of the last llama-server startup in ``lines``."""
    book = Logbook(RECORD, source, OWN_NAMES)
    for line in lines:
        _read(book, line, line.text.strip())
    cells, slots = book.value("n_ctx"), book.value("max_num_seqs")
    book.infer("kv_cache_tokens", cells, "n_ctx", "llama.cpp allocates n_ctx KV cells")
    if cells and book.value("kv_unified"):  # one pool every slot may fill (-kvu, the default with -np auto)
        book.infer("max_model_len", cells, "n_ctx", f"n_ctx {cells}, unified KV cache shared by the slots")
    elif cells and slots:
        book.infer("max_model_len", cells // slots, "n_ctx", f"n_ctx {cells} / {slots} slots")
    return book.result()


def _read(book: Logbook, line: LogLine, text: str) -> None:
    if match := _BUILD.search(text) or _build_info(text) or _BUILD_JSON.search(text):
        book.fact(line, "version", f"b{match['n']}", STATED)
        book.fact(line, "build_commit", match["commit"], STATED)
    elif match := _KV.search(text):
        book.own(line, "kv_cache_tokens", number(match["cells"], int), RESOLVED)
        if (mib := number(match["mib"])) is not None:
            book.fact(line, "kv_cache_memory_gib", round(mib / 1024, 4))
        book.fact(line, "kv_cache_dtype", match["dtype"])
    elif match := _KV_SELF.search(text):
        if (mib := number(match["mib"])) is not None:
            book.fact(line, "kv_cache_memory_gib", round(mib / 1024, 4))
        book.fact(line, "kv_cache_dtype", match["dtype"])
    elif match := _UNIFIED.search(text):
        book.fact(line, "kv_unified", match["on"] == "true")
    elif match := _SEQ_WARNING.search(text):
        book.own(line, "max_model_len", number(match["n"], int), STATED)
    elif match := _CONTEXT.search(text):
        if key := _CONTEXT_KEYS.get(match["key"]):
            book.own(line, key, number(match["n"], int), STATED)
    elif match := _SLOTS.search(text):
        book.own(line, "max_num_seqs", number(match["n"], int), RESOLVED)
        if match["ctx"]:
            book.own(line, "max_model_len", number(match["ctx"], int), RESOLVED)
    elif "initializing slots" in text and (match := _SLOTS_KV.search(text)):
        book.own(line, "max_num_seqs", number(match["n"], int), RESOLVED)
    elif match := _SLOT.search(text) or (_SLOT_KV.search(text) if "new slot" in text else None):
        book.own(line, "max_model_len", number(match["ctx"], int), RESOLVED)
    elif match := _LISTED_SLOT.search(text):
        if (last := number(match["id"], int)) is not None:
            book.own(line, "max_num_seqs", last + 1, RESOLVED)
        book.own(line, "max_model_len", number(match["ctx"], int), RESOLVED)
    elif match := _READY.search(text):
        book.fact(line, "listening", match["url"], STATED)
        book.at(line).serving = True  # a build line after it is a restart
    else:
        book.error(line, text)


def _build_info(text: str) -> re.Match[str] | None:
    """The ``build=`` (and ``commit=``) of a ``build info |`` line, searched once from its start."""
    start = _BUILD_INFO_START.search(text)
    return _BUILD_INFO.search(text, start.end()) if start else None

