"""What every renderer says the same way: the headline per symptom, number formats, the tables.

Shared by the HTML, Markdown and terminal renderers so that a number reads identically in the
ticket, the chat message and the terminal: the key numbers, and the rows of the per-path
comparison, the metrics-delta table and the startup-log facts (the HTML page and
``--verbose`` show the same rows).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, NamedTuple

from doctor.evidence.stream import FRAMINGS
from doctor.model import RERUN_INSTRUCTION, Finding, Report, Symptom, risks_of
from doctor.units import UNKNOWN, count_unit, fmt_pct, fmt_seconds, real

#: One line a reader understands without knowing the symptom names.
HEADLINES: dict[Symptom, str] = {
    Symptom.PRE_FIRST_TOKEN: "Users wait too long for the first token",
    Symptom.INTER_TOKEN: "Tokens stall once the answer has started",
    Symptom.PROXY_ONLY: "The gateway, not the engine, adds the latency",
    Symptom.HEALTHY: "Within budget on every measured path",
    Symptom.INCONCLUSIVE: "Not enough evidence for a diagnosis",
}


def headline(report: Report) -> str:
    """The verdict's one line: ``HEADLINES``, except a healthy verdict the run could not establish
    ("so far") or one beside risks, which says how many: never an unhealthy line from risks alone."""
    v = report.verdict
    if v.symptom is not Symptom.HEALTHY:
        return HEADLINES[v.symptom]
    line = HEADLINES[v.symptom] if v.conclusive else "Within budget so far, on too few answers to be sure"
    n = len(risks(report))
    return f"{line}; {n} risk{'s' if n > 1 else ''} users do not feel yet" if n else line


def risks(report: Report) -> list[Finding]:
    """What a healthy headline lists under it (``doctor.model.risks_of``: the classifier's order)."""
    return risks_of(report.findings)


#: Said at the top of every report of an interrupted collection (Ctrl-C, SIGTERM), beside the
#: verdict: a reader of the ticket must not take a partial run for a finished one.
PARTIAL_NOTE = "Partial report: the collection was interrupted; only the evidence gathered until then was analysed."


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def strip_controls(text: str) -> str:
    """Drop control characters (terminal escapes, NUL...) from text the target sent us.

    In a terminal they can move the cursor or retitle the window; in HTML and SVG they are
    parse errors. Tabs and newlines stay.
    """
    return _CONTROL.sub("", text)


_PLAIN_WORD = re.compile(r"[a-z][a-z'-]*\b")


def sentence(text: str) -> str:
    """``text`` as a sentence of its own: a check's summary starts in lower case to follow
    "LD301 proxy-buffering: ", which reads wrong at the start of a paragraph or after a full stop.
    A first word that is a name as written (``vLLM``, ``proxy_buffering``, ``max_num_seqs``) stays."""
    word = _PLAIN_WORD.match(text)
    if word is None or text[word.end():word.end() + 1] == ".":
        return text
    return text[0].upper() + text[1:]


def fmt_bytes(value: Any) -> str:
    if value is None:
        return "—"
    size = real(value)
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
    return f"{fmt_value(value)} {count_unit(value, unit)}".strip()


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


#: Stats keys whose values divide by a token count, which a stream without per-token framing estimates.
PER_TOKEN_KEYS = ("tpot",)


def _estimated(ps: dict[str, Any], key: str, text: str) -> str:
    """``text``, labelled "estimated" when it divides by token counts estimated from text length."""
    return f"{text} (estimated)" if key in PER_TOKEN_KEYS and ps.get("tokens_estimated") and text != "—" else text


def framing_cell(ps: dict[str, Any], _key: str = "framing") -> str:
    """How a path's stream was framed (``PathStats.framing``), and whether its token counts are estimated."""
    framing = ps.get("framing")
    if not framing:
        return "—"
    text = FRAMINGS.get(framing, str(framing))
    return f"{text}; token counts estimated" if ps.get("tokens_estimated") else text


def key_numbers(stream_stats: dict[str, Any] | None) -> list[tuple[str, dict[str, str]]]:
    """``[(label, {path: value})]`` from the ``stream_stats`` view; the framing row when a path is not OpenAI SSE."""
    paths = (stream_stats or {}).get("paths", {})
    rows = [(label, {name: _estimated(ps, key, fmt((ps.get(key) or {}).get(q))) for name, ps in paths.items()})
            for label, key, q, fmt in KEY_NUMBERS]
    if any(ps.get("framing") not in (None, "openai-sse") for ps in paths.values()):
        rows.append(("stream framing", {name: framing_cell(ps) for name, ps in paths.items()}))
    return rows


def _dist(q: str, fmt: Callable[[Any], str] = fmt_seconds) -> Callable[[dict[str, Any], str], str]:
    """A cell showing quantile ``q`` of a ``Dist`` in the stream-stats view."""
    return lambda ps, key: _estimated(ps, key, fmt((ps.get(key) or {}).get(q)))


#: The per-path comparison, one row per quantity: (label, stats key, how to show it).
PATH_ROWS: list[tuple[str, str, Callable[[dict[str, Any], str], str]]] = [
    ("URL", "url", lambda ps, k: fmt_value(ps.get(k))),
    ("stream framing", "framing", framing_cell),
    ("measured ok / failed / warm-up", "n_ok", lambda ps, k: f"{ps['n_ok']} / {ps['n_failed']} / {ps['n_warmup']}"),
    ("TTFT p50", "ttft", _dist("p50")),
    ("TTFT p90", "ttft", _dist("p90")),
    ("TTFT max", "ttft", _dist("max")),
    ("TPOT p50", "tpot", _dist("p50")),
    ("TPOT p90", "tpot", _dist("p90")),
    ("ITL p50 (every gap)", "itl", _dist("p50")),
    ("ITL p90", "itl", _dist("p90")),
    ("ITL max", "itl", _dist("max")),
    ("longest gap per request, p90", "max_gap", _dist("p90")),
    ("E2E p90", "e2e", _dist("p90")),
    ("headers → first token p50", "headers_to_first_token", _dist("p50")),
    ("first → last token p50", "first_to_last_token", _dist("p50")),
    ("events per read p50 / max", "events_per_read",
     lambda ps, k: f"{_dist('p50', fmt_value)(ps, k)} / {_dist('max', fmt_value)(ps, k)}"),
    ("bytes per read p50", "bytes_per_read", _dist("p50", fmt_bytes)),
    ("stalls (gap > 5 × typical gap)", "stalls", lambda ps, k: fmt_value(ps.get(k))),
    ("warm-up TTFT max", "warmup_ttft", _dist("max")),
    ("client queue p90 (scheduled → sent)", "client_queue", _dist("p90")),
    ("failures", "failures", lambda ps, k: ", ".join(f"{o} {n}" for o, n in (ps.get(k) or {}).items()) or "—"),
]


#: Columns of the witness table: who saw what users felt, with its n.
WITNESS_HEADERS = ("witness", "n", "TTFT p90", "TTFT mean", "TPOT / inter-token p90", "censored")


def _estimate_p90(e: dict[str, Any] | None) -> str:
    """A p90 as the witness knows it: exact for the probe, a bucket interval for a histogram."""
    if not e:
        return UNKNOWN
    low, high = e.get("p90_low"), e.get("p90_high")
    if e.get("mean_only"):
        return f"(mean {fmt_seconds(e.get('mean'))})"
    if high is None:
        return f"> {fmt_seconds(low)}"
    if low == high:
        return (">= " if e.get("censored") else "") + fmt_seconds(low)
    return f"{fmt_seconds(low)}–{fmt_seconds(high)}" if low else f"<= {fmt_seconds(high)}"


def witness_rows(user_felt: dict[str, Any] | None) -> list[list[str]]:
    """One row per witness of the ``user_felt`` view, in ``WITNESS_HEADERS`` order."""
    rows = []
    for w in (user_felt or {}).get("witnesses", []):
        ttft, tpot = w.get("ttft") or {}, w.get("tpot") or {}
        rows.append([strip_controls(str(w.get("label", ""))), str(ttft.get("n") or tpot.get("n") or UNKNOWN),
                     _estimate_p90(ttft), fmt_seconds(ttft.get("mean")), _estimate_p90(tpot),
                     str(ttft.get("censored") or 0) if w.get("source") == "probe" else UNKNOWN])
    return rows


def path_table(stream_stats: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """``PATH_ROWS`` filled in: one row per quantity, one cell per path."""
    paths = list(stream_stats.get("paths", {}).values())
    return [(label, [show(ps, key) for ps in paths]) for label, key, show in PATH_ROWS]


def metric_rows(mw: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The metrics-delta table: (quantity, value over the window, vLLM metric it came from)."""
    names: dict[str, str] = mw.get("metric_names") or {}
    rows: list[tuple[str, str, str]] = [
        ("source", fmt_value(mw.get("source")), ""),
        ("window", fmt_seconds(mw.get("window_s")), ""),
        ("scrapes used", fmt_value(mw.get("scrapes_used")), ""),
    ]
    for key in ("preemptions", "prompt_tokens", "generation_tokens", "prefix_cache_hits", "prefix_cache_queries"):
        value = mw.get(key)
        rows.append((key.replace("_", " "), "not exposed" if value is None else fmt_value(value), names.get(key, "")))
    for reason, count in (mw.get("finished_by_reason") or {}).items():
        rows.append((f"finished: {reason}", fmt_value(count), names.get("finished_by_reason", "")))
    for key in ("ttft", "queue", "prefill", "decode", "itl", "e2e"):
        h = mw.get(key)
        if not h:
            continue
        text = (f"n={fmt_value(h.get('count'))}, mean {fmt_seconds(h.get('mean'))}, p50 ≤ {fmt_seconds(h.get('p50_le'))}, "
                f"p90 ≤ {fmt_seconds(h.get('p90_le'))}, p99 ≤ {fmt_seconds(h.get('p99_le'))}")
        rows.append((f"{key} (server histogram)", text, h.get("metric") or names.get(key, "")))
    for key in ("kv_usage", "running", "waiting"):
        g = mw.get(key)
        if not g:
            continue
        f: Callable[[Any], str] = fmt_pct if key == "kv_usage" else fmt_value
        rows.append((f"{key.replace('_', ' ')} (gauge)", f"min {f(g.get('min'))}, max {f(g.get('max'))}, last {f(g.get('last'))}",
                     names.get(key, "")))
    return rows


class LogFactRow(NamedTuple):
    """One startup-log fact as shown: the value formatted, the log line it was read from."""

    fact: str
    value: str
    note: str | None  # how the value was inferred, e.g. "defaults to the model"
    line: str
    raw: str  # the log line itself


def log_fact_rows(log_facts: dict[str, Any]) -> list[LogFactRow]:
    """The startup-log facts table, from the ``log_facts`` view, in the view's order."""
    return [LogFactRow(key, fmt_value(f.get("value")), f.get("note") or None, fmt_value(f.get("line")),
                       fmt_value(f.get("raw")))
            for key, f in (log_facts.get("facts") or {}).items()]


def passed_count(report: Report) -> int:
    return sum(1 for r in report.results if r.outcome.value == "pass")


#: How ``doctor.checklib.rerun`` opens every verify text. Renderers do not import checks, so the
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
