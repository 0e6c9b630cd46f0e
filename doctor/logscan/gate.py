"""The log scanner's gate: which lines of a log are kept, whichever engine wrote it.

``MESSAGE_GATE`` and ``EXCEPTION_GATE`` are the cheap first filter of the streaming scanner
(``scanner``). The gate regex starts with the literal ``] `` that ends every vLLM header, so ``re``
skips from header to header in C and tries the message openings only there (about 1 GB/s, where
an alternation of phrases searched anywhere on the line runs under 100 MB/s). Exceptions also come
without a header (tracebacks, wrappers) and are found by their own one-literal gate. A message a
parser reads must start with one of the gate's openings: the fixture tests read every log through
the gate, and ``bench/log_parse.py`` measures it. The openings of the engines other than vLLM are
their records' (``doctor.engines.openings``); ``OUT_OF_MEMORY`` and ``OTHER_ERROR`` are how every
engine's parser classifies a kept exception.
"""

from __future__ import annotations

import re

from doctor.engines import openings

#: Openings of the messages the parsers read, after vLLM's ``[file.py:N] `` (``file.py:N] ``
#: before 0.8): every engine's, from its record (``doctor.engines.openings``). Every repeat is
#: bounded (``\d{1,4}``, ``{0,40}``) or cannot cross a line: the headerless gate tries them at
#: every position of the log, where an unbounded ``\d+`` or ``\s*`` runs to the end of each long
#: run of digits or blank lines, once per position (256 KiB of blank lines took 56 s). vLLM's
#: data-parallel prefix (``Engine 000: ``) may precede any of them, and vLLM's ``GPU KV cache
#: size`` comes last because it is tried at any capital.
_OPENINGS = (
    rb"(?:Engine \d{1,4}: |\d{1,4} Engines Aggregated: )?(?:"
    + openings.OPENINGS
    + rb"|[A-Z][A-Za-z +]{0,40} KV cache size)"  # GPU, CPU, XPU, "GPU + host"
)
#: Request logs echo user prompts, which may hold any phrase: never kept. Most vLLM lines of a
#: busy log are these, so the gate rules them out first, which halves its time.
_REQUEST = rb"(?:Received|Added|Finished|Aborted) request "
REQUEST_LOG = rb"\] " + _REQUEST
MESSAGE_GATE = re.compile(rb"\] (?!" + _REQUEST + rb")" + _OPENINGS)
#: The same after a header coloured by 0.33 (``]\x1b[0m ``); slower, so used only for chunks
#: that hold an escape code.
COLOURED_MESSAGE_GATE = re.compile(rb"\](?:\x1b\[[0-9;]*m)? " + _OPENINGS)
#: A log whose first chunk holds no vLLM header (an excerpt pasted without them) is searched
#: for the same openings anywhere on the line: far slower, but such logs are small.
HEADER_PROBE = re.compile(rb"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d")
ANYWHERE_GATE = re.compile(_OPENINGS)
#: Exceptions, found anywhere on a line: tracebacks and wrappers print them without a header.
#: (A one-literal regex: ``re`` finds it faster than ``bytes.find`` does.)
EXCEPTION_GATE = re.compile(rb"Error: ")
#: A serving wrapper's own print of the engine arguments, before vLLM's first line and without
#: its header (Xinference: "Loading MODEL with following model config: {...}"): found anywhere
#: on a line, like an exception, by one literal.
WRAPPER_GATE = re.compile(rb"with following model config: \{")

#: Kept-line categories of the scanner, each bounded on its own (see ``scanner``), every
#: engine's (``doctor.engines.openings``).
STATS_MARKS = openings.STATS_MARKS
PREEMPTION_MARKS = openings.PREEMPTION_MARKS

#: Errors every engine's parser reads from a kept exception line (searched anywhere: they arrive
#: inside tracebacks and wrappers).
OUT_OF_MEMORY = re.compile(r"OutOfMemoryError|\b[Oo]ut of memory\b|OUT_OF_(?:DEVICE_|HOST_)?MEMORY")
OTHER_ERROR = re.compile(r"\b[A-Z]\w*Error: \S")
