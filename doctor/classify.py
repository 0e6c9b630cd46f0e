"""The classifier: which symptom dominates, why (with numbers), and the ONE remediation.

A pure function of the evidence views and the check results, in four steps:

1. **What users felt.** Client TTFT p90 and TPOT p90 per path (with ``n``) against the budgets,
   and freezes inside answers (the p90 of each answer's largest gap) against the first-token
   budget, since a reader waits for those as for a first token.
2. **Where it went.** Two decompositions, in seconds. First token, on the path users take
   (the gateway when there is one): gateway share (gateway minus direct TTFT mean), transport
   (direct client TTFT mean minus the server's), server queue and server prefill (histogram
   means). Inter-token time, on the engine path (direct when there is one): stalls (gaps over
   ``STALL_FACTOR`` x the request's median, above that median), token bundling (per-chunk time
   beyond per-token time), and the steady decode left. Stalls are preemption stalls when
   preemptions were counted, else prefill interference when that check fired; steady decode is
   the GPU's state or the batch depth when those checks fired. Components are means over the
   window (server histograms give nothing else), so each share is of the decomposed mean; the
   excess over budget is attributed in the same proportions. Steady decode within the TPOT budget
   is no excess, so it counts only above that budget when the dominant component is chosen.
3. **The symptom.** ``proxy-only`` when the direct path is within budget and the gateway path is
   not, or when the gateway holds most of the first-token time. Otherwise the symptom whose p90
   is furthest over its budget, *relative to that budget* (each budget says what users accept
   for that part of the experience, so 3x the TTFT budget outweighs 1.2x the TPOT budget
   whatever the answer length). With only a gateway path and no server metrics, the findings
   decide; when they cannot, the verdict is ``inconclusive`` and says what is missing.
4. **One remediation.** The finding whose ``cause`` explains the largest component of the
   symptom's decomposition (most severe first; ``FALLBACK_CAUSES`` when no direct cause fired);
   else the most severe finding of the symptom's class. The renderers list the other findings.
   Requests cancelled by an interrupt are not failures: they are counted apart.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

from doctor.derive import Missing
from doctor.derive.chunking import tokens_per_chunk
from doctor.derive.stream_stats import STALL_FACTOR, PathStats, StreamStats
from doctor.evidence.stream import CANCELLED
from doctor.model import (
    CheckResult,
    Component,
    Decomposition,
    Finding,
    Outcome,
    Severity,
    Symptom,
    SymptomClass,
    Verdict,
)
from doctor.units import fmt_pct, fmt_seconds

if TYPE_CHECKING:
    from doctor.derive.metrics_window import MetricsWindow
    from doctor.evidence import StreamEvidence
    from doctor.runner import Evidence


@dataclass
class Budgets:
    """What users should feel: the usual interactive-chat targets by default."""

    ttft_s: float = 0.5
    tpot_s: float = 0.05


#: Decomposition component -> the finding causes (``doctor.check.CAUSES``) that explain it.
COMPONENT_CAUSES: dict[str, tuple[str, ...]] = {
    "gateway": ("buffering", "compression", "gateway-serialisation", "gateway-overhead", "proxy-timeout"),
    "transport": ("transport",),
    "queue": ("queue",),
    "prefill": ("prefill",),
    "preemption-stalls": ("preemption",),
    "prefill-interference": ("prefill-interference",),
    "stalls": ("preemption", "prefill-interference"),
    "batch-depth": ("batch-depth",),
    "token-bundling": ("token-bundling",),
    "gpu-state": ("gpu-state",),
    "decode": ("batch-depth", "gpu-state", "decode"),
}

#: Causes that explain a component only when none of ``COMPONENT_CAUSES`` fired: a queue that
#: builds under load alone (LD504, LD505) says to add capacity, while a batch limit (LD101)
#: names the engine setting, which is the more specific change.
FALLBACK_CAUSES: dict[str, tuple[str, ...]] = {
    "queue": ("queue-load",),
}


#: Inter-token components that are the engine's steady per-token time (the rest is pure overhead).
STEADY_DECODE = ("decode", "batch-depth", "gpu-state")

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

#: Share of the first-token time the gateway must hold for the verdict to blame it alone.
GATEWAY_MAJORITY = 0.5

_SYMPTOM_CLASS = {
    Symptom.PRE_FIRST_TOKEN: SymptomClass.PRE_FIRST_TOKEN,
    Symptom.INTER_TOKEN: SymptomClass.INTER_TOKEN,
    Symptom.PROXY_ONLY: SymptomClass.PROXY_ONLY,
}


@dataclass
class Felt:
    """What users felt on one path, against the budgets (``excess``: p90 / budget - 1, >= 0).

    A freeze inside an answer (the p90 of each answer's largest gap) is held to the first-token
    budget: a reader waits for it exactly as for a first token, and a mean per-token time hides
    it (one 5 s stall in 256 tokens adds only 20 ms to that answer's TPOT).
    """

    path: str
    ttft_p90: float
    ttft_n: int
    tpot_p90: float | None
    tpot_n: int
    freeze_p90: float | None
    freeze_n: int
    ttft_excess: float
    tpot_excess: float
    freeze_excess: float

    @property
    def inter_excess(self) -> float:
        return max(self.tpot_excess, self.freeze_excess)

    @property
    def over(self) -> bool:
        return self.ttft_excess > 0 or self.inter_excess > 0

    def line(self, budgets: Budgets) -> str:
        text = (f"{self.path}: TTFT p90 {fmt_seconds(self.ttft_p90)} (n={self.ttft_n}) vs budget "
                f"{fmt_seconds(budgets.ttft_s)} ({'over' if self.ttft_excess > 0 else 'within'})")
        if self.tpot_p90 is None:
            return text + "; TPOT unknown (single-token answers)"
        text += (f"; TPOT p90 {fmt_seconds(self.tpot_p90)} (n={self.tpot_n}) vs budget "
                 f"{fmt_seconds(budgets.tpot_s)} ({'over' if self.tpot_excess > 0 else 'within'})")
        if self.freeze_excess > 0 and self.freeze_p90 is not None:
            text += (f"; largest gap p90 {fmt_seconds(self.freeze_p90)} (n={self.freeze_n}): answers freeze "
                     f"longer than the {fmt_seconds(budgets.ttft_s)} first-token budget")
        return text


@dataclass
class _Split:
    """One decomposition: the components and what would have completed it."""

    components: list[Component] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    basis: str = ""  # what the shares are of, for the reasoning

    def dominant(self, allowance: float = 0.0) -> Component | None:
        """The component holding most of the excess: steady decode counts only above ``allowance``
        (the TPOT budget), since decoding within budget is no excess; everything else is overhead."""
        def excess(c: Component) -> float:
            seconds = c.seconds or 0.0
            return max(seconds - allowance, 0.0) if c.name in STEADY_DECODE else seconds

        best = max(self.components, key=excess, default=None)
        return best if best is not None and excess(best) > 0 else None

    def line(self) -> str:
        parts = [f"{c.name} {fmt_seconds(c.seconds or 0.0)} ({fmt_pct(c.share or 0.0)})" for c in self.components]
        return f"{self.basis} splits into " + ", ".join(parts)


def classify(evidence: Evidence, results: list[CheckResult], budgets: Budgets) -> Verdict:
    """The verdict: what users felt against the budgets, where the excess went, the one change.

    Pure: reads the derived views through ``evidence`` and the findings in ``results``.
    """
    findings = [r.finding for r in results if r.outcome is Outcome.FINDING and r.finding is not None]
    budget_map = {"ttft_s": budgets.ttft_s, "tpot_s": budgets.tpot_s}
    try:
        stats: StreamStats = evidence.get("stream_stats")
    except Missing as exc:
        return Verdict(
            symptom=Symptom.INCONCLUSIVE,
            summary="Inconclusive: no streamed request was measured, so what users feel is unknown.",
            reasoning=[f"stream statistics: {exc}"],
            missing=["a stream probe (--engine and/or --gateway)"],
            budgets=budget_map,
        )
    stream: StreamEvidence | None = evidence.maybe("stream")
    mw: MetricsWindow | None = evidence.maybe("metrics_window")
    suspect = stream is not None and stream.client.suspect
    suspect_note = (
        "; the client may have distorted these timings (" + "; ".join(stream.client.reasons or ["self-check"]) + ")"
        if suspect and stream is not None else ""
    )
    verdict = partial(Verdict, client_suspect=suspect, budgets=budget_map)

    reasoning: list[str] = []
    felt: dict[str, Felt] = {}
    for name, ps in stats.paths.items():
        failures = _failures(ps)
        if failures:
            reasoning.append(f"{name}: {sum(failures.values())} of {ps.n_ok + sum(failures.values())} requests "
                             f"failed ({', '.join(f'{k} x{v}' for k, v in failures.items())})")
        if ps.failures.get(CANCELLED):
            reasoning.append(f"{name}: {ps.failures[CANCELLED]} request(s) cancelled when the run was interrupted")
        if ps.ttft.n and ps.ttft.p90 is not None:
            felt[name] = _felt(ps, budgets)
            reasoning.append(felt[name].line(budgets))
    failed = sum(sum(_failures(ps).values()) for ps in stats.paths.values())
    if not felt:
        cancelled = any(ps.failures.get(CANCELLED) for ps in stats.paths.values())
        why = ("the run was interrupted before any request completed" + (f" ({failed} failed)" if failed else "")
               if cancelled else "every probe request failed")
        return verdict(
            symptom=Symptom.INCONCLUSIVE,
            summary=f"Inconclusive: {why}, so no latency was measured" + suspect_note + ".",
            reasoning=reasoning,
            missing=["a run left to finish (it was interrupted)" if cancelled
                     else "one successful streamed request (see the error findings)"],
        )
    failed_note = (f"; {failed} of {failed + sum(ps.n_ok for ps in stats.paths.values())} requests failed"
                   if failed else "")

    user = felt.get("gateway") or next(iter(felt.values()))
    engine_ps = stats.path("direct") if "direct" in felt else stats.path(user.path)
    ttft_split = _ttft_split(stats, felt, mw)
    itl_split = _itl_split(engine_ps, stream, mw, findings) if engine_ps is not None else _Split()
    decomposition = Decomposition(
        ttft_client_s=user.ttft_p90,
        ttft_budget_s=budgets.ttft_s,
        ttft_components=ttft_split.components,
        tpot_client_s=user.tpot_p90,
        tpot_budget_s=budgets.tpot_s,
        itl_components=itl_split.components,
        itl_basis=f"{engine_ps.path} TPOT mean" if itl_split.components and engine_ps is not None else None,
    )
    missing = list(dict.fromkeys(ttft_split.missing + itl_split.missing))

    if not any(f.over for f in felt.values()):
        tpot = f" and TPOT p90 {fmt_seconds(user.tpot_p90)}" if user.tpot_p90 is not None else ""
        warned = sorted(f.code for f in findings if f.severity.rank >= Severity.WARNING.rank)
        review = f"; {len(warned)} warning finding(s) to review ({', '.join(warned)})" if warned else ""
        summary = (f"Healthy: TTFT p90 {fmt_seconds(user.ttft_p90)} (n={user.ttft_n}){tpot} are within the "
                   f"{fmt_seconds(budgets.ttft_s)} / {fmt_seconds(budgets.tpot_s)} budgets on "
                   f"{' and '.join(felt)}{failed_note}{review}{suspect_note}.")
        return verdict(symptom=Symptom.HEALTHY, summary=summary, reasoning=reasoning, decomposition=decomposition,
                       missing=missing)

    symptom, decision = _symptom(felt, ttft_split, findings)
    reasoning.append(decision)
    if symptom is Symptom.INCONCLUSIVE:
        missing.insert(0, "a direct path (--engine) or /metrics (--metrics-url) to tell the gateway from the engine")
        return verdict(
            symptom=symptom,
            summary=(f"Inconclusive: the {user.path} path is over budget (TTFT p90 {fmt_seconds(user.ttft_p90)}, "
                     f"n={user.ttft_n}) but the evidence cannot tell the gateway from the engine"
                     f"{failed_note}{suspect_note}."),
            reasoning=reasoning, decomposition=decomposition, missing=list(dict.fromkeys(missing)),
        )

    split = itl_split if symptom is Symptom.INTER_TOKEN else ttft_split
    if split.components:
        reasoning.append(split.line())
    if symptom is Symptom.PROXY_ONLY:
        dominant = _component(ttft_split, "gateway")
    else:
        dominant = split.dominant(budgets.tpot_s if symptom is Symptom.INTER_TOKEN else 0.0)
    primary = _primary(findings, dominant, _SYMPTOM_CLASS[symptom])
    if primary is not None:
        reasoning.append(f"{primary.code} {primary.name}: {primary.summary}")
    if suspect and stream is not None:
        reasoning.append("client self-check: " + "; ".join(stream.client.reasons or ["suspect"]))
    return verdict(
        symptom=symptom,
        summary=_summary(symptom, felt, user, budgets, dominant, primary) + failed_note + suspect_note + ".",
        reasoning=reasoning,
        primary_remediation=primary.remediation if primary else None,
        primary_code=primary.code if primary else None,
        decomposition=decomposition,
        missing=missing,
    )


def _failures(ps: PathStats) -> dict[str, int]:
    """The path's failures by outcome, without the requests cancelled by an interrupt."""
    return {outcome: n for outcome, n in ps.failures.items() if outcome != CANCELLED}


def _felt(ps: PathStats, budgets: Budgets) -> Felt:
    ttft = ps.ttft.p90 or 0.0
    tpot = ps.tpot.p90
    freeze = ps.max_gap.p90
    return Felt(
        path=ps.path,
        ttft_p90=ttft,
        ttft_n=ps.ttft.n,
        tpot_p90=tpot,
        tpot_n=ps.tpot.n,
        freeze_p90=freeze,
        freeze_n=ps.max_gap.n,
        ttft_excess=max(ttft / budgets.ttft_s - 1, 0.0),
        tpot_excess=max(tpot / budgets.tpot_s - 1, 0.0) if tpot is not None else 0.0,
        freeze_excess=max(freeze / budgets.ttft_s - 1, 0.0) if freeze is not None else 0.0,
    )


def _shares(components: list[Component]) -> list[Component]:
    total = sum(c.seconds or 0.0 for c in components)
    for c in components:
        c.share = (c.seconds or 0.0) / total if total > 0 else None
    return components


def _ttft_split(stats: StreamStats, felt: dict[str, Felt], mw: MetricsWindow | None) -> _Split:
    """Mean TTFT on the users' path = gateway + transport + queue + prefill (+ what is left)."""
    split = _Split()
    user = stats.paths["gateway" if "gateway" in felt else next(iter(felt))]
    direct = stats.paths["direct"] if "direct" in felt else None
    client_mean = user.ttft.mean or 0.0
    split.basis = f"{user.path} TTFT mean {fmt_seconds(client_mean)} (n={user.ttft.n})"
    parts: list[Component] = []
    server_ttft = mw.ttft.mean if mw is not None and mw.ttft is not None else None
    if direct is not None and user is not direct:
        parts.append(Component("gateway", max((user.ttft.mean or 0.0) - (direct.ttft.mean or 0.0), 0.0),
                               source="stream: gateway TTFT mean - direct TTFT mean"))
    elif direct is None and server_ttft is not None:
        parts.append(Component("gateway", max(client_mean - server_ttft, 0.0),
                               source="stream: gateway TTFT mean - server TTFT mean (network included: no direct path)"))
    if direct is not None and server_ttft is not None:
        parts.append(Component("transport", max((direct.ttft.mean or 0.0) - server_ttft, 0.0),
                               source="stream: direct TTFT mean - metrics: server TTFT mean"))
    if mw is None:
        split.missing.append("/metrics (--metrics-url) to split server queue and prefill time")
    else:
        queue = mw.queue.mean if mw.queue is not None else None
        if queue is not None:
            parts.append(Component("queue", queue, source=f"metrics: {mw.queue.metric} mean, n={mw.queue.count:.0f}"))
        if mw.prefill is not None and mw.prefill.mean is not None:
            parts.append(Component("prefill", mw.prefill.mean,
                                   source=f"metrics: {mw.prefill.metric} mean, n={mw.prefill.count:.0f}"))
        elif server_ttft is not None and queue is not None:
            parts.append(Component("prefill", max(server_ttft - queue, 0.0),
                                   source="metrics: server TTFT mean - queue time mean"))
        if queue is None or server_ttft is None:
            split.missing.append("vLLM's TTFT and queue-time histograms in /metrics (V1 engine)")
    if direct is None and "gateway" in felt and server_ttft is None:
        split.missing.append("a direct path (--engine) to separate the gateway from the engine")
    explained = sum(c.seconds or 0.0 for c in parts)
    if parts and client_mean - explained > 0.05 * client_mean:
        parts.append(Component("other", client_mean - explained, source="client TTFT mean - the components above"))
    split.components = _shares(parts)
    return split


def _itl_split(ps: PathStats, stream: StreamEvidence | None, mw: MetricsWindow | None,
               findings: list[Finding]) -> _Split:
    """Mean TPOT (per token) on the engine path = stalls + steady decode.

    Token bundling is not a part: TPOT counts tokens, so k tokens per chunk leave it as it is
    (the per-chunk gaps, ITL, are k times longer; the token-bundling check reports that).
    """
    split = _Split()
    measured = [r for r in ps.requests
                if not r.warmup and r.tpot is not None and r.gaps and r.median_gap and r.stall_above is not None]
    if not measured:
        return split
    tpot = statistics.fmean(r.tpot or 0.0 for r in measured)
    stall = statistics.fmean(  # a stall's time beyond the median gap, spread over the request's tokens as TPOT is
        sum(g - r.median_gap for g in r.gaps if g > r.stall_above) / (r.tokens - 1)
        for r in measured
    )
    split.basis = f"{ps.path} TPOT mean {fmt_seconds(tpot)} (n={len(measured)})"
    causes = {f.cause for f in findings if f.severity.rank >= Severity.WARNING.rank}
    preempted = (mw is not None and bool(mw.preemptions)) or "preemption" in causes
    if preempted:
        stall_name = "preemption-stalls"
    elif "prefill-interference" in causes:
        stall_name = "prefill-interference"
    else:
        stall_name = "stalls"
    parts = [Component(stall_name, stall, source=f"stream: gaps > {STALL_FACTOR:g}x the request's median, above it")]
    steady = max(tpot - stall, 0.0)
    if stream is None or tokens_per_chunk(stream) is None:
        split.missing.append("usage trailers (completion tokens) to count tokens, not chunks")
    decode_name = "gpu-state" if "gpu-state" in causes else "batch-depth" if "batch-depth" in causes else "decode"
    parts.append(Component(decode_name, steady, source="stream: steady per-token time (stalls removed)"))
    split.components = _shares(parts)
    return split


def _component(split: _Split, name: str) -> Component | None:
    return next((c for c in split.components if c.name == name), None)


def _symptom(felt: dict[str, Felt], ttft_split: _Split, findings: list[Finding]) -> tuple[Symptom, str]:
    """The symptom and the sentence that justifies it."""
    direct, gateway = felt.get("direct"), felt.get("gateway")
    if direct is not None and gateway is not None and gateway.over and not direct.over:
        return Symptom.PROXY_ONLY, "the direct path is within budget and the gateway path is not: the gateway adds it"
    ttft_excess = max(f.ttft_excess for f in felt.values())
    tpot_excess = max(f.tpot_excess for f in felt.values())
    freeze_excess = max(f.freeze_excess for f in felt.values())
    first_token = ttft_excess >= max(tpot_excess, freeze_excess)
    ratio = f"TTFT p90 is {1 + ttft_excess:.1f}x its budget, TPOT p90 {1 + tpot_excess:.1f}x its budget"
    if freeze_excess > 0:
        ratio += f", largest gap p90 {1 + freeze_excess:.1f}x the first-token budget"
    gw = _component(ttft_split, "gateway")
    if first_token and gw is not None and (gw.share or 0.0) > GATEWAY_MAJORITY:
        return Symptom.PROXY_ONLY, f"{ratio}; the gateway holds {fmt_pct(gw.share or 0.0)} of the first-token time"
    if gateway is not None and direct is None and not ttft_split.components:
        # Only the gateway was measured and nothing splits its time: let the findings decide.
        proxy = _severe(findings, SymptomClass.PROXY_ONLY)
        engine = _severe(findings, SymptomClass.PRE_FIRST_TOKEN) or _severe(findings, SymptomClass.INTER_TOKEN)
        if proxy and not engine:
            return Symptom.PROXY_ONLY, f"{ratio}; only the gateway was measured and only gateway checks fired"
        if not proxy and not engine:
            return Symptom.INCONCLUSIVE, f"{ratio}; only the gateway was measured and no check explains it"
        if proxy and engine:
            return Symptom.INCONCLUSIVE, (f"{ratio}; only the gateway was measured and both gateway and engine "
                                          "checks fired")
    if first_token:
        return Symptom.PRE_FIRST_TOKEN, f"{ratio}: the excess lies before the first token"
    return Symptom.INTER_TOKEN, f"{ratio}: the excess lies between tokens"


def _severe(findings: list[Finding], cls: SymptomClass) -> list[Finding]:
    return [f for f in findings if f.symptom is cls and f.severity.rank >= Severity.WARNING.rank]


def _primary(findings: list[Finding], dominant: Component | None, cls: SymptomClass) -> Finding | None:
    """The finding explaining the dominant component (its fallback causes next); else the most
    severe of the symptom's class."""
    def rank(f: Finding) -> tuple[int, str]:
        return (-f.severity.rank, f.code)

    if dominant is not None:
        for causes in (COMPONENT_CAUSES.get(dominant.name, ()), FALLBACK_CAUSES.get(dominant.name, ())):
            explaining = min((f for f in findings if f.cause in causes), key=rank, default=None)
            if explaining is not None:
                return explaining
    return min((f for f in findings if f.symptom is cls), key=rank, default=None)


def _summary(symptom: Symptom, felt: dict[str, Felt], user: Felt, budgets: Budgets,
             dominant: Component | None, primary: Finding | None) -> str:
    """One sentence with the numbers: what users felt, where it went, what to change."""
    if symptom is Symptom.PROXY_ONLY:
        direct = felt.get("direct")
        what = f"gateway TTFT p90 {fmt_seconds(user.ttft_p90)} (n={user.ttft_n})"
        if direct is not None:
            what += f" vs direct {fmt_seconds(direct.ttft_p90)} (n={direct.ttft_n})"
        what += f", budget {fmt_seconds(budgets.ttft_s)}"
    elif symptom is Symptom.INTER_TOKEN:
        worst = max(felt.values(), key=lambda f: f.inter_excess)
        what = (f"{worst.path} TPOT p90 {fmt_seconds(worst.tpot_p90 or 0.0)} (n={worst.tpot_n}) vs budget "
                f"{fmt_seconds(budgets.tpot_s)}")
        if worst.freeze_excess > worst.tpot_excess and worst.freeze_p90 is not None:
            what = (f"{worst.path} answers freeze for {fmt_seconds(worst.freeze_p90)} (largest gap p90, "
                    f"n={worst.freeze_n}; TPOT p90 {fmt_seconds(worst.tpot_p90 or 0.0)} vs budget "
                    f"{fmt_seconds(budgets.tpot_s)})")
    else:
        worst = max(felt.values(), key=lambda f: f.ttft_excess)
        what = (f"{worst.path} TTFT p90 {fmt_seconds(worst.ttft_p90)} (n={worst.ttft_n}) vs budget "
                f"{fmt_seconds(budgets.ttft_s)}")
    if dominant is not None and dominant.share is not None and symptom is not Symptom.PROXY_ONLY:
        phrase = COMPONENT_PHRASES.get(dominant.name, dominant.name)
        what += (f", {fmt_pct(dominant.share)} of inter-token time is {phrase}" if symptom is Symptom.INTER_TOKEN
                 else f", {fmt_pct(dominant.share)} of it {phrase}")
    fix = (f"; change {primary.remediation.setting} ({primary.code})" if primary is not None
           else "; no check explains it")
    return f"{symptom.value.capitalize()}: {what}{fix}"
