"""``llm-doctor metrics FILE.prom [LATER.prom] [--json]``: read saved /metrics scrapes.

One file is read as totals since the engine started; two (or more, in the order taken) as the
window between the first and the last. Any engine whose metrics llm-doctor knows (vLLM, SGLang,
llama.cpp, TGI, trtllm-serve); the facts use the neutral names ``llm-doctor log --json`` uses.
Exit 2, with one line on stderr, when a file cannot be read or is not text, or when no file is a
usable scrape (no diagnosis); else 0. The error is never a field of the JSON: a script reading
``--json`` must not take a document for an answer.
"""

from __future__ import annotations

import sys

from doctor.engine_metrics.readings import NoWindow
from doctor.engine_metrics.window import window_from_scrapes
from doctor.engine_readers import normal
from doctor.engine_readers.capacity import capacity_from_exposition
from doctor.exit_codes import ExitCode
from doctor.foundation.console import reader_may_leave
from doctor.foundation.errors import UsageError
from doctor.probes.scrapefile import read_scrapes
from reports.metrics_summary import render_metrics_summary
from reports.shared_parts import strip_controls


def metrics_command_output(sources: list[str], as_json: bool) -> tuple[str, int]:
    """The text ``llm-doctor metrics`` prints for ``sources`` and its exit code; a ``UsageError``
    when a file cannot be read or is not text, or no file is a usable scrape."""
    scrapes, timed = read_scrapes(sources)
    for scrape in scrapes:
        if scrape.status is None:  # the file itself, not its content: the user's path
            raise UsageError(strip_controls(scrape.error or "unreadable"))
    try:
        window = window_from_scrapes(scrapes, since_start=True)
    except NoWindow as exc:  # the message may quote the file's first bytes
        raise UsageError(f"cannot use {', '.join(sources)}: {strip_controls(str(exc))}") from None
    if not timed or window.scrapes_used == 1:
        window.window_s = None  # the files' times do not tell it (a copy), or one scrape: since start
    facts = {**capacity_from_exposition(scrapes[-1].text), **normal.from_window(window)}
    engine = facts["engine"]
    text = render_metrics_summary(sources, window, facts, normal.not_exposed(engine, facts, "metrics"), as_json=as_json)
    return text, int(ExitCode.HEALTHY)


def run(sources: list[str], as_json: bool) -> int:
    """Print the output, ending in one newline; the exit code."""
    text, code = metrics_command_output(sources, as_json)
    with reader_may_leave():
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return code
