"""A saved /metrics scrape read from a file, as the ``Scrape`` a live probe would have stored.

``llm-doctor metrics FILE.prom [LATER.prom]`` reads what someone saved with ``curl /metrics``;
this probe is its only side effect. The file's modification time stands in for the scrape time,
so two files make a window of the seconds between them, when those times tell it. A file that
cannot be read, or is not text, becomes a ``Scrape`` with its ``error`` (and no ``status``): the
command refuses it in one line; never a traceback. A scrape pasted into Markdown (an issue, a PR)
and saved from there carries its escapes (a backslash before ``#`` or ``_``); they are taken out,
as a reader of the page sees them.
"""

from __future__ import annotations

import itertools
import os
import re

from doctor.evidence import Scrape

MAX_BYTES = 64 << 20  # far beyond any engine's exposition; bounds what a wrong path can cost
MIN_GAP_S = 1.0  # files written closer together are copies (a checkout, cp), not scrapes in time
_MARKDOWN_ESCAPED = re.compile(r"^\\#|[\w:]\\_", re.MULTILINE)  # a comment or a metric name escaped for Markdown
_MARKDOWN_ESCAPE = re.compile(r"\\([#_*])")


def read_scrape(path: str) -> Scrape:
    """The scrape saved at ``path``, timed by its modification time."""
    try:
        with open(path, "rb") as stream:
            wall = os.fstat(stream.fileno()).st_mtime
            data = stream.read(MAX_BYTES + 1)
    except OSError as exc:
        return Scrape(phase="file", t=0.0, wall=0.0, error=f"cannot read {path}: {exc.strerror or exc}")
    if len(data) > MAX_BYTES:
        return Scrape(phase="file", t=0.0, wall=wall, error=f"{path} is over {MAX_BYTES >> 20} MiB: not a /metrics scrape")
    if b"\0" in data:  # a binary file (a core dump, a tarball): its bytes must never reach a terminal
        return Scrape(phase="file", t=0.0, wall=wall, error=f"{path} is not a text file: a saved /metrics scrape is text")
    text = data.decode("utf-8", "replace")
    if _MARKDOWN_ESCAPED.search(text):
        text = _MARKDOWN_ESCAPE.sub(r"\1", text)
    return Scrape(phase="file", t=0.0, wall=wall, status=200, content_type="text/plain", text=text)


def read_scrapes(paths: list[str]) -> tuple[list[Scrape], bool]:
    """The scrapes in ``paths``, in the order given (the order taken), timed from the first by
    their files' modification times; and whether those times tell the seconds between them. A
    copied file keeps no scrape time: when the times do not increase by at least ``MIN_GAP_S``, the
    scrapes are one second apart in order, and the window's length is unknown."""
    scrapes = [read_scrape(path) for path in paths]
    walls = [s.wall for s in scrapes]
    timed = all(a > 0 and b - a >= MIN_GAP_S for a, b in itertools.pairwise(walls))
    for i, scrape in enumerate(scrapes):
        scrape.t = scrape.wall - walls[0] if timed else float(i)
    return scrapes, timed
