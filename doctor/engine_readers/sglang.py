"""SGLang's log: the KV pool, the scheduler's limits, its server arguments, its batch lines.

Formats from ``sgl-project/sglang`` (``python/sglang/srt/mem_cache/memory_pool.py``,
``managers/scheduler.py``, ``model_executor/model_runner.py``), checked against logs pasted in
its issues (``fixtures/engines/sglang/``). A line reads ``[2025-09-03 18:33:18 TP0] message``;
the rank tag (``DPx TPy EPz``) is optional. Facts go under the keys the checks read
(``max_num_seqs`` for ``max_running_requests``, ``max_num_batched_tokens`` for
``chunked_prefill_size``, ``max_model_len`` for ``context_len``), each with a note naming
SGLang's own setting.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from doctor.engine_readers.logbook import ARGUMENT, RESOLVED, STATED, Logbook
from doctor.engines.sglang import RECORD
from doctor.evidence.log import LogLine
from doctor.foundation.wire import number
from doctor.logscan.parsed import LogFacts, StatsPoint
from doctor.logscan.printed_values import literal_value, split_items

# The opening bracket may be cut by an excerpt; SGLang 0.5.7+ puts "INFO file.py:N: " after it;
# some builds and wrappers print the time alone (``[23:43:42]``).
_HEADER = re.compile(
    r"\[?(?P<when>(?:\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d)(?P<ranks>(?: [A-Z]{2}\d+)*)\] "
    r"(?:(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) [\w.]+:\d+: )?"
)
_CONTINUED = re.compile(r"\s{8}")  # the indented rest of a record wrapped under its message
_CONTINUATIONS = 4
# Builds before 2025-03 state only the sizes (``KV Cache is allocated. K size: 27.13 GB, V size: ...``).
_KV = re.compile(r"^(?P<pool>Full |SWA )?KV Cache is allocated\.(?: .*?#tokens: (?P<tokens>\d+))?")
_KV_SIZE = re.compile(r"\bKV size: (?P<kv>\d+(?:\.\d+)?) GB|\bK size: (?P<k>\d+(?:\.\d+)?) GB, V size: (?P<v>\d+(?:\.\d+)?) GB")
_PAGE = re.compile(r"\bpage_size=(?P<n>\d+)")
_LIMITS = re.compile(r"^max_total_num_tokens=\d+, ")
_CAPPED = re.compile(r"^max_running_requests is capped to (?P<n>\d+)")
_WEIGHTS = re.compile(r"^Load weight end\..*?\bmem usage=(?P<gib>\d+(?:\.\d+)?) GB")
_GRAPH = re.compile(r"^Capture cuda graph end\..*?\bmem usage=(?P<gib>\d+(?:\.\d+)?) GB")
_SERVER_ARGS = re.compile(r"server_args=ServerArgs\((?P<body>.*)")
# cuda_graph_runner.py: ``Capture cuda graph bs [1, 2, 4, ...]``, the sizes captured (the argument
# ``cuda_graph_max_bs`` is what was asked for); then tqdm's ``Capturing batches (bs=N ...`` from the largest down.
_CAPTURE_BS = re.compile(r"^Capture cuda graph bs \[(?P<sizes>\d+(?:, \d+)*)\]")
_CAPTURING = re.compile(r"Capturing batches \(bs=(?P<bs>\d+) ")
_BATCH = re.compile(r"^(?P<kind>Prefill|Decode) batch[.,] ")
_FIELD = re.compile(r"(?P<name>#?[a-z][\w -]{0,40}?(?: \(token/s\))?): (?P<value>-?\d+(?:\.\d+)?|True|False)")
_RETRACT = re.compile(r"^(?:KV cache pool is full\. Retract requests\.|Decode out of memory happened\.) #retracted_reqs: (?P<n>\d+)")

#: The scheduler's resolved limits (the ``max_total_num_tokens=...`` line) -> check keys.
_LIMIT_KEYS = {
    "max_total_num_tokens": "kv_cache_tokens",
    "max_running_requests": "max_num_seqs",
    "chunked_prefill_size": "max_num_batched_tokens",
    "max_prefill_tokens": "max_prefill_tokens",
    "context_len": "max_model_len",
}

#: ``ServerArgs`` fields -> check keys (what was asked for; the limits line says what resolved).
_ARG_KEYS = {
    "model_path": "model",
    "served_model_name": "served_model_name",
    "tp_size": "tensor_parallel_size",
    "dp_size": "data_parallel_size",
    "context_length": "max_model_len",
    "max_running_requests": "max_num_seqs",
    "chunked_prefill_size": "max_num_batched_tokens",
    "max_total_tokens": "kv_cache_tokens",
    "mem_fraction_static": "mem_fraction_static",
    "page_size": "block_size",
    "kv_cache_dtype": "kv_cache_dtype",
    "schedule_conservativeness": "schedule_conservativeness",
    "schedule_policy": "scheduling_policy",
    "stream_interval": "stream_interval",
    "disable_radix_cache": "disable_radix_cache",
    "disable_cuda_graph": "disable_cuda_graph",
    "cuda_graph_max_bs": "max_cudagraph_capture_size",
    "max_loras_per_batch": "max_loras",
}

#: SGLang's name for a check key, for the fact's note.
OWN_NAMES = {
    "kv_cache_tokens": "max_total_num_tokens",
    "max_num_seqs": "max_running_requests",
    "max_num_batched_tokens": "chunked_prefill_size",
    "max_model_len": "context_len",
    "block_size": "page_size",
    "max_cudagraph_capture_size": "cuda_graph_max_bs",
    "max_loras": "max_loras_per_batch",
}


def parse(lines: Iterable[LogLine], source: str = "") -> LogFacts:
    """The facts of the last SGLang startup in ``lines``, its batch lines and retractions. A
    record a guide wrapped over lines (its continuation indented under the message) is joined."""
    book = Logbook(RECORD, source, OWN_NAMES)
    held: tuple[LogLine, str, str | None, list[str]] | None = None  # a record that may continue
    joined = 0  # continuation lines joined to it, bounded: a wrapped record spans a few lines
    for line in lines:
        header = _HEADER.search(line.text)
        if (held is not None and header is None and joined < _CONTINUATIONS and _CONTINUED.match(line.text)
                and line.no == held[0].no + 1):
            first, message, when, ranks = held
            held, joined = (LogLine(line.no, first.text), message + " " + line.text.strip(), when, ranks), joined + 1
            continue
        if held is not None:
            _read(book, held[0], *held[1:])
        when, ranks = (header["when"], header["ranks"].split()) if header else (None, [])
        message = line.text[header.end():] if header else line.text.strip()
        held, joined = (line, message, when, ranks), 0
    if held is not None:
        _read(book, held[0], *held[1:])
    return book.result()


def _read(book: Logbook, line: LogLine, message: str, when: str | None, ranks: list[str]) -> None:
    if match := _BATCH.match(message):
        book.stat(line, _point(line, when, ranks, match["kind"], message))
    elif match := _RETRACT.match(message):
        book.retraction(line, when or str(line.no), _rank("DP", ranks) + message, number(match["n"], int) or 0)
    elif match := _KV.match(message):
        key = "swa_kv_cache_tokens" if match["pool"] == "SWA " else "kv_cache_tokens"
        if match["tokens"]:
            book.own(line, key, number(match["tokens"], int), STATED)
        if match["pool"] != "SWA " and (size := _KV_SIZE.search(message)):
            k, v = number(size["k"]), number(size["v"])
            gib = number(size["kv"]) if size["kv"] else k + v if k is not None and v is not None else None
            book.fact(line, "kv_cache_memory_gib", gib)
        if page := _PAGE.search(message):
            book.own(line, "block_size", number(page["n"], int), STATED)
    elif _LIMITS.match(message):
        for name, raw in split_items(message + ")"):
            if limit := _LIMIT_KEYS.get(name):
                _limit(book, line, limit, literal_value(raw))
    elif match := _CAPPED.match(message):
        book.own(line, "max_num_seqs", number(match["n"], int), RESOLVED + 1)
    elif match := _WEIGHTS.match(message):
        book.fact(line, "weights_memory_gib", number(match["gib"]))
    elif match := _GRAPH.match(message):
        book.fact(line, "cuda_graph_memory_gib", number(match["gib"]))
    elif match := _SERVER_ARGS.search(message):
        _server_args(book, line, match["body"])
    elif match := _CAPTURE_BS.match(message):
        book.own(line, "max_cudagraph_capture_size", max(int(n) for n in match["sizes"].split(", ")), RESOLVED)
    elif captured := [int(m["bs"]) for m in _CAPTURING.finditer(message)]:
        book.own(line, "max_cudagraph_capture_size", max(captured), RESOLVED)
    else:
        book.error(line, message)


def _limit(book: Logbook, line: LogLine, key: str, value: object) -> None:
    if key == "max_num_batched_tokens":
        chunked = isinstance(value, int) and value > 0  # -1 or None: chunked prefill is off
        book.fact(line, "chunked_prefill", chunked, RESOLVED)
        if not chunked:
            return
    book.own(line, key, value, RESOLVED)


def _server_args(book: Logbook, line: LogLine, body: str) -> None:
    for name, raw in split_items(body):
        key = _ARG_KEYS.get(name)
        if key is None:
            continue
        value = literal_value(raw)
        if key == "disable_radix_cache":
            book.fact(line, "enable_prefix_caching", not value, ARGUMENT, note="SGLang --disable-radix-cache")
        elif key == "disable_cuda_graph":
            book.fact(line, "enforce_eager", bool(value), ARGUMENT, note="SGLang --disable-cuda-graph")
        elif key == "max_num_batched_tokens" and isinstance(value, int) and value <= 0:
            book.fact(line, "chunked_prefill", False, ARGUMENT)
        else:
            book.own(line, key, value, ARGUMENT)



def _point(line: LogLine, when: str | None, ranks: list[str], kind: str, message: str) -> StatsPoint:
    fields = {m["name"]: m["value"] for m in _FIELD.finditer(message)}
    point = StatsPoint(line=line.no, timestamp=when, engine=_rank("DP", ranks) or None)
    point.running = number(fields.get("#running-req"))
    point.waiting = number(fields.get("#queue-req"))
    # Hybrid models print a usage per pool ("full token usage", "swa token usage"); like the
    # sglang:token_usage gauge, the fullest pool is the KV usage.
    usages = [u for name, value in fields.items() if name.endswith("token usage") and (u := number(value)) is not None]
    point.kv_usage_pct = max(usages) * 100 if usages else None
    if kind == "Decode":
        point.generation_throughput = number(fields.get("gen throughput (token/s)"))
    else:
        point.prompt_throughput = number(fields.get("input throughput (token/s)"))
    return point


def _rank(kind: str, ranks: list[str]) -> str:
    return next((r for r in ranks if r.startswith(kind)), "")
