"""The ``llm-doctor metrics`` output: what saved /metrics scrapes say, for a human or a script.

Beside ``log_summary`` and for the same reason: it gets the window computed and the facts read,
and only words them. The ``facts`` object uses the neutral names ``llm-doctor log --json`` uses
(``doctor.engine_readers.normal``), whichever engine was scraped; the redactor runs over the result.
"""

from __future__ import annotations

import json
from typing import Any

from doctor.engine_metrics.views import MetricsWindow
from doctor.engines.names import UNKNOWN, display
from doctor.foundation.redact import Redactor
from doctor.foundation.serial import to_jsonable


def render_metrics_summary(
    sources: list[str], window: MetricsWindow, facts: dict[str, Any], not_exposed: dict[str, str], *, as_json: bool,
) -> str:
    """What ``llm-doctor metrics`` prints: JSON or text, redacted."""
    if as_json:
        document = {
            "sources": sources,
            "engine": facts.get("engine"),
            "facts": facts,
            "not_exposed": not_exposed,
            "window": to_jsonable(window),
        }
        text = json.dumps(document, indent=2, default=str)
    else:
        text = _text(sources, window, facts, not_exposed)
    return Redactor().text(text)


def _text(sources: list[str], window: MetricsWindow, facts: dict[str, Any], not_exposed: dict[str, str]) -> str:
    if window.scrapes_used == 1:
        span = "totals since the engine started"
    elif window.window_s is None:
        span = f"window of {window.scrapes_used} scrapes (the files' times do not tell its length)"
    else:
        span = f"window of {window.window_s:g} s"
    out = [f"{', '.join(sources)}: {display(facts.get('engine') or UNKNOWN)}'s metrics, {span}"]  # none known: not vLLM's
    for key, value in facts.items():
        if key != "engine":
            out.append(f"  {key:<22} {value:g}" if isinstance(value, float) else f"  {key:<22} {value}")
    out += [f"  {key:<22} {why}" for key, why in not_exposed.items()]
    for name in ("ttft", "queue", "itl", "e2e"):
        hist = getattr(window, name)
        if hist is not None and hist.count:
            mean = f"mean {hist.mean:.3g} s" if hist.mean is not None else "mean ?"
            p90 = f", p90 <= {hist.p90_le:g} s" if hist.p90_le is not None else ""
            out.append(f"  {name:<22} n={hist.count:g}, {mean}{p90} ({hist.metric})")
    if window.missing:
        out.append(f"  not in the scrape: {', '.join(window.missing)}")
    out += [f"  note: {note}" for note in window.notes]
    return "\n".join(out)
