"""The ``llm-doctor log`` output: what the startup-log parser found, for a human or a script.

Beside ``stream_summary`` (``probe``) because it is a renderer: it gets the evidence read and
the facts parsed, and only words them. What the command was asked for (the summary, or the JSON
document) goes to stdout; why the log could not be used goes to stderr (``log_problems``), so a
pipe into ``jq`` or a cron mail's body holds only the answer. Values longer than ``_VALUE_WIDTH``
are shortened in the text (never in the JSON); a startup error is wrapped, never cut: its last
sentence is vLLM's own advice. Everything is redacted, as every output is.
"""

from __future__ import annotations

import json
import textwrap
from typing import Any

from doctor.engine_readers import normal
from doctor.engines.names import ENGINE_NOR_LIST, UNKNOWN, VLLM, display
from doctor.evidence.errors import EvidenceError
from doctor.evidence.log import LogEvidence
from doctor.foundation.redact import Redactor
from doctor.foundation.serial import to_jsonable
from doctor.logscan.parsed import LogFacts, StatsPoint

_VALUE_WIDTH = 60  # a fact's value longer than this is shortened in the text output (never in JSON)
_WIDTH = 100  # startup errors are wrapped to this many columns: cron mail and terminals alike


def render_log_summary(
    source: str, evidence: LogEvidence | None, facts: LogFacts | None, read_errors: list[EvidenceError], *, as_json: bool
) -> str:
    """What ``llm-doctor log`` prints on stdout for ``source``: JSON or text, redacted; empty
    text when the log could not be read (``log_problems`` says why)."""
    if as_json:
        return Redactor().text(_json(source, evidence, facts, read_errors))
    return Redactor().text(_text(source, evidence, facts))


def log_problems(source: str, evidence: LogEvidence | None, facts: LogFacts | None, read_errors: list[EvidenceError]) -> list[str]:
    """What ``llm-doctor log`` prints on stderr: why the log was not used, or was used only in
    part (one message each, redacted)."""
    problems = [e.message for e in read_errors]
    if evidence is None:
        problems = problems or [f"cannot use the log {source}"]
    elif facts is None or facts.empty:
        whose = f" (engine unidentified: {facts.identified_by})" if facts is not None and facts.engine == UNKNOWN else ""
        problems.append(f"no {ENGINE_NOR_LIST} startup, stats or error line found in {source}{whose}: "
                        "is this an engine's log?")
    return [Redactor().text(p) for p in problems]


def _json(source: str, evidence: LogEvidence | None, facts: LogFacts | None, read_errors: list[EvidenceError]) -> str:
    document: dict[str, Any] = {
        "source": source,
        "engine": None,
        "lines_total": evidence.lines_total if evidence else None,
        "bytes_total": evidence.bytes_total if evidence else None,
        "lines_kept": len(evidence.matched) if evidence else 0,
        "truncated": evidence.truncated if evidence else False,
        "read_errors": to_jsonable(read_errors),
        "facts": {},
        "provenance": {},
        "errors": [],
        "stats": [],
        "startups": [],
        "preemption_warnings": 0,
        "preemptions_cumulative": None,
    }
    if facts is not None:
        document["engine"] = facts.engine
        document["identified_by"] = facts.identified_by
        document["facts"] = facts_document(facts)
        document["not_exposed"] = normal.not_exposed(facts.engine, document["facts"])
        document["provenance"] = {
            key: {k: v for k, v in (("line", f.line), ("raw", f.raw), ("note", f.note)) if v is not None}
            for key, f in facts.facts.items()
        }
        document["errors"] = to_jsonable(facts.errors)
        document["stats"] = to_jsonable(facts.stats)
        document["startups"] = to_jsonable(facts.startups)
        document["preemption_warnings"] = facts.preemption_warnings
        document["preemptions_cumulative"] = facts.preemptions_cumulative
    return json.dumps(document, indent=2, default=str)


def facts_document(facts: LogFacts) -> dict[str, Any]:
    """The ``facts`` object: what the log states, under the neutral names every engine shares
    (``doctor.engine_readers.normal``) beside the parser's own keys; vLLM-only key names are left out of
    another engine's (its neutral name says the same)."""
    document = {key: fact.value for key, fact in facts.facts.items()
                if facts.engine == VLLM or key not in normal.VLLM_ONLY_KEYS}
    document.update(normal.from_log(facts))
    return document


def _text(source: str, evidence: LogEvidence | None, facts: LogFacts | None) -> str:
    if evidence is None:
        return ""
    out = [f"{source}: {evidence.lines_total:,} lines, {len(evidence.matched):,} kept"
           + (" (oldest stats or startup lines dropped to bound memory)" if evidence.truncated else "")]
    if facts is None or facts.empty:
        return "\n".join(out)
    if facts.engine != VLLM:
        out.append(f"engine: {display(facts.engine)} (facts under vLLM's names, each noting {display(facts.engine)}'s own)")
    if len(facts.startups) > 1:
        out.append(f"{len(facts.startups)} startups; facts are from the last (from line {facts.startups[-1].first_line}):")
        for s in facts.startups:
            failed = f", errors: {', '.join(s.errors)}" if s.errors else ""
            out.append(f"  lines {s.first_line}-{s.last_line}: {display(facts.engine)} {s.version or '?'} {s.engine_generation or ''}{failed}")
    if facts.facts:
        out.append("")
        out.append("facts (line: where the log says it)")
        width = max(len(k) for k in facts.facts)
        for key, fact in facts.facts.items():
            where = f"line {fact.line}" if fact.line else ""
            row = f"  {key:<{width}}  {_show(fact.value):<24} {where}".rstrip()
            note = f"({fact.note})" if fact.note else ""
            if note and len(row) + 2 + len(note) <= _WIDTH:
                row, note = f"{row}  {note}", ""
            out.append(row)
            if note:  # on lines of its own, under the value
                out += textwrap.wrap(note, _WIDTH, initial_indent=" " * (width + 4), subsequent_indent=" " * (width + 5))
    if facts.errors:
        out.append("")
        out.append("startup errors")
        for error in facts.errors:
            out += textwrap.wrap(f"[{error.kind}] line {error.line}: {error.message}", _WIDTH,
                                 initial_indent="  ", subsequent_indent="      ", break_on_hyphens=False,
                                 break_long_words=False)
    if facts.preemption_warnings:
        total = f", cumulative count {facts.preemptions_cumulative}" if facts.preemptions_cumulative else ""
        out.append(f"\npreemption warnings: {facts.preemption_warnings}{total}")
    if stats := facts.last_stats:
        out.append("")
        out.append(_stats_summary(stats))
        if earlier := len(facts.stats) - len(stats):
            out.append(f"  (from the last startup; {earlier:,} stats lines of earlier startups left out)")
    return "\n".join(out)


def _stats_summary(stats: list[StatsPoint]) -> str:
    first, last = stats[0], stats[-1]
    lines = [f"stats: {len(stats)} lines, {first.timestamp or f'line {first.line}'} .. {last.timestamp or f'line {last.line}'}"]
    for label, attr, unit in (
        ("running", "running", ""),
        ("waiting", "waiting", ""),
        ("swapped", "swapped", ""),
        ("KV cache usage", "kv_usage_pct", " %"),
        ("prefix cache hit rate", "prefix_cache_hit_pct", " %"),
        ("prompt throughput", "prompt_throughput", " tok/s"),
        ("generation throughput", "generation_throughput", " tok/s"),
        ("preemptions per interval", "preemptions", ""),
    ):
        values = [v for v in (getattr(p, attr) for p in stats) if v is not None]
        if values:
            lines.append(f"  {label:<24} min {_show(min(values))}{unit}, max {_show(max(values))}{unit}, last {_show(values[-1])}{unit}")
    return "\n".join(lines)


def _show(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 100_000 else str(value)  # token counts, not ports
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (dict, list)):
        return _short(json.dumps(value, default=str))
    return _short(str(value))


def _short(text: str) -> str:
    return text if len(text) <= _VALUE_WIDTH else text[: _VALUE_WIDTH - 1] + "…"
