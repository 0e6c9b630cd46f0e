"""TGI's log (text-generation-inference): the launcher's arguments and the router's warm-up.

Formats from ``huggingface/text-generation-inference`` (``launcher/src/main.rs`` prints its
``Args { ... }`` as Rust's debug form; ``router/src/server.rs``, ``main.rs`` before 2.x, logs
``Setting max batch total tokens to N`` after warming up), plain or as JSON lines, checked
against logs pasted in public issues (``fixtures/engines/tgi/``). TGI holds at most
``max_batch_total_tokens`` tokens in its KV cache, so that is its KV capacity; the router
admits ``max_concurrent_requests``, its concurrency limit. TGI prints no periodic stats line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from doctor.engines.logbook import ARGUMENT, RESOLVED, Logbook
from doctor.engines.names import TGI
from doctor.evidence.log import LogLine
from doctor.vllm_log.model import LogFacts
from doctor.wire import number

_ARGS = re.compile(r"text_generation_launcher: Args \{(?P<body>.*)")
# The key starts a word: from every position inside a long word the search re-read the word.
_ITEM = re.compile(r"\b(?P<key>\w+): (?:Some\((?P<some>[^()]*)\)|(?P<value>\"[^\"]*\"|[^,{}\s]+))")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_TOTAL = re.compile(r"Setting max batch total tokens to (?P<n>\d+)")
_NO_AUTO = re.compile(r"Model does not support automatic max batch total tokens")
_CONNECTED = re.compile(r"text_generation_router[\w:]*: [\w/.]+:\d+: Connected|\"message\":\"Connected\"")

#: Launcher arguments -> check keys.
_ARG_KEYS = {
    "model_id": "model",
    "num_shard": "tensor_parallel_size",
    "max_concurrent_requests": "max_num_seqs",
    "max_total_tokens": "max_model_len",
    "max_input_length": "max_input_tokens",
    "max_input_tokens": "max_input_tokens",
    "max_batch_prefill_tokens": "max_num_batched_tokens",
    "max_batch_total_tokens": "kv_cache_tokens",
    "max_batch_size": "max_batch_size",
    "quantize": "quantization",
    "dtype": "dtype",
    "kv_cache_dtype": "kv_cache_dtype",
    "cuda_memory_fraction": "cuda_memory_fraction",
}

#: TGI's flag for a check key, for the fact's note.
OWN_NAMES = {
    "max_num_seqs": "--max-concurrent-requests",
    "max_model_len": "--max-total-tokens",
    "max_num_batched_tokens": "--max-batch-prefill-tokens",
    "kv_cache_tokens": "max batch total tokens",
    "tensor_parallel_size": "--num-shard",
}


def parse(lines: Iterable[LogLine], source: str = "") -> LogFacts:
    """The facts of the last TGI startup in ``lines``."""
    book = Logbook(TGI, source)
    for line in lines:
        text = line.text
        if match := _ARGS.search(text):
            for item in _ITEM.finditer(match["body"]):
                if key := _ARG_KEYS.get(item["key"]):
                    _own(book, line, key, _value(item["some"] if item["some"] is not None else item["value"]), ARGUMENT)
        elif match := _TOTAL.search(text):
            _own(book, line, "kv_cache_tokens", number(match["n"], int), RESOLVED)
        elif _NO_AUTO.search(text):
            book.fact(line, "automatic_max_batch_total_tokens", False)
        elif _CONNECTED.search(text):
            book.at(line).serving = True  # an Args line after it is a restart
        else:
            book.error(line, text)
    return book.result()


def _own(book: Logbook, line: LogLine, key: str, value: object, rank: int) -> None:
    own = OWN_NAMES.get(key)
    book.fact(line, key, value, rank, note=f"TGI {own}" if own else None)


def _value(raw: str) -> object:
    """A debug-printed Rust value: ``None``, a number, ``true``/``false``, a quoted string."""
    raw = raw.strip()
    if raw == "None":
        return None
    if raw in ("true", "false"):
        return raw == "true"
    if raw.startswith('"') and raw.endswith('"'):
        return raw[1:-1]
    whole = number(raw, int)
    return whole if whole is not None else number(raw) if _NUMBER.fullmatch(raw) else raw
