"""TGI's log (text-generation-inference): the launcher's arguments and the router's warm-up.

Formats from ``huggingface/text-generation-inference`` (``launcher/src/main.rs`` prints its
``Args { ... }`` as Rust's debug form; ``router/src/server.rs``, ``main.rs`` before 2.x, logs
``Setting max batch total tokens to N`` after warming up), plain or as JSON lines, checked
against logs pasted in public issues (``fixtures/engines/tgi/``). TGI holds at most
``max_batch_total_tokens`` tokens in its KV cache, so that is its KV capacity; the router
admits ``max_concurrent_requests``, its concurrency limit. TGI prints no periodic stats line.

The ``Args`` dump comes in several shapes: one line (``{:?}``), pretty-printed over one line per
field (``{:#?}``, 2.x and later, ``Some(`` with its value on the next line), or inside a JSON
record (``--json-output``, its quotes and, pretty-printed, its line breaks escaped: ``\\n``) that a
terminal may have hard-wrapped; the lines after an open ``Args {`` are joined until the next record.
What the arguments leave unset is resolved later, by the launcher (``Default `max_total_tokens` to
N``, 2.x) or by the v3 router (``Maximum total tokens defaulted to N``, ``backends/v3/src/main.rs``),
and the v3 shard states its KV blocks (``KV-cache blocks: N, size: B``, ``flash_causal_lm.py``).
``--env`` prints the launcher's build before the Args (``launcher/src/env_runtime.rs``: ``Runtime
environment:``, ``Commit sha:``, ``Docker label:``, ``nvidia-smi:``), its lines apart or in one JSON
record: it names TGI and its commit, not its release (the reports' images are labelled ``sha-`` and the
short commit).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable

from doctor.engine_readers.logbook import ARGUMENT, RESOLVED, STATED, Logbook
from doctor.engines.tgi import RECORD
from doctor.evidence.log import LogLine
from doctor.foundation.wire import number
from doctor.logscan.parsed import LogFacts

_ARGS = re.compile(r"(?:text_generation_launcher: |\"message\":\"|^\s*)Args \{(?P<body>.*)")
# ``Some(x)`` on one line, or ``Some(`` with ``x,`` on the next line of a pretty print. The key starts
# a word: from every position inside a long word the search re-read the word.
_ITEM = re.compile(r"\b(?P<key>\w+): (?:Some\(\s*(?P<some>\"[^\"]*\"|[^(),\s]+),?\s*\)?|(?P<value>\"[^\"]*\"|(?!Some\()[^,{}\s]+))")
#: A line that opens a new record (a timestamp, a JSON record, a wrapper's prefix), not a piece of ``Args``.
_RECORD = re.compile(r"\s*(?:\{\"|\d{4}-\d\d-\d\dT|[A-Z]+:[\w-]+:|\[)")
_ARGS_LINES = 400  # a pretty print has one line per field, some 60 in 3.x
# A JSON record's escapes in an Args it holds; a line break between fields reads as a space.
_JSON_ESCAPE = re.compile(r'\\([\\"nrt])')
_UNESCAPED = {"n": " ", "r": " ", "t": " "}
_DEFAULTED = re.compile(
    r"Default `(?P<arg>max_\w+)` to (?P<n>\d+)|Maximum (?P<what>input|total) tokens defaulted to (?P<m>\d+)"
)
# ``env_runtime.rs``'s block, its lines apart or in one JSON record (``\\n`` between them).
_COMMIT = re.compile(r"(?:^|\\n)Commit sha: (?P<sha>[0-9a-f]{7,40})\b")
_BLOCKS = re.compile(r"KV-cache blocks: (?P<n>\d+), size: (?P<size>\d+)")
# ``GET /info`` pasted into a report, pretty or on one line (``router/src/lib.rs`` ``Info``): what
# the router resolved, so it states the limits as the warm-up line does.
_INFO = re.compile(
    r'"(?P<key>model_id|model_dtype|max_concurrent_requests|max_input_tokens|max_input_length|max_total_tokens'
    r'|max_batch_total_tokens|max_batch_size|version)": ?(?P<value>"[^"]{0,300}"|\d{1,12})'
)
_INFO_KEYS = {"version": "version", "model_dtype": "dtype"}  # the others are the launcher's names
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

#: TGI's name for a check key, for the fact's note: the launcher's flag as its record spells it
#: (``EngineRecord.flags``), or what the launcher and its log call a value no vLLM setting matches.
OWN_NAMES = {
    **{key: RECORD.flags[key] for key in ("max_num_seqs", "max_model_len", "max_num_batched_tokens", "tensor_parallel_size")},
    "kv_cache_tokens": "max batch total tokens",
    "max_input_tokens": "--max-input-tokens",
    "block_size": "KV-cache block size",
}


def parse(lines: Iterable[LogLine], source: str = "") -> LogFacts:
    """The facts of the last TGI startup in ``lines``."""
    book = Logbook(RECORD, source, OWN_NAMES)
    args: list[LogLine] = []  # the lines of an ``Args {`` dump not yet read
    for line in lines:
        text = line.text
        if args and len(args) < _ARGS_LINES and not _RECORD.match(text) and not _ARGS.search(text):
            args.append(line)
            continue
        if args:
            _args(book, args)
            args = []
        if _ARGS.search(text):
            args = [line]
        elif match := _DEFAULTED.search(text):
            arg = match["arg"] or f"max_{match['what']}_tokens"
            if key := _ARG_KEYS.get(arg):
                book.own(line, key, number(match["n"] or match["m"], int), RESOLVED)
        elif match := _COMMIT.search(text):
            book.fact(line, "build_commit", match["sha"], STATED)
        elif match := _BLOCKS.search(text):
            book.fact(line, "num_gpu_blocks", number(match["n"], int), STATED)
            book.own(line, "block_size", number(match["size"], int), STATED)
        elif infos := list(_INFO.finditer(text)):
            for info in infos:
                key = _INFO_KEYS.get(info["key"]) or _ARG_KEYS[info["key"]]
                book.own(line, key, _value(info["value"]), RESOLVED)
        elif match := _TOTAL.search(text):
            book.own(line, "kv_cache_tokens", number(match["n"], int), RESOLVED)
        elif _NO_AUTO.search(text):
            book.fact(line, "automatic_max_batch_total_tokens", False)
        elif _CONNECTED.search(text):
            book.at(line).serving = True  # an Args line after it is a restart
        else:
            book.error(line, text)
    if args:
        _args(book, args)
    return book.result()


def _args(book: Logbook, lines: list[LogLine]) -> None:
    """Read an ``Args {`` dump and the lines it continues on: joined as they were printed when
    they follow each other (a hard wrap cuts inside a name), else with a separator."""
    text = lines[0].text
    for before, line in itertools.pairwise(lines):
        text += line.text if line.no == before.no + 1 else ", " + line.text
    match = _ARGS.search(_JSON_ESCAPE.sub(_unescaped, text))  # a JSON record escapes quotes and line breaks
    if match is None:
        return
    for item in _ITEM.finditer(match["body"]):
        if key := _ARG_KEYS.get(item["key"]):
            book.own(lines[0], key, _value(item["some"] if item["some"] is not None else item["value"]), ARGUMENT)


def _unescaped(match: re.Match[str]) -> str:
    """A JSON string's escape as the character it stands for, a space for ``\\n``: the pretty print's
    lines are read as one (``_ITEM`` takes a ``Some(`` value after any space)."""
    return _UNESCAPED.get(match[1], match[1])



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
