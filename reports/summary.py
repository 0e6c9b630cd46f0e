"""What every renderer says the same way: the headline per symptom, number formats, key numbers.

Shared by the HTML, Markdown and terminal renderers so that a number reads identically in the
ticket, the chat message and the terminal.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from doctor.model import RERUN_INSTRUCTION, Report, Symptom
from doctor.units import fmt_seconds

#: One line a reader understands without knowing the symptom names.
HEADLINES: dict[Symptom, str] = {
    Symptom.PRE_FIRST_TOKEN: "Users wait too long for the first token",
    Symptom.INTER_TOKEN: "Tokens stall once the answer has started",
    Symptom.PROXY_ONLY: "The gateway, not the engine, adds the latency",
    Symptom.HEALTHY: "Within budget on every measured path",
    Symptom.INCONCLUSIVE: "Not enough evidence for a diagnosis",
}


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def strip_controls(text: str) -> str:
    """Drop control characters (terminal escapes, NUL...) from text the target sent us.

    In a terminal they can move the cursor or retitle the window; in HTML and SVG they are
    parse errors. Tabs and newlines stay.
    """
    return _CONTROL.sub("", text)


def fmt_bytes(value: Any) -> str:
    if value is None:
        return "—"
    size = float(value)
    for unit in ("B", "KiB", "MiB"):
        if abs(size) < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"


def fmt_value(value: Any) -> str:
    """A table cell: "—" for unknown, compact JSON for containers, 4 significant digits for floats."""
    if value is None or value == "":
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    return str(value)


def fmt_evidence(value: Any, unit: str) -> str:
    """An evidence value with its unit; seconds and bytes formatted like every other number."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if unit == "s" and number:
        return fmt_seconds(value)
    if unit == "B" and number:
        return fmt_bytes(value)
    return f"{fmt_value(value)} {unit}".strip()


def view(report: Report, name: str) -> tuple[dict[str, Any] | None, str | None]:
    """A derived view and, when it is absent, the reason."""
    data = report.views.get(name)
    if not isinstance(data, dict):
        return None, f"{name} was not computed"
    if set(data) == {"missing"}:
        return None, data["missing"] or f"{name} is missing"
    return data, None


#: The numbers a reader compares first, path against path: (label, stats key, quantile, format).
KEY_NUMBERS: list[tuple[str, str, str, Callable[[Any], str]]] = [
    ("TTFT p90", "ttft", "p90", fmt_seconds),
    ("TPOT p90", "tpot", "p90", fmt_seconds),
    ("longest gap p90", "max_gap", "p90", fmt_seconds),
    ("events per read p50", "events_per_read", "p50", fmt_value),
]


def key_numbers(stream_stats: dict[str, Any] | None) -> list[tuple[str, dict[str, str]]]:
    """``[(label, {path: value})]`` from the ``stream_stats`` view."""
    paths = (stream_stats or {}).get("paths", {})
    return [(label, {name: fmt((ps.get(key) or {}).get(q)) for name, ps in paths.items()})
            for label, key, q, fmt in KEY_NUMBERS]


def passed_count(report: Report) -> int:
    return sum(1 for r in report.results if r.outcome.value == "pass")


#: How ``checks._engine.rerun`` opens every verify text. Renderers do not import checks, so the
#: wording is repeated here; ``tests/test_report_text.py`` pins the two together.
DEMO_RERUN_INSTRUCTION = ("this demo's lab cannot be reconfigured; `llm-doctor demo --scenario healthy` "
                          "shows the state after the change")


def verify_text(report: Report, verify: str) -> str:
    """A remediation's verify text, as the reader of this report can act on it.

    A demo user typed no ``diagnose`` flags and cannot change the lab's settings, so on a demo
    run "re-run the same probe" points at the scenario that shows the fixed state instead. The
    report itself keeps the check's text: re-analysing its bundle must give the same findings.
    """
    if report.bundle.run.command == "demo" and verify.startswith(RERUN_INSTRUCTION):
        return DEMO_RERUN_INSTRUCTION + verify[len(RERUN_INSTRUCTION):]
    return verify
