"""A saved /metrics scrape read from a file, as the ``Scrape`` a live probe would have stored.

``llm-doctor metrics FILE.prom [LATER.prom]`` reads what someone saved with ``curl /metrics``;
this probe is its only side effect. The file's modification time stands in for the scrape time,
so two files make a window of the seconds between them. A file that cannot be read becomes a
``Scrape`` with its ``error``, which the window reports like a failed GET; never a traceback.
"""

from __future__ import annotations

import os

from doctor.evidence import Scrape

MAX_BYTES = 64 << 20  # far beyond any engine's exposition; bounds what a wrong path can cost


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
    return Scrape(phase="file", t=0.0, wall=wall, status=200, content_type="text/plain", text=data.decode("utf-8", "replace"))


def read_scrapes(paths: list[str]) -> list[Scrape]:
    """The scrapes in ``paths``, in the order given, timed from the first (a file saved earlier
    than the one before it counts as taken one second after it: the order given is the order)."""
    scrapes = [read_scrape(path) for path in paths]
    t = 0.0
    for previous, scrape in zip([None, *scrapes], scrapes, strict=False):
        if previous is not None:
            t += max(scrape.wall - previous.wall, 1.0) if scrape.wall and previous.wall else 1.0
        scrape.t = t
    return scrapes
