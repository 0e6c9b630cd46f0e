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

from doctor.derive.log_facts import LogFacts
from doctor.derive.metrics_window import MetricsWindow
from doctor.derive.stream_stats import PathStats, StreamStats
from doctor.derive.user_felt import Estimate, UserFelt
from doctor.derive.view_json import CounterKey, DistKey, GaugeKey, HistogramKey, Quantile, view
from doctor.engines import names as engine_names
from doctor.evidence.stream import FRAMINGS
from doctor.foundation.units import UNKNOWN, count_unit, fmt_pct, fmt_seconds, real
from doctor.model import RERUN_INSTRUCTIONS, Finding, Report, Symptom, risks_of

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


def engine_line(report: Report) -> str | None:
    """Which engine the findings name, and what told ("Engine: SGLang, by its /metrics names"), so a
    reader sees whose flags the remediation spells; an unidentified one says why its flags are not
    one engine's. None for a report from before the view."""
    engine, _ = view(report, "engine")
    if engine is None:
        return None
    if engine.id == engine_names.UNKNOWN:
        run = report.bundle.run
        # only what the run did not give: an --engine already probed does not name it again
        untried = [flag for flag, given in (("--engine URL", run.engine_url), ("--log PATH", run.log_source)) if not given]
        hint = f" ({' or '.join(untried)} would name it)" if untried else ""
        return (f"Engine: unidentified, {engine.by}: remediations name the limit and each engine's "
                f"spelling of it{hint}")
    return f"Engine: {engine_names.display(engine.id)}, by {engine.by}"


#: The numbers a reader compares first, path against path: (label, stats key, quantile, format).
#: TTFT is what users felt: the requests still waiting when the probe gave up count at their wait, as
#: in the headline ("TTFT p90 >= 1.00 s"), where the answered ones alone once showed "—".
KEY_NUMBERS: list[tuple[str, DistKey, Quantile, Callable[[Any], str]]] = [
    ("TTFT p90", "ttft_felt", "p90", fmt_seconds),
    ("TPOT p90", "tpot", "p90", fmt_seconds),
    ("longest gap p90", "max_gap", "p90", fmt_seconds),
    ("events per read p50", "events_per_read", "p50", fmt_value),
]


#: Stats keys whose values divide by a token count, which a stream without per-token framing estimates.
PER_TOKEN_KEYS: tuple[DistKey, ...] = ("tpot",)


def _estimated(ps: PathStats, key: DistKey, text: str) -> str:
    """``text``, labelled "estimated" when it divides by token counts estimated from text length."""
    return f"{text} (estimated)" if key in PER_TOKEN_KEYS and ps.tokens_estimated and text != "—" else text


def _lower_bound(ps: PathStats, key: DistKey, text: str) -> str:
    """``>= text`` for a TTFT that counts waits the probe gave up on (lower bounds)."""
    return f">= {text}" if key == "ttft_felt" and ps.ttft_censored and text != UNKNOWN else text


def framing_cell(ps: PathStats) -> str:
    """How a path's stream was framed (``PathStats.framing``), and whether its token counts are estimated."""
    framing = ps.framing
    if not framing:
        return "—"
    text = FRAMINGS.get(framing, str(framing))
    return f"{text}; token counts estimated" if ps.tokens_estimated else text


def key_numbers(stream_stats: StreamStats | None) -> list[tuple[str, dict[str, str]]]:
    """``[(label, {path: value})]`` from the ``stream_stats`` view; the framing row when a path is not OpenAI SSE."""
    paths = stream_stats.paths if stream_stats else {}
    rows: list[tuple[str, dict[str, str]]] = [(label, {name: _lower_bound(ps, key, _estimated(ps, key, fmt(getattr(getattr(ps, key), q)))) for name, ps in paths.items()})
            for label, key, q, fmt in KEY_NUMBERS]
    if any(ps.framing not in (None, "openai-sse") for ps in paths.values()):
        rows.append(("stream framing", {name: framing_cell(ps) for name, ps in paths.items()}))
    return rows


def _dist(key: DistKey, q: Quantile, fmt: Callable[[Any], str] = fmt_seconds) -> Callable[[PathStats], str]:
    """A cell showing quantile ``q`` of the ``Dist`` under ``key`` in the stream-stats view."""
    return lambda ps: _estimated(ps, key, fmt(getattr(getattr(ps, key), q)))


#: The per-path comparison, one row per quantity: (label, how to show it from a path's stats).
PATH_ROWS: list[tuple[str, Callable[[PathStats], str]]] = [
    ("URL", lambda ps: fmt_value(ps.url)),
    ("stream framing", framing_cell),
    ("measured ok / failed / warm-up", lambda ps: f"{ps.n_ok} / {ps.n_failed} / {ps.n_warmup}"),
    ("TTFT p50", _dist("ttft", "p50")),
    ("TTFT p90", _dist("ttft", "p90")),
    ("TTFT max", _dist("ttft", "max")),
    ("TPOT p50", _dist("tpot", "p50")),
    ("TPOT p90", _dist("tpot", "p90")),
    ("ITL p50 (every gap)", _dist("itl", "p50")),
    ("ITL p90", _dist("itl", "p90")),
    ("ITL max", _dist("itl", "max")),
    ("longest gap per request, p90", _dist("max_gap", "p90")),
    ("E2E p90", _dist("e2e", "p90")),
    ("headers → first token p50", _dist("headers_to_first_token", "p50")),
    ("first → last token p50", _dist("first_to_last_token", "p50")),
    ("events per read p50 / max",
     lambda ps: f"{_dist('events_per_read', 'p50', fmt_value)(ps)} / {_dist('events_per_read', 'max', fmt_value)(ps)}"),
    ("bytes per read p50", _dist("bytes_per_read", "p50", fmt_bytes)),
    ("stalls (gap > 5 × typical gap)", lambda ps: fmt_value(ps.stalls)),
    ("warm-up TTFT max", _dist("warmup_ttft", "max")),
    ("client queue p90 (scheduled → sent)", _dist("client_queue", "p90")),
    ("failures", lambda ps: ", ".join(f"{o} {n}" for o, n in ps.failures.items()) or "—"),
]


#: Columns of the witness table: who saw what users felt, with its n.
WITNESS_HEADERS = ("witness", "n", "TTFT p90", "TTFT mean", "TPOT / inter-token p90", "censored")


def _estimate_p90(e: Estimate | None) -> str:
    """A p90 as the witness knows it: exact for the probe, a bucket interval for a histogram."""
    if not e:
        return UNKNOWN
    low, high = e.p90_low, e.p90_high
    if e.mean_only:
        return f"(mean {fmt_seconds(e.mean)})"
    if high is None:
        return f"> {fmt_seconds(low)}"
    if low == high:
        return (">= " if e.censored else "") + fmt_seconds(low)
    return f"{fmt_seconds(low)}–{fmt_seconds(high)}" if low else f"<= {fmt_seconds(high)}"


def witness_rows(user_felt: UserFelt | None) -> list[list[str]]:
    """One row per witness of the ``user_felt`` view, in ``WITNESS_HEADERS`` order."""
    rows = []
    for w in user_felt.witnesses if user_felt else []:
        ttft, tpot = w.ttft, w.tpot
        rows.append([strip_controls(str(w.label)), str((ttft and ttft.n) or (tpot and tpot.n) or UNKNOWN),
                     _estimate_p90(ttft), fmt_seconds(ttft.mean if ttft else None), _estimate_p90(tpot),
                     str((ttft.censored if ttft else 0) or 0) if w.source == "probe" else UNKNOWN])
    return rows


def path_table(stream_stats: StreamStats) -> list[tuple[str, list[str]]]:
    """``PATH_ROWS`` filled in: one row per quantity, one cell per path."""
    paths = list(stream_stats.paths.values())
    return [(label, [show(ps) for ps in paths]) for label, show in PATH_ROWS]


#: The rows of the metrics-delta table, in order: counters, then server histograms, then gauges.
METRIC_COUNTERS: tuple[CounterKey, ...] = ("preemptions", "prompt_tokens", "generation_tokens", "prefix_cache_hits",
                                           "prefix_cache_queries")
#: The latency histograms the metrics table shows, in seconds (``step_tokens``, in tokens, is read by checks only).
METRIC_HISTOGRAMS: tuple[HistogramKey, ...] = ("ttft", "queue", "prefill", "decode", "itl", "e2e")
METRIC_GAUGES: tuple[GaugeKey, ...] = ("kv_usage", "running", "waiting")


def missing_metrics(mw: MetricsWindow) -> str | None:
    """What the window's /metrics lacked, one sentence for every renderer: "not exposed by SGLang:
    its /metrics has no ..." for the engine its metric names identify; with none identified
    (``engine_kind`` None) only that this /metrics had none (``not_in_metrics``), never "this vLLM"."""
    if not mw.missing:
        return None
    return engine_names.not_in_metrics(mw.engine_kind or engine_names.UNKNOWN, ", ".join(mw.missing))


def metric_rows(mw: MetricsWindow) -> list[tuple[str, str, str]]:
    """The metrics-delta table: (quantity, value over the window, vLLM metric it came from)."""
    names = mw.metric_names or {}
    rows: list[tuple[str, str, str]] = [
        ("source", fmt_value(mw.source), ""),
        ("window", fmt_seconds(mw.window_s), ""),
        ("scrapes used", fmt_value(mw.scrapes_used), ""),
    ]
    for key in METRIC_COUNTERS:
        value = getattr(mw, key)
        rows.append((key.replace("_", " "), "not exposed" if value is None else fmt_value(value), names.get(key, "")))
    for reason, count in (mw.finished_by_reason or {}).items():
        rows.append((f"finished: {reason}", fmt_value(count), names.get("finished_by_reason", "")))
    for hkey in METRIC_HISTOGRAMS:
        h = getattr(mw, hkey)
        if not h:
            continue
        text = (f"n={fmt_value(h.count)}, mean {fmt_seconds(h.mean)}, p50 ≤ {fmt_seconds(h.p50_le)}, "
                f"p90 ≤ {fmt_seconds(h.p90_le)}, p99 ≤ {fmt_seconds(h.p99_le)}")
        rows.append((f"{hkey} (server histogram)", text, h.metric or names.get(hkey, "")))
    for gkey in METRIC_GAUGES:
        g = getattr(mw, gkey)
        if not g:
            continue
        f: Callable[[Any], str] = fmt_pct if gkey == "kv_usage" else fmt_value
        rows.append((f"{gkey.replace('_', ' ')} (gauge)", f"min {f(g.min)}, max {f(g.max)}, last {f(g.last)}",
                     names.get(gkey, "")))
    return rows


class LogFactRow(NamedTuple):
    """One startup-log fact as shown: the value formatted, the log line it was read from."""

    fact: str
    value: str
    note: str | None  # how the value was inferred, e.g. "defaults to the model"
    line: str
    raw: str  # the log line itself


def log_fact_rows(log_facts: LogFacts) -> list[LogFactRow]:
    """The startup-log facts table, from the ``log_facts`` view, in the view's order."""
    return [LogFactRow(key, fmt_value(f.value), f.note or None, fmt_value(f.line), fmt_value(f.raw))
            for key, f in (log_facts.facts or {}).items()]


def passed_count(report: Report) -> int:
    return sum(1 for r in report.results if r.outcome.value == "pass")


#: How ``doctor.checklib.rerun`` opens every verify text. Renderers do not import checks, so the
#: wording is repeated here; ``tests/reports/test_report_text.py`` pins the two together.
DEMO_RERUN_INSTRUCTION = ("this demo's lab cannot be reconfigured; `llm-doctor demo --scenario healthy` "
                          "shows the state after the change")


def verify_text(report: Report, verify: str) -> str:
    """A remediation's verify text, as the reader of this report can act on it.

    A demo user typed no ``diagnose`` flags and cannot change the lab's settings, so on a demo
    run "re-run the same probe" points at the scenario that shows the fixed state instead. The
    report itself keeps the check's text: re-analysing its bundle must give the same findings.
    """
    opening = next((o for o in RERUN_INSTRUCTIONS if verify.startswith(o)), None)
    if report.bundle.run.command == "demo" and opening is not None:
        return DEMO_RERUN_INSTRUCTION + verify[len(opening):]
    return verify
