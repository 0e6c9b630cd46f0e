"""The phrases of every engine's log that the log scanner keeps, as pieces of its gate.

``doctor.logscan.gate`` joins ``OPENINGS`` into the scanner's gate, so one streaming scan
keeps the lines of whichever engine wrote the log; the parsers in ``doctor.engine_readers`` then
read only what was kept. Derived from the records' ``log_openings``, vLLM's first (bytes, bounded repeats
only: the gate is tried at every position of a log without headers, and other engines' logs are
read with that gate: their lines carry no vLLM header, and newer SGLang puts a level and a file
between its header and the message).
"""

from __future__ import annotations

from doctor.engines import RECORDS

#: Message openings (alternatives of one regex group), engine by engine, then the pieces of a
#: record printed over lines, each at a line's start, as one alternative (so the gate tries one
#: look-behind per position).
OPENINGS = b"|".join(r.log_openings for r in RECORDS if r.log_openings) + (
    rb"|(?<=\n)(?:" + b"|".join(piece for r in RECORDS for piece in r.line_start_openings) + rb")"
)

#: Kept lines of these kinds are bounded apart from the startup lines (``Scanner._buffer_of``),
#: so that a long-running server's stats do not push its startup out.
STATS_MARKS = tuple(mark for r in RECORDS for mark in r.stats_marks)
PREEMPTION_MARKS = tuple(mark for r in RECORDS for mark in r.preemption_marks)
