"""The verdict's words: how a witness, a decomposition, a finding and a decision are said, and the
reasoning lines built from them. No decision is taken here.

Every number is printed as the witness saw it: a probe's p90 with ``>=`` when some requests were
still waiting (a lower bound), a histogram's p90 as the bucket interval it lies in, a multiple of
a budget never rounded up to "1.0x" when within it. ``doctor.verdict.headline`` builds the one
summary sentence from these phrases.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from doctor.derive.stream_stats import StreamStats
from doctor.evidence.stream import CANCELLED, CLIENT_STALL, ProbePath
from doctor.foundation.units import fmt_pct, fmt_seconds
from doctor.model import Budgets, Component, Finding, Severity, Symptom, risks_of
from doctor.verdict.cases import Decision, Trade, TradeKind, Why
from doctor.verdict.failures import Failing, failures_of
from doctor.verdict.felt import Bursts, Felt, SoFar, Unshown
from doctor.verdict.remedy import CLASS_SYMPTOM, TRADE_KNOB, rank
from doctor.verdict.split import Split

if TYPE_CHECKING:
    from doctor.evidence import StreamEvidence

#: How the summary names a component.
COMPONENT_PHRASES: dict[str, str] = {
    "gateway": "the gateway",
    "transport": "transport between client and engine",
    "queue": "server queue time",
    "prefill": "server prefill time",
    "other": "unattributed time",
    "preemption-stalls": "preemption stalls",
    "prefill-interference": "prefill interference",
    "stalls": "stalls",
    "batch-depth": "batch depth (steady decode)",
    "token-bundling": "token bundling",
    "gpu-state": "GPU state (steady decode)",
    "decode": "steady decode",
}

NO_STREAM = "stream statistics: no stream probe ran and no server histogram saw enough requests"


def times(r: float) -> str:
    """A multiple of a budget as the reasoning prints it: ``3.0x``, ``0.13x`` (65 ms of 500 ms), never
    a within-budget value rounded up to "1.0x"."""
    return f"{r:.1f}x" if r >= 1 else f"{min(r, 0.99):.2g}x"


def _interval(low: float, high: float | None) -> str:
    if high is None:
        return f"> {fmt_seconds(low)}"
    return f"in {fmt_seconds(low)}-{fmt_seconds(high)}" if low > 0 else f"<= {fmt_seconds(high)}"


# --- witnesses --------------------------------------------------------------------------------

def ttft_text(felt: Felt) -> str:
    e = felt.witness.ttft
    if e is None:
        return "TTFT unknown"
    if not felt.witness.server:
        bound = f", {e.censored} still waiting when the probe gave up: at least" if e.censored else ""
        return f"TTFT p90 {'>= ' if e.censored else ''}{fmt_seconds(e.p90_low)} (n={e.n}{bound})".replace(": at least)", ")")
    if e.mean_only:
        return f"TTFT mean {fmt_seconds(e.mean)} (n={e.n}, no buckets for a p90)"
    return f"TTFT p90 {_interval(e.p90_low, e.p90_high)}, mean {fmt_seconds(e.mean)} (n={e.n})"


def tpot_text(felt: Felt) -> str:
    e = felt.witness.tpot
    if e is None:
        return "TPOT unknown (single-token answers)" if not felt.witness.server else "inter-token latency unknown"
    if not felt.witness.server:
        return f"TPOT p90 {fmt_seconds(e.p90_low)} (n={e.n})"
    if e.mean_only:
        return f"inter-token latency mean {fmt_seconds(e.mean)} (n={e.n} gaps, no buckets for a p90)"
    return f"inter-token latency p90 {_interval(e.p90_low, e.p90_high)}, mean {fmt_seconds(e.mean)} (n={e.n} gaps)"


def freeze_text(felt: Felt, budgets: Budgets) -> str:
    """How answers froze beyond the first-token budget; "" when they did not."""
    if not felt.froze:
        return ""
    over = f"answers freeze longer than the {fmt_seconds(budgets.ttft_s)} first-token budget"
    if felt.freezes is not None:
        fr = felt.freezes
        return f"{fr.gaps} gaps over {fmt_seconds(fr.gap_s)} across {fr.requests} requests: {over}"
    gap = felt.witness.max_gap
    assert gap is not None  # a freeze without the server's share is the probe's largest gap
    return f"largest gap p90 {'>= ' if gap.censored else ''}{fmt_seconds(gap.p90_low)} (n={gap.n}): {over}"


def felt_line(felt: Felt, budgets: Budgets) -> str:
    """The witness's numbers against each budget, over or within."""
    def state(excess: float) -> str:
        return "over" if excess > 0 else "within"

    text = (f"{felt.witness.label}: {ttft_text(felt)} vs budget {fmt_seconds(budgets.ttft_s)} "
            f"({state(felt.ttft_excess)}); {tpot_text(felt)}")
    if felt.witness.tpot is not None:
        text += f" vs budget {fmt_seconds(budgets.tpot_s)} ({state(felt.tpot_excess)})"
    if felt.froze:
        text += f"; {freeze_text(felt, budgets)}"
    return text


def who(f: Felt) -> str:
    return f.witness.label if f.witness.server else f"{f.path} (the probe)"


# --- the run: failures, the client, notes ------------------------------------------------------

def path_notes(stats: StreamStats | None, budgets: Budgets) -> list[str]:
    """Per path: failed requests, and what was set apart from the timings (and why)."""
    lines: list[str] = []
    for name, ps in (stats.paths.items() if stats is not None else ()):
        failures = failures_of(ps)
        n_failed = sum(failures.values())
        if n_failed:
            lines.append(f"{name}: {n_failed} of {ps.n_ok + n_failed} requests failed "
                         f"({', '.join(f'{k} x{v}' for k, v in failures.items())})")
        if ps.failures.get(CANCELLED):
            lines.append(f"{name}: {ps.failures[CANCELLED]} request(s) cancelled when the run was interrupted")
        if ps.failures.get(CLIENT_STALL):
            lines.append(f"{name}: {ps.failures[CLIENT_STALL]} request(s) not counted: the client itself froze "
                         "past the stall timeout, so whether the server answered is unknown")
        if ps.client_frozen.n and ps.client_frozen.max is not None:
            lines.append(f"{name}: the client itself froze during {ps.client_frozen.n} request(s), "
                         f"{fmt_seconds(ps.client_frozen.max)} at most: taken out of their timings "
                         "(each a lower bound), not blamed on the server")
        if ps.ttft_censored:
            lines.append(f"{name}: {ps.ttft_censored} request(s) still had no first token when the probe gave up: "
                         "counted in TTFT at that wait (a lower bound), not dropped")
        warm = ps.warmup_ttft
        if warm.n and warm.max is not None and warm.max > budgets.ttft_s:
            lines.append(f"{name}: warm-up TTFT {fmt_seconds(warm.max)} (n={warm.n}) is over the budget; set aside "
                         "as a possible cold start (LD103 weighs it), not dropped from the report")
    return lines


def failing_text(f: Failing) -> str:
    """``8 of 10 gateway requests failed (http-status x8: HTTP 502)``."""
    error = ""
    if f.first is not None:
        error = f"HTTP {f.first.status}" if f.outcome == "http-status" and f.first.status else (f.first.error or "")
    detail = f"{f.outcome} x{f.count}" + (f": {error[:120]}" if error else "")
    every = "every one of" if f.failed == f.total else f"{f.failed} of"
    return f"{every} {f.total} {f.path} requests failed ({detail})"


def failed_note(failed: int, measured: int) -> str:
    return f"; {failed} of {measured} requests failed" if failed else ""


def suspect_note(stream: StreamEvidence | None) -> str:
    """What the client's self-check doubts, when it doubts the timings."""
    if stream is None or not stream.client.suspect:
        return ""
    return "; the client may have distorted these timings (" + "; ".join(stream.client.reasons or ["self-check"]) + ")"


def self_check(stream: StreamEvidence) -> str:
    return "client self-check: " + "; ".join(stream.client.reasons or ["suspect"])


def bursts_text(b: Bursts) -> str:
    every = f" every {fmt_seconds(b.pace_s)}" if b.pace_s is not None else ""
    return (f"delivered in bursts of {b.gateway_events:.0f} tokens{every} (gateway {b.gateway_events:.1f} "
            f"events per read vs direct {b.direct_events:.1f}): the gateway holds the stream back")


def so_far_text(s: SoFar) -> str:
    """``"23 of the 29 fast answers needed on direct"``, with why the run ended."""
    why = f" ({s.stopped})" if s.stopped else ""
    return f"{s.fast} of the {s.needed} fast answers needed on {s.path}{why}"


# --- decompositions ----------------------------------------------------------------------------

def split_basis(split: Split) -> str:
    """What the shares are of, with its numbers (``direct TTFT mean 1.2 s (n=30)``)."""
    note = " gaps" if split.gaps else ", every user's requests" if split.server else ""
    return f"{split.label} {fmt_seconds(split.seconds)} (n={split.count:.0f}{note})"


def split_whole(split: Split) -> str:
    """The mean as a headline names it (``the server's TTFT mean 13.1 s``)."""
    of = "the server's" if split.server else f"the {split.of}"
    return f"{of} {split.measure} {fmt_seconds(split.seconds)}"


def split_line(split: Split) -> str:
    parts = [f"{c.name} {fmt_seconds(c.seconds or 0.0)} ({fmt_pct(c.share or 0.0)})" for c in split.components]
    return f"{split_basis(split)} splits into " + ", ".join(parts)


def slow_basis(whole: float, count: int) -> str:
    """What the slow requests' hops add up to (``the 2 slowest requests' TTFT 9.80 s``)."""
    return f"the {count} slowest request{'s' if count != 1 else ''}' TTFT {fmt_seconds(whole)} (the engine's span of each)"


def slow_line(components: list[Component], basis: str) -> str:
    """The slow requests' own split, the largest hops first: what the mean split above cannot show."""
    parts = [f"{c.name} {fmt_seconds(c.seconds or 0.0)} ({fmt_pct(c.share or 0.0)})" for c in components[:3]]
    return f"{basis} splits into " + ", ".join(parts)


# --- findings and the decision -----------------------------------------------------------------

def fix(primary: Finding | None) -> str:
    return f"; change {primary.remediation.setting} ({primary.code})" if primary is not None else ""


def primary_line(primary: Finding | None) -> list[str]:
    return [f"{primary.code} {primary.name}: {primary.summary}"] if primary is not None else []


def decision_text(d: Decision, felts: list[Felt], probe: dict[str, Felt], servers: list[Felt],
                  bursts: Bursts | None, ttft_split: Split) -> str:
    """The sentence that justifies the symptom, with each witness's multiple of its budget."""
    direct, gateway = probe.get(ProbePath.DIRECT), probe.get(ProbePath.GATEWAY)
    if d.why is Why.BURSTS and bursts is not None and direct is not None and gateway is not None:
        return (f"{bursts_text(bursts)}, and the gateway's TTFT p90 is {times(gateway.ttft_ratio)} its "
                f"budget against {times(direct.ttft_ratio)} direct: the gateway adds it")
    if d.why is Why.GATEWAY_ALONE:
        within = "the direct path" + (" and the server's histograms" if servers else "") if direct else "the server's histograms"
        return f"{within} are within budget and the gateway path is not: the gateway adds it"
    ttft = max(felts, key=lambda f: f.ttft_excess)
    tpot = max(felts, key=lambda f: f.tpot_excess)
    freeze = max(felts, key=lambda f: f.freeze_excess)
    ratios = (f"TTFT p90 is {times(ttft.ttft_ratio)} its budget ({ttft.witness.label}), TPOT p90 "
              f"{times(tpot.tpot_ratio)} its budget ({tpot.witness.label})")
    if freeze.freeze_excess > 0:
        ratios += f", the freezes {times(freeze.freeze_ratio)} the first-token budget ({freeze.witness.label})"
    gw = ttft_split.part("gateway")
    if d.why is Why.GATEWAY_MAJORITY and gw is not None:
        return f"{ratios}; the gateway holds {fmt_pct(gw.share or 0.0)} of the first-token time"
    if d.why is Why.ONLY_GATEWAY_CHECKS:
        return f"{ratios}; only the gateway was measured and only gateway checks fired"
    if d.why is Why.ONLY_GATEWAY_UNEXPLAINED:
        return f"{ratios}; only the gateway was measured and no check explains it"
    if d.why is Why.ONLY_GATEWAY_BOTH:
        return f"{ratios}; only the gateway was measured and both gateway and engine checks fired"
    if d.why is Why.KV_PREEMPTION and d.finding is not None:
        return (f"{ratios}; but {d.finding.code} saw the KV cache run out ({d.finding.summary.split(';')[0]}), "
                "which both freezes answers and queues new requests (preempted ones back in the queue): "
                "the inter-token cause decides")
    if d.why is Why.FIRST_TOKEN:
        return f"{ratios}: the excess lies before the first token"
    return f"{ratios}: the excess lies between tokens"


def trade_text(t: Trade) -> str:
    """The sentence of a compound incident: what the one knob trades."""
    i = t.interference
    lower = f"lowering {TRADE_KNOB} (to {i.remediation.suggested}" + (
        f", now {i.remediation.current})" if i.remediation.current else ")")
    cost = "costs the long prompts' own TTFT (their prefill spread over more, shorter steps)"
    if t.kind is TradeKind.FREEZES:
        return f"one knob trades two symptoms ({i.code}): {lower} shortens the freezes users felt, and {cost}"
    if t.kind is TradeKind.RAISE and t.primary is not None:
        return (f"one knob trades two symptoms ({i.code} beside {t.primary.code}): raising {TRADE_KNOB} would "
                "shorten long prompts' own first token, and lengthen every running stream's freezes")
    return (f"one knob trades two symptoms ({i.code}): other users' long prefills both freeze running answers "
            f"and hold new requests behind their steps; {lower} lets waiting requests start sooner and ends "
            f"the freezes, and {cost}")


def other_classes(symptom: Symptom, severe: list[Finding], felts: list[Felt]) -> list[str]:
    """Why the verdict's class wins over a severe finding of another latency class, with numbers."""
    lines = []
    ttft = max(f.ttft_ratio for f in felts)
    inter = max(max(f.tpot_ratio, f.freeze_ratio) for f in felts)
    larger = (symptom is Symptom.PRE_FIRST_TOKEN and ttft >= inter) or (symptom is Symptom.INTER_TOKEN and inter >= ttft)
    why = "its excess is the larger" if larger else "of the cause above"
    for f in sorted(severe, key=rank):
        other = CLASS_SYMPTOM[f.symptom]
        if other is symptom:
            continue
        lines.append(f"{f.code} {f.name} ({f.severity.value}) speaks to {other.value}; {symptom.value} decides as "
                     f"{why} (TTFT p90 {times(ttft)} its budget, inter-token {times(inter)})")
    return lines


def scaler_lines(scalers: list[Finding]) -> list[str]:
    """The autoscaler findings beside the engine's own knob (``remedy.scaler_context``), each with its change."""
    return [f"the autoscaler did not add a replica either: {f.code} {f.name}: {f.summary} (its own change: "
            f"{f.remediation.setting} -> {f.remediation.suggested})" for f in scalers]


def finding_decides(top: Finding) -> str:
    return (f"every witness is within budget, but {top.code} {top.name} ({top.severity.value}) is a "
            f"finding of the {top.symptom.value} class: it decides the verdict")


def gateway_fails(failing: Failing) -> str:
    return f"{failing_text(failing)} while direct requests succeed: the gateway fails them"


def never_healthy(worst: Failing) -> str:
    return f"{failing_text(worst)}: a failing path is never healthy"


def warmup_text(warmups: dict[str, float], budgets: Budgets) -> str:
    """``the direct warm-up's first token took 1.51 s (3.0x the 500 ms budget; set aside ...)``; "" without one."""
    if not warmups:
        return ""
    each = ", ".join(f"the {path} warm-up's first token took {fmt_seconds(t)} ({times(t / budgets.ttft_s)} the "
                     f"{fmt_seconds(budgets.ttft_s)} budget)" for path, t in warmups.items())
    return f"{each}, set aside as a possible cold start (LD103 weighs it)"


def unshown_text(u: Unshown, budgets: Budgets) -> str:
    """Why no witness shows the first token within budget: waits cut below it, or no TTFT at all."""
    if u.open:
        what = "; ".join(f"{who(f)}: {ttft_text(f)}" for f in u.open)
        text = (f"{what}: a wait the probe gave up on below the {fmt_seconds(budgets.ttft_s)} budget says "
                "nothing about it")
    else:
        text = "no witness measured a first token" + (" after the warm-up" if u.warmups else "")
    if u.cut:
        text += f" (the --deadline cut {u.cut} request(s))"
    warm = warmup_text(u.warmups, budgets)
    return text + (f"; {warm}" if warm else "") + ": not a conclusive healthy verdict"


def not_conclusive(s: SoFar) -> str:
    text = so_far_text(s)
    return f"{text[0].upper()}{text[1:]}: not a conclusive healthy verdict"


def also(symptom: Symptom, severe: list[Finding]) -> str:
    others = sorted({f.code for f in severe if CLASS_SYMPTOM[f.symptom] is not symptom})
    return f" (also {', '.join(others)}: see the reasoning)" if others else ""


def review(findings: list[Finding]) -> str:
    """What a healthy verdict leaves to review: felt findings of no latency class (an error, a GPU
    fault) counted by their real severity, then the risks, the first with its one line."""
    by: dict[str, list[str]] = {}
    for f in sorted(findings, key=rank):
        if f.felt and f.severity.rank >= Severity.WARNING.rank:
            by.setdefault(f.severity.value, []).append(f.code)
    text = "; findings to review: " + ", ".join(f"{len(codes)} {sev} ({', '.join(codes)})"
                                                 for sev, codes in by.items()) if by else ""
    risks = risks_of(findings)
    if risks:
        first = risks[0]
        more = f" ({', '.join(f.code for f in risks)})" if len(risks) > 1 else ""
        text += (f"; {len(risks)} risk{'s' if len(risks) > 1 else ''}{more}, not felt yet: "
                 f"{first.code} {first.name}: {first.summary}")
    return text
