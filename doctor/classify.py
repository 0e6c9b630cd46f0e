"""The classifier: which symptom dominates, why (with numbers), and the ONE remediation.

A pure function of the evidence views and the check results, in five steps:

1. **What users felt**, from every witness (``user_felt``): the probe's requests per path
   (censored ones at their lower bound), the server's own histograms over the probe window
   (every user's requests, not only ours) and Prometheus history. Each gives TTFT p90, TPOT p90
   and freezes inside answers (each answer's largest gap, held to the first-token budget, since
   a reader waits for it as for a first token). A histogram's p90 is counted at its bucket's
   lower bound, so only what the witness surely saw goes over budget. The verdict takes the
   *worst credible* witness, names it, and keeps the probe's numbers beside it.
2. **Where it went.** Two decompositions, in seconds, of means (server histograms give
   nothing else), each share of the mean it splits, which the report names. First token, on the
   path users take: gateway share (gateway minus direct TTFT mean), transport (direct client
   TTFT mean minus the server's), server queue and server prefill (histogram means). When a
   server witness decided, or the server's TTFT mean exceeds the probe's (the probe's requests
   were the lucky ones), the split is of the server's TTFT mean, as the queue and prefill
   checks quote it. Inter-token time, on the engine path: stalls (gaps over ``STALL_FACTOR`` x
   the request's median, above that median) and the steady decode left; from the server's
   inter-token histogram when no probe stream ran. Stalls are preemption stalls when
   preemptions were counted, else prefill interference when that check fired; steady decode is
   the GPU's state or the batch depth when those checks fired. Steady decode within the TPOT
   budget is no excess, so it counts only above that budget when the dominant part is chosen.
3. **The symptom.** ``proxy-only`` when the engine is within budget (direct probe and server
   histograms) and the gateway path is not, when the gateway holds most of the first-token
   time, when most gateway requests fail while direct ones succeed, or when the gateway
   delivers the stream in bursts the engine does not send (the one-flush-per-token contract is
   broken even within budget). Otherwise the symptom furthest over its budget, *relative to that
   budget* (3x the TTFT budget outweighs 1.2x the TPOT budget whatever the answer length).
4. **A headline is felt latency, and only that.** Within every budget, a warning or critical
   finding users *felt* (``Finding.felt``) of a latency class (pre-first-token, inter-token,
   proxy-only) still makes that class the verdict: the finding saw what the witnesses' budgets did
   not. A risk (``felt`` false: headers held while TTFT is as direct, a timeout not yet fired)
   never makes the class: a healthy verdict names its risks. Over budget in one class beside a
   severe felt finding of another, the verdict says, with the numbers, why it chose its class. A
   path whose requests mostly fail is never healthy. An adaptive run that ended before its
   stopping rule could show the p90 within budget is healthy "so far", not conclusive.
5. **One remediation.** The finding whose ``cause`` explains the largest component of the
   symptom's decomposition (most severe first; ``FALLBACK_CAUSES`` when no direct cause fired);
   else the most severe finding of the symptom's class. The renderers list the other findings.
   Requests cancelled by an interrupt are not failures: they are counted apart.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from doctor.derive import Evidence
from doctor.derive.chunking import tokens_per_chunk
from doctor.derive.stream_stats import STALL_FACTOR, PathStats, StreamStats, stall_base
from doctor.derive.user_felt import FREEZE_SHARE, UserFelt, Witness
from doctor.evidence.stream import CANCELLED, CLIENT_STALL, DEADLINE, NOT_THE_TARGETS, ProbePath
from doctor.model import (
    Budgets,
    Cause,
    CheckResult,
    Component,
    Decomposition,
    Finding,
    Outcome,
    Remediation,
    Severity,
    Symptom,
    SymptomClass,
    Verdict,
    risks_of,
)
from doctor.probes.sampling import within_so_far
from doctor.units import fmt_pct, fmt_seconds

if TYPE_CHECKING:
    from doctor.derive.metrics_window import MetricsWindow
    from doctor.evidence import StreamEvidence


#: Decomposition component -> the finding causes that explain it.
COMPONENT_CAUSES: dict[str, tuple[Cause, ...]] = {
    "gateway": (Cause.BUFFERING, Cause.COMPRESSION, Cause.GATEWAY_SERIALISATION, Cause.GATEWAY_OVERHEAD,
                Cause.PROXY_TIMEOUT, Cause.GATEWAY_CAP, Cause.GATEWAY_RETRIES),
    "transport": (Cause.TRANSPORT,),
    # vLLM V1 keeps a request whose grammar is compiling in its waiting queue: a schema's compile is queue time
    "queue": (Cause.QUEUE, Cause.STRUCTURED_OUTPUT),
    "prefill": (Cause.PREFILL,),
    # a wedged engine's wait is in none of its histograms (they observe nothing): the time left over
    "other": (Cause.WEDGE,),
    "preemption-stalls": (Cause.PREEMPTION,),
    "prefill-interference": (Cause.PREFILL_INTERFERENCE,),
    "stalls": (Cause.PREEMPTION, Cause.PREFILL_INTERFERENCE, Cause.ENGINE_PAUSE, Cause.STRUCTURED_OUTPUT),
    "batch-depth": (Cause.BATCH_DEPTH,),
    "token-bundling": (Cause.TOKEN_BUNDLING,),
    "gpu-state": (Cause.GPU_STATE,),
    "decode": (Cause.BATCH_DEPTH, Cause.GPU_STATE, Cause.DECODE, Cause.FRONTEND, Cause.STRUCTURED_OUTPUT),
}

#: Causes that explain a component only when none of ``COMPONENT_CAUSES`` fired: a queue that
#: builds under load alone (LD504, LD505) says to add capacity, while a batch limit (LD101)
#: names the engine setting, which is the more specific change.
FALLBACK_CAUSES: dict[str, tuple[Cause, ...]] = {
    "queue": (Cause.QUEUE_LOAD,),
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

#: First-token components measured inside the server, whose shares the checks quote of the server's TTFT.
SERVER_PARTS = ("queue", "prefill")

#: Share of the first-token time the gateway must hold for the verdict to blame it alone.
GATEWAY_MAJORITY = 0.5

_SYMPTOM_CLASS = {
    Symptom.PRE_FIRST_TOKEN: SymptomClass.PRE_FIRST_TOKEN,
    Symptom.INTER_TOKEN: SymptomClass.INTER_TOKEN,
    Symptom.PROXY_ONLY: SymptomClass.PROXY_ONLY,
}


#: A path is failing when at least this share of its measured requests failed.
FAILING_SHARE = 0.5

#: A gateway delivers bursts when its reads carry at least this many events each (median)
#: while the direct path's carry at most ``BURST_DIRECT`` (one flush per token).
BURST_EVENTS = 3.0
BURST_DIRECT = 1.5

#: Over budget, a bursting gateway is blamed when its TTFT is at least this multiple of the direct one's.
BURST_TTFT_FACTOR = 2.0

_CLASS_SYMPTOM = {cls: symptom for symptom, cls in _SYMPTOM_CLASS.items()}


def times(r: float) -> str:
    """A multiple of a budget as the reasoning prints it: ``3.0x``, ``0.13x`` (65 ms of 500 ms), never
    a within-budget value rounded up to "1.0x"."""
    return f"{r:.1f}x" if r >= 1 else f"{min(r, 0.99):.2g}x"


@dataclass
class Felt:
    """What one witness felt, against the budgets (``excess``: p90 / budget - 1, >= 0).

    A freeze inside an answer (the p90 of each answer's largest gap; server side, the share of
    answers with a gap beyond the budget) is held to the first-token budget: a reader waits for
    it exactly as for a first token, and a mean per-token time hides it (one 5 s stall in 256
    tokens adds only 20 ms to that answer's TPOT). Histogram p90s count at their lower bound.
    """

    witness: Witness
    ttft_excess: float = 0.0
    tpot_excess: float = 0.0
    freeze_excess: float = 0.0
    freeze_text: str = ""
    # the same as plain multiples of the budget (not clamped at 1), for the reasoning
    ttft_ratio: float = 0.0
    tpot_ratio: float = 0.0
    freeze_ratio: float = 0.0

    @property
    def path(self) -> str:
        return self.witness.path

    @property
    def inter_excess(self) -> float:
        return max(self.tpot_excess, self.freeze_excess)

    @property
    def over(self) -> bool:
        return self.ttft_excess > 0 or self.inter_excess > 0

    def ttft_text(self) -> str:
        e = self.witness.ttft
        if e is None:
            return "TTFT unknown"
        if not self.witness.server:
            bound = f", {e.censored} still waiting when the probe gave up: at least" if e.censored else ""
            return f"TTFT p90 {'>= ' if e.censored else ''}{fmt_seconds(e.p90_low)} (n={e.n}{bound})".replace(": at least)", ")")
        if e.mean_only:
            return f"TTFT mean {fmt_seconds(e.mean)} (n={e.n}, no buckets for a p90)"
        return f"TTFT p90 {_interval(e.p90_low, e.p90_high)}, mean {fmt_seconds(e.mean)} (n={e.n})"

    def tpot_text(self) -> str:
        e = self.witness.tpot
        if e is None:
            return "TPOT unknown (single-token answers)" if not self.witness.server else "inter-token latency unknown"
        if not self.witness.server:
            return f"TPOT p90 {fmt_seconds(e.p90_low)} (n={e.n})"
        if e.mean_only:
            return f"inter-token latency mean {fmt_seconds(e.mean)} (n={e.n} gaps, no buckets for a p90)"
        return f"inter-token latency p90 {_interval(e.p90_low, e.p90_high)}, mean {fmt_seconds(e.mean)} (n={e.n} gaps)"

    def line(self, budgets: Budgets) -> str:
        def state(excess: float) -> str:
            return "over" if excess > 0 else "within"

        text = (f"{self.witness.label}: {self.ttft_text()} vs budget {fmt_seconds(budgets.ttft_s)} "
                f"({state(self.ttft_excess)}); {self.tpot_text()}")
        if self.witness.tpot is not None:
            text += f" vs budget {fmt_seconds(budgets.tpot_s)} ({state(self.tpot_excess)})"
        if self.freeze_text:
            text += f"; {self.freeze_text}"
        return text


def _interval(low: float, high: float | None) -> str:
    if high is None:
        return f"> {fmt_seconds(low)}"
    return f"in {fmt_seconds(low)}-{fmt_seconds(high)}" if low > 0 else f"<= {fmt_seconds(high)}"


def felt_of(witness: Witness, budgets: Budgets) -> Felt:
    f = Felt(witness)
    if witness.ttft is not None:
        f.ttft_ratio = witness.ttft.p90_low / budgets.ttft_s
        f.ttft_excess = max(f.ttft_ratio - 1, 0.0)
    if witness.tpot is not None:
        f.tpot_ratio = witness.tpot.p90_low / budgets.tpot_s
        f.tpot_excess = max(f.tpot_ratio - 1, 0.0)
    if witness.max_gap is not None:
        gap = witness.max_gap
        f.freeze_ratio = gap.p90_low / budgets.ttft_s
        f.freeze_excess = max(f.freeze_ratio - 1, 0.0)
        if f.freeze_excess > 0:
            f.freeze_text = (f"largest gap p90 {'>= ' if gap.censored else ''}{fmt_seconds(gap.p90_low)} (n={gap.n}): "
                             f"answers freeze longer than the {fmt_seconds(budgets.ttft_s)} first-token budget")
    freezes = witness.freezes(budgets.ttft_s)
    if freezes is not None and freezes.share >= FREEZE_SHARE:
        # At least a tenth of the answers froze beyond the bucket bound: their largest-gap p90 is at least that.
        f.freeze_ratio = max(freezes.gap_s / budgets.ttft_s, f.freeze_ratio)
        f.freeze_excess = max(f.freeze_ratio - 1, 0.0) or 1e-9
        f.freeze_text = (f"{freezes.gaps} gaps over {fmt_seconds(freezes.gap_s)} across {freezes.requests} requests: "
                         f"answers freeze longer than the {fmt_seconds(budgets.ttft_s)} first-token budget")
    return f


@dataclass
class _Split:
    """One decomposition: the components and what would have completed it."""

    components: list[Component] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    basis: str = ""  # what the shares are of, with its numbers, for the reasoning
    label: str = ""  # the same without numbers, for the chart ("direct TPOT mean")
    whole: str = ""  # the same, as the headline names it ("the server's TTFT mean 13.1 s")

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


@dataclass
class _Failing:
    path: str
    failed: int
    total: int
    detail: str  # "http-status x8: HTTP 502 ..."

    def text(self) -> str:
        every = "every one of" if self.failed == self.total else f"{self.failed} of"
        return f"{every} {self.total} {self.path} requests failed ({self.detail})"


def classify(evidence: Evidence, results: list[CheckResult], budgets: Budgets) -> Verdict:
    """The verdict: what users felt against the budgets, where the excess went, the one change.

    Pure: reads the derived views through ``evidence`` and the findings in ``results``.
    """
    findings = [r.finding for r in results if r.outcome is Outcome.FINDING and r.finding is not None]
    budget_map = {"ttft_s": budgets.ttft_s, "tpot_s": budgets.tpot_s}
    stats: StreamStats | None = evidence.maybe("stream_stats")
    view: UserFelt | None = evidence.maybe("user_felt")
    stream: StreamEvidence | None = evidence.maybe("stream")
    mw: MetricsWindow | None = evidence.maybe("metrics_window")
    suspect = stream is not None and stream.client.suspect
    suspect_note = (
        "; the client may have distorted these timings (" + "; ".join(stream.client.reasons or ["self-check"]) + ")"
        if suspect and stream is not None else ""
    )
    verdict = partial(Verdict, client_suspect=suspect, budgets=budget_map)

    reasoning: list[str] = []
    failing: dict[str, _Failing] = {}
    failed = measured_total = 0
    for name, ps in (stats.paths.items() if stats is not None else ()):
        failures = _failures(ps)
        n_failed = sum(failures.values())
        failed += n_failed
        measured_total += ps.n_ok + n_failed
        if n_failed:
            reasoning.append(f"{name}: {n_failed} of {ps.n_ok + n_failed} requests failed "
                             f"({', '.join(f'{k} x{v}' for k, v in failures.items())})")
            if n_failed >= FAILING_SHARE * (ps.n_ok + n_failed):
                failing[name] = _Failing(name, n_failed, ps.n_ok + n_failed, _failure_detail(stream, name, failures))
        if ps.failures.get(CANCELLED):
            reasoning.append(f"{name}: {ps.failures[CANCELLED]} request(s) cancelled when the run was interrupted")
        if ps.failures.get(CLIENT_STALL):
            reasoning.append(f"{name}: {ps.failures[CLIENT_STALL]} request(s) not counted: the client itself froze "
                             "past the stall timeout, so whether the server answered is unknown")
        if ps.client_frozen.n and ps.client_frozen.max is not None:
            reasoning.append(f"{name}: the client itself froze during {ps.client_frozen.n} request(s), "
                             f"{fmt_seconds(ps.client_frozen.max)} at most: taken out of their timings "
                             "(each a lower bound), not blamed on the server")
        if ps.ttft_censored:
            reasoning.append(f"{name}: {ps.ttft_censored} request(s) still had no first token when the probe gave up: "
                             "counted in TTFT at that wait (a lower bound), not dropped")
        warm = ps.warmup_ttft
        if warm.n and warm.max is not None and warm.max > budgets.ttft_s:
            reasoning.append(f"{name}: warm-up TTFT {fmt_seconds(warm.max)} (n={warm.n}) is over the budget; set aside "
                             "as a possible cold start (LD103 weighs it), not dropped from the report")
    failed_note = f"; {failed} of {measured_total} requests failed" if failed else ""

    felts = [felt_of(w, budgets) for w in view.witnesses] if view is not None else []
    reasoning += [f.line(budgets) for f in felts]
    # Only a finding users felt may make the verdict's class; a risk is listed beside it (``_risks``).
    severe = [f for f in findings if f.felt and f.severity.rank >= Severity.WARNING.rank and f.symptom in _CLASS_SYMPTOM]
    probe = {f.path: f for f in felts if not f.witness.server}
    servers = [f for f in felts if f.witness.server]

    if not felts:
        return _no_witness(verdict, stats, failing, findings, severe, reasoning, failed, suspect_note)

    user = probe.get(ProbePath.GATEWAY) or probe.get(ProbePath.DIRECT) or max(servers, key=lambda f: f.ttft_excess)
    engine_ps = None
    if stats is not None:
        engine_ps = stats.path(ProbePath.DIRECT) if ProbePath.DIRECT in probe else stats.path(ProbePath(user.path)) if not user.witness.server else None
    worst_ttft = max(felts, key=lambda f: f.ttft_excess)
    server_ttft = _server_ttft(mw)
    prefer_server = (worst_ttft.witness.server and worst_ttft.ttft_excess > 0) or not probe or (
        server_ttft is not None and stats is not None and not user.witness.server
        and server_ttft > (stats.paths[ProbePath(user.path)].ttft.mean or 0.0))
    ttft_split = _ttft_split(stats, probe, mw, prefer_server)
    itl_split = (_itl_split(engine_ps, stream, mw, findings) if engine_ps is not None
                 else _server_itl_split(mw, findings))
    decomposition = Decomposition(
        ttft_client_s=user.witness.ttft.p90_low if user.witness.ttft is not None else None,
        ttft_budget_s=budgets.ttft_s,
        ttft_components=ttft_split.components,
        ttft_basis=ttft_split.label if ttft_split.components else None,
        tpot_client_s=user.witness.tpot.p90_low if user.witness.tpot is not None else None,
        tpot_budget_s=budgets.tpot_s,
        itl_components=itl_split.components,
        itl_basis=itl_split.label if itl_split.components else None,
    )
    missing = list(dict.fromkeys(ttft_split.missing + itl_split.missing))
    common: dict[str, Any] = {"decomposition": decomposition, "missing": missing}

    gateway_failing = failing.get(ProbePath.GATEWAY)
    if gateway_failing is not None and ProbePath.DIRECT in probe and ProbePath.DIRECT not in failing:
        reasoning.append(f"{gateway_failing.text()} while direct requests succeed: the gateway fails them")
        primary = _most_severe(findings, SymptomClass.PROXY_ONLY) or _by_cause(findings, (Cause.ERRORS,))
        return _decided(verdict, Symptom.PROXY_ONLY, primary, reasoning, common,
                        f"Proxy-only: {gateway_failing.text()}, while direct requests succeed "
                        f"({probe[ProbePath.DIRECT].ttft_text()}){_fix(primary)}{suspect_note}.")

    bursts = _bursts(stats)
    if not any(f.over for f in felts):
        if bursts is not None:
            primary = _primary(findings, _component(ttft_split, "gateway"), SymptomClass.PROXY_ONLY)
            reasoning.append(bursts)
            return _decided(verdict, Symptom.PROXY_ONLY, primary, reasoning, common,
                            f"Proxy-only: within budget, but {bursts}{_fix(primary)}{failed_note}{suspect_note}.")
        if severe:
            return _from_findings(verdict, severe, findings, user, budgets, reasoning, failed_note, suspect_note, common)
        if failing:
            worst = max(failing.values(), key=lambda x: x.failed / x.total)
            reasoning.append(f"{worst.text()}: a failing path is never healthy")
            primary = _by_cause(findings, (Cause.ERRORS,))
            return _decided(verdict, Symptom.INCONCLUSIVE, primary, reasoning, common,
                            f"Not healthy: {worst.text()}; the requests that succeeded were within budget"
                            f"{_fix(primary)}{suspect_note}.")
        tpot = f" and {user.tpot_text()}" if user.witness.tpot is not None else ""
        so_far = _so_far(stream, budgets)
        if so_far:
            reasoning.append(f"{so_far[0].upper()}{so_far[1:]}: not a conclusive healthy verdict")
            missing.insert(0, "a longer --duration, so that the probe can show the p90 within budget")
        summary = (f"{'Within budget so far: ' + so_far + '; ' if so_far else 'Healthy: '}{user.ttft_text()}{tpot} "
                   f"are within the {fmt_seconds(budgets.ttft_s)} / "
                   f"{fmt_seconds(budgets.tpot_s)} budgets on {' and '.join(f.witness.label for f in felts)}"
                   f"{failed_note}{_review(findings)}{suspect_note}.")
        return verdict(symptom=Symptom.HEALTHY, summary=summary, reasoning=reasoning, conclusive=not so_far, **common)

    symptom, decider, decision = _symptom(felts, probe, servers, ttft_split, findings, bursts)
    reasoning.append(decision)
    if symptom is Symptom.INCONCLUSIVE:
        missing.insert(0, "a direct path (--engine) or /metrics (--metrics-url) to tell the gateway from the engine")
        return verdict(
            symptom=symptom,
            summary=(f"Inconclusive: the {user.path} path is over budget ({user.ttft_text()}) but the evidence "
                     f"cannot tell the gateway from the engine{failed_note}{suspect_note}."),
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
    primary, trade = _trade_off(symptom, primary, severe, any(f.ttft_excess > 0 for f in felts))
    reasoning += _primary_line(primary)
    reasoning += _other_classes(symptom, severe, felts)
    if trade:
        reasoning.append(trade)
    if suspect and stream is not None:
        reasoning.append("client self-check: " + "; ".join(stream.client.reasons or ["suspect"]))
    return verdict(
        symptom=symptom,
        summary=(_summary(symptom, probe, decider, budgets, dominant, split, primary, server_ttft,
                          max(felts, key=lambda f: f.ttft_excess))
                 + (f"; {trade}" if trade else "") + _also(symptom, severe) + failed_note + suspect_note + "."),
        reasoning=reasoning,
        primary_remediation=_remedy(primary),
        primary_code=primary.code if primary else None,
        **common,
    )


#: The knob of a compound incident: one step budget trades long prompts' own first token against
#: every running stream's freezes (LD202), and a request queued behind those long steps.
TRADE_KNOB = "max_num_batched_tokens"


def _trade_off(symptom: Symptom, primary: Finding | None, severe: list[Finding],
               ttft_over: bool) -> tuple[Finding | None, str]:
    """The remediation and the sentence of a compound incident: a felt prefill-interference finding
    naming ``TRADE_KNOB`` beside a first-token symptom (the verdict's, or a witness's TTFT over budget
    on an inter-token verdict whose change it already is); never on a proxy-only verdict.

    Other users' long prefills both freeze running streams and hold new requests behind their long
    steps. On a first-token verdict that no queue, prefill or transport finding explains (only a
    fallback: load alone, a cold start), the knob is the change: lowering it lets queued requests
    start sooner and ends the freezes, at the cost of the long prompts' own TTFT. When the first
    token is the long prompts' own prefill (a prefill finding), the knob would serve it the other
    way, raised, at the cost of everyone's freezes: the sentence says so and the remediation stays.
    """
    interference = next((f for f in severe if f.cause == Cause.PREFILL_INTERFERENCE
                         and f.remediation.setting == TRADE_KNOB), None)
    if interference is None or not (ttft_over or symptom is Symptom.PRE_FIRST_TOKEN) \
            or symptom not in (Symptom.PRE_FIRST_TOKEN, Symptom.INTER_TOKEN) \
            or (symptom is Symptom.INTER_TOKEN and primary is not interference):
        return primary, ""
    lower = f"lowering {TRADE_KNOB} (to {interference.remediation.suggested}" + (
        f", now {interference.remediation.current})" if interference.remediation.current else ")")
    cost = "costs the long prompts' own TTFT (their prefill spread over more, shorter steps)"
    if symptom is Symptom.INTER_TOKEN:
        return primary, (f"one knob trades two symptoms ({interference.code}): {lower} shortens the freezes users "
                         f"felt, and {cost}")
    if primary is not None and primary.cause in (Cause.PREFILL, Cause.QUEUE, Cause.TRANSPORT):
        return primary, (f"one knob trades two symptoms ({interference.code} beside {primary.code}): raising "
                         f"{TRADE_KNOB} would shorten long prompts' own first token, and lengthen every running "
                         "stream's freezes")
    return interference, (f"one knob trades two symptoms ({interference.code}): other users' long prefills both "
                          f"freeze running answers and hold new requests behind their steps; {lower} lets waiting "
                          f"requests start sooner and ends the freezes, and {cost}")


def _so_far(stream: StreamEvidence | None, budgets: Budgets) -> str:
    """``"23 of the 29 fast answers needed on direct"`` when an adaptive run ended (its duration ran
    out, its deadline, an interrupt) before its stopping rule could show every path within budget;
    "" when it could, or when the user fixed the count (``--requests``: their choice, said in the
    run record)."""
    if stream is None or stream.shape.duration_s is None:
        return ""
    paths = list(dict.fromkeys(r.path for r in stream.requests))
    short = within_so_far(stream.requests, paths, budgets.ttft_s, budgets.tpot_s, stream.client.freezes)
    if short is None:
        return ""
    path, fast, needed = short
    why = f" ({stream.shape.stopped})" if stream.shape.stopped else ""
    return f"{fast} of the {needed} fast answers needed on {path}{why}"


def _no_witness(verdict: partial[Verdict], stats: StreamStats | None, failing: dict[str, _Failing],
                findings: list[Finding], severe: list[Finding], reasoning: list[str], failed: int,
                suspect_note: str) -> Verdict:
    """No request measured and no server histogram: the findings may still speak, else inconclusive."""
    if stats is None:
        reasoning.append("stream statistics: no stream probe ran and no server histogram saw enough requests")
        if severe:
            top = min(severe, key=_rank)
            symptom = _CLASS_SYMPTOM[top.symptom]
            return verdict(
                symptom=symptom,
                summary=(f"{symptom.value.capitalize()}: no request was measured, but {top.code} ({top.severity.value}) "
                         f"found {top.summary}{_fix(top)}."),
                reasoning=reasoning + _primary_line(top), primary_remediation=top.remediation, primary_code=top.code,
            )
        return verdict(
            symptom=Symptom.INCONCLUSIVE,
            summary="Inconclusive: no streamed request was measured and no server histogram saw enough requests, "
                    "so what users feel is unknown.",
            reasoning=reasoning,
            missing=["a stream probe (--engine and/or --gateway), or /metrics or Prometheus history with requests in it"],
        )
    cancelled = any(ps.failures.get(CANCELLED) for ps in stats.paths.values())
    cut = sum(ps.failures.get(DEADLINE, 0) for ps in stats.paths.values())
    primary = _by_cause(findings, (Cause.ERRORS,))
    if cancelled:
        why = "the run was interrupted before any request completed" + (f" ({failed} failed)" if failed else "")
    elif cut and not failing:  # the user's own deadline, not the target: no capacity advice for it
        why = (f"the --deadline cut {cut} request(s) before they finished (censored then, not failed by the "
               "server)" + (f"; {failed} failed" if failed else ""))
    elif failing:
        why = "; ".join(f.text() for f in failing.values())
    else:
        why = "every probe request failed"
    return verdict(
        symptom=Symptom.INCONCLUSIVE,
        summary=f"Inconclusive: {why}, so no latency was measured{_fix(primary)}{suspect_note}.",
        reasoning=reasoning + _primary_line(primary),
        primary_remediation=_remedy(primary), primary_code=primary.code if primary else None,
        missing=["a run left to finish (it was interrupted)" if cancelled
                 else "a --deadline longer than one answer" if cut and not failing
                 else "one successful streamed request (see the error findings)"],
    )


def _from_findings(verdict: partial[Verdict], severe: list[Finding], findings: list[Finding], user: Felt,
                   budgets: Budgets, reasoning: list[str], failed_note: str, suspect_note: str,
                   common: dict[str, Any]) -> Verdict:
    """Within every budget, yet a latency-class finding fired: its class is the verdict, since the
    finding saw what the witnesses did not (another user's queue, a preemption, a buffered stream)."""
    top = min(severe, key=_rank)
    symptom = _CLASS_SYMPTOM[top.symptom]
    reasoning.append(f"every witness is within budget, but {top.code} {top.name} ({top.severity.value}) is a "
                     f"finding of the {top.symptom.value} class: it decides the verdict")
    reasoning += _primary_line(top)
    within = user.ttft_text() + (f", {user.tpot_text()}" if user.witness.tpot is not None else "")
    return verdict(
        symptom=symptom,
        summary=(f"{symptom.value.capitalize()}: {user.witness.label} within budget ({within}), but {top.code} "
                 f"({top.severity.value}): {top.summary}{_fix(top)}{_also(symptom, severe)}{failed_note}{suspect_note}."),
        reasoning=reasoning, primary_remediation=top.remediation, primary_code=top.code, **common,
    )


def _failures(ps: PathStats) -> dict[str, int]:
    """The path's failures by outcome, without the requests that were no failure of the target
    (cancelled by an interrupt, lost to a freeze of the client)."""
    return {outcome: n for outcome, n in ps.failures.items() if outcome not in NOT_THE_TARGETS}


def _failure_detail(stream: StreamEvidence | None, path: str, failures: dict[str, int]) -> str:
    """``http-status x8: HTTP 502 Bad Gateway``: the commonest failure and its first error."""
    outcome, n = max(failures.items(), key=lambda kv: kv[1])
    first = next((r for r in (stream.requests if stream else []) if r.path == path and r.outcome == outcome), None)
    error = ""
    if first is not None:
        error = f"HTTP {first.status}" if outcome == "http-status" and first.status else (first.error or "")
    return f"{outcome} x{n}" + (f": {error[:120]}" if error else "")


def _rank(f: Finding) -> tuple[bool, int, str]:
    """Felt findings first, then the most severe: a risk explains a component only when nothing felt does."""
    return (not f.felt, -f.severity.rank, f.code)


def _most_severe(findings: list[Finding], cls: SymptomClass) -> Finding | None:
    return min(_severe(findings, cls), key=_rank, default=None)


def _by_cause(findings: list[Finding], causes: tuple[Cause, ...]) -> Finding | None:
    return min((f for f in findings if f.cause in causes), key=_rank, default=None)


def _fix(primary: Finding | None) -> str:
    return f"; change {primary.remediation.setting} ({primary.code})" if primary is not None else ""


def _decided(verdict: partial[Verdict], symptom: Symptom, primary: Finding | None, reasoning: list[str],
             common: dict[str, Any], summary: str) -> Verdict:
    """A verdict whose remediation is ``primary``'s, with its finding last in the reasoning."""
    return verdict(symptom=symptom, summary=summary, reasoning=reasoning + _primary_line(primary),
                   primary_remediation=_remedy(primary), primary_code=primary.code if primary else None, **common)


def _remedy(primary: Finding | None) -> Remediation | None:
    return primary.remediation if primary is not None else None


def _primary_line(primary: Finding | None) -> list[str]:
    return [f"{primary.code} {primary.name}: {primary.summary}"] if primary is not None else []


def _review(findings: list[Finding]) -> str:
    """What a healthy verdict leaves to review: felt findings of no latency class (an error, a GPU
    fault) counted by their real severity, then the risks, the first with its one line."""
    by: dict[str, list[str]] = {}
    for f in sorted(findings, key=_rank):
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


def _also(symptom: Symptom, severe: list[Finding]) -> str:
    others = sorted({f.code for f in severe if _CLASS_SYMPTOM[f.symptom] is not symptom})
    return f" (also {', '.join(others)}: see the reasoning)" if others else ""


def _other_classes(symptom: Symptom, severe: list[Finding], felts: list[Felt]) -> list[str]:
    """Why the verdict's class wins over a severe finding of another latency class, with numbers."""
    lines = []
    ttft = max(f.ttft_ratio for f in felts)
    inter = max(max(f.tpot_ratio, f.freeze_ratio) for f in felts)
    larger = (symptom is Symptom.PRE_FIRST_TOKEN and ttft >= inter) or (symptom is Symptom.INTER_TOKEN and inter >= ttft)
    why = "its excess is the larger" if larger else "of the cause above"
    for f in sorted(severe, key=_rank):
        other = _CLASS_SYMPTOM[f.symptom]
        if other is symptom:
            continue
        lines.append(f"{f.code} {f.name} ({f.severity.value}) speaks to {other.value}; {symptom.value} decides as "
                     f"{why} (TTFT p90 {times(ttft)} its budget, inter-token {times(inter)})")
    return lines


def _bursts(stats: StreamStats | None) -> str | None:
    """The gateway breaks the one-flush-per-token contract the engine keeps: a sentence, else None."""
    if stats is None:
        return None
    gw, direct = stats.path(ProbePath.GATEWAY), stats.path(ProbePath.DIRECT)
    if gw is None or direct is None or gw.events_per_read.p50 is None or direct.events_per_read.p50 is None:
        return None
    if gw.events_per_read.p50 < BURST_EVENTS or direct.events_per_read.p50 > BURST_DIRECT:
        return None
    paces = [base for r in gw.requests if not r.warmup and (base := stall_base(r.gaps)) is not None]
    every = f" every {fmt_seconds(statistics.median(paces))}" if paces else ""
    return (f"delivered in bursts of {gw.events_per_read.p50:.0f} tokens{every} (gateway {gw.events_per_read.p50:.1f} "
            f"events per read vs direct {direct.events_per_read.p50:.1f}): the gateway holds the stream back")


def _server_ttft(mw: MetricsWindow | None) -> float | None:
    return mw.ttft.mean if mw is not None and mw.ttft is not None else None


def _shares(components: list[Component]) -> list[Component]:
    total = sum(c.seconds or 0.0 for c in components)
    for c in components:
        c.share = (c.seconds or 0.0) / total if total > 0 else None
    return components


#: What the split of TTFT into queue and prefill needs from the engine (vLLM V1 and SGLang export both;
#: TGI's TTFT is derived from its queue and prefill histograms; llama.cpp has neither).
_NO_SERVER_SPLIT = "the engine's TTFT and queue-time histograms in /metrics"


def _no_server_split(mw: MetricsWindow | None) -> list[str]:
    """``_NO_SERVER_SPLIT`` as missing evidence, unless the TTFT histogram is there and observed
    nothing in the window: a frozen histogram is evidence (a wedged engine, LD105), not a missing one."""
    frozen = mw is not None and mw.ttft is not None and not mw.ttft.count
    return [] if frozen else [_NO_SERVER_SPLIT]


def _ttft_split(stats: StreamStats | None, probe: dict[str, Felt], mw: MetricsWindow | None, prefer_server: bool) -> _Split:
    """Mean TTFT on the users' path = gateway + transport + queue + prefill (+ what is left); of the
    server's TTFT mean when the server saw more than the probe (``prefer_server``)."""
    split = _Split()
    server_ttft = _server_ttft(mw)
    parts: list[Component] = []
    if prefer_server or stats is None or not probe:
        if mw is None or mw.ttft is None or server_ttft is None:
            split.missing.extend(_no_server_split(mw))
            return split
        whole = server_ttft
        split.label = "server TTFT mean"
        split.basis = f"server TTFT mean {fmt_seconds(whole)} (n={mw.ttft.count:.0f}, every user's requests)"
        split.whole = f"the server's TTFT mean {fmt_seconds(whole)}"
    else:
        user = stats.paths[ProbePath.GATEWAY if ProbePath.GATEWAY in probe else ProbePath.DIRECT]
        direct = stats.paths[ProbePath.DIRECT] if ProbePath.DIRECT in probe else None
        whole = user.ttft.mean or 0.0
        split.label = f"{user.path} TTFT mean"
        split.basis = f"{user.path} TTFT mean {fmt_seconds(whole)} (n={user.ttft.n})"
        split.whole = f"the {user.path} TTFT mean {fmt_seconds(whole)}"
        if direct is not None and user is not direct:
            parts.append(Component("gateway", max(whole - (direct.ttft.mean or 0.0), 0.0),
                                   source="stream: gateway TTFT mean - direct TTFT mean"))
        elif direct is None and server_ttft is not None:
            parts.append(Component("gateway", max(whole - server_ttft, 0.0),
                                   source="stream: gateway TTFT mean - server TTFT mean (network included: no direct path)"))
        if direct is not None and server_ttft is not None:
            parts.append(Component("transport", max((direct.ttft.mean or 0.0) - server_ttft, 0.0),
                                   source="stream: direct TTFT mean - metrics: server TTFT mean"))
        if direct is None and ProbePath.GATEWAY in probe and server_ttft is None:
            split.missing.append("a direct path (--engine) to separate the gateway from the engine")
    if mw is None:
        split.missing.append("/metrics (--metrics-url) to split server queue and prefill time")
    else:
        queue = mw.queue.mean if mw.queue is not None else None
        if queue is not None and mw.queue is not None:
            parts.append(Component("queue", queue, source=f"metrics: {mw.queue.metric} mean, n={mw.queue.count:.0f}"))
        if mw.prefill is not None and mw.prefill.mean is not None:
            parts.append(Component("prefill", mw.prefill.mean,
                                   source=f"metrics: {mw.prefill.metric} mean, n={mw.prefill.count:.0f}"))
        elif server_ttft is not None and queue is not None:
            parts.append(Component("prefill", max(server_ttft - queue, 0.0),
                                   source="metrics: server TTFT mean - queue time mean"))
        if queue is None or server_ttft is None:
            split.missing.extend(_no_server_split(mw))
    explained = sum(c.seconds or 0.0 for c in parts)
    if parts and whole - explained > 0.05 * whole:
        parts.append(Component("other", whole - explained, source=f"{split.label} - the components above"))
    split.components = _shares(parts)
    return split


def _stall_name(mw: MetricsWindow | None, findings: list[Finding]) -> str:
    causes = {f.cause for f in findings if f.severity.rank >= Severity.WARNING.rank}
    if (mw is not None and bool(mw.preemptions)) or Cause.PREEMPTION in causes:
        return "preemption-stalls"
    return "prefill-interference" if Cause.PREFILL_INTERFERENCE in causes else "stalls"


def _decode_name(findings: list[Finding]) -> str:
    causes = {f.cause for f in findings if f.severity.rank >= Severity.WARNING.rank}
    return "gpu-state" if Cause.GPU_STATE in causes else "batch-depth" if Cause.BATCH_DEPTH in causes else "decode"


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
        return _server_itl_split(mw, findings)
    tpot = statistics.fmean(r.tpot or 0.0 for r in measured)
    stall = statistics.fmean(  # a stall's time beyond the median gap, spread over the request's tokens as TPOT is
        sum(g - median for g in r.gaps if g > above) / (r.tokens - 1)
        for r in measured
        if (median := r.median_gap) is not None and (above := r.stall_above) is not None  # every one is: narrows the types
    )
    split.label = f"{ps.path} TPOT mean"
    split.basis = f"{ps.path} TPOT mean {fmt_seconds(tpot)} (n={len(measured)})"
    split.whole = f"the {ps.path} TPOT mean {fmt_seconds(tpot)}"
    parts = [Component(_stall_name(mw, findings), stall,
                       source=f"stream: gaps > {STALL_FACTOR:g}x the request's median, above it")]
    steady = max(tpot - stall, 0.0)
    if stream is None or tokens_per_chunk(stream) is None:
        split.missing.append("usage trailers (completion tokens) to count tokens, not chunks")
    parts.append(Component(_decode_name(findings), steady, source="stream: steady per-token time (stalls removed)"))
    split.components = _shares(parts)
    return split


def _server_itl_split(mw: MetricsWindow | None, findings: list[Finding]) -> _Split:
    """The server's mean inter-token latency = stalls + steady decode, from its histogram alone.

    Stalls are the gaps in buckets wholly above ``STALL_FACTOR`` x the median's bucket bound,
    each counted at its bucket's lower bound (at least that long) minus the median: a lower bound
    of the stall time, spread over every gap as the mean is.
    """
    split = _Split()
    itl = mw.itl if mw is not None else None
    if itl is None or itl.mean is None or not itl.count or itl.p50_le is None:
        return split
    above = itl.p50_le * STALL_FACTOR
    stall_s, low, previous = 0.0, 0.0, 0.0
    for le, cumulative in itl.buckets:
        if low >= above:
            stall_s += (cumulative - previous) * (low - itl.p50_le)
        low, previous = le, cumulative
    if low >= above:
        stall_s += (itl.count - previous) * (low - itl.p50_le)
    stall = min(stall_s / itl.count, itl.mean)
    split.label = "server inter-token latency mean"
    split.basis = f"server inter-token latency mean {fmt_seconds(itl.mean)} (n={itl.count:.0f} gaps)"
    split.whole = f"the server's inter-token latency mean {fmt_seconds(itl.mean)}"
    parts = [Component(_stall_name(mw, findings), stall,
                       source=f"metrics: {itl.metric} gaps in buckets above {STALL_FACTOR:g}x the median's bound"),
             Component(_decode_name(findings), itl.mean - stall, source=f"metrics: {itl.metric} mean, stalls removed")]
    split.components = _shares(parts)
    return split


def _component(split: _Split, name: str) -> Component | None:
    return next((c for c in split.components if c.name == name), None)


def _symptom(felts: list[Felt], probe: dict[str, Felt], servers: list[Felt], ttft_split: _Split,
             findings: list[Finding], bursts: str | None) -> tuple[Symptom, Felt, str]:
    """The symptom, the witness that decided it, and the sentence that justifies it."""
    direct, gateway = probe.get(ProbePath.DIRECT), probe.get(ProbePath.GATEWAY)
    engine_over = (direct is not None and direct.over) or any(f.over for f in servers)
    if bursts is not None and gateway is not None and direct is not None and gateway.over \
            and gateway.ttft_ratio >= BURST_TTFT_FACTOR * direct.ttft_ratio:
        # Between bursts the gateway's answers look frozen, so its freezes are the bursts; what the
        # gateway adds is told by its first token against the direct path's, whatever the engine does.
        return Symptom.PROXY_ONLY, gateway, (f"{bursts}, and the gateway's TTFT p90 is {times(gateway.ttft_ratio)} its "
                                             f"budget against {times(direct.ttft_ratio)} direct: the gateway adds it")
    if gateway is not None and gateway.over and not engine_over and (direct is not None or servers):
        within = "the direct path" + (" and the server's histograms" if servers else "") if direct else "the server's histograms"
        return Symptom.PROXY_ONLY, gateway, f"{within} are within budget and the gateway path is not: the gateway adds it"
    ttft = max(felts, key=lambda f: f.ttft_excess)
    tpot = max(felts, key=lambda f: f.tpot_excess)
    freeze = max(felts, key=lambda f: f.freeze_excess)
    first_token = ttft.ttft_excess >= max(tpot.tpot_excess, freeze.freeze_excess)
    ratio_text = (f"TTFT p90 is {times(ttft.ttft_ratio)} its budget ({ttft.witness.label}), TPOT p90 "
                  f"{times(tpot.tpot_ratio)} its budget ({tpot.witness.label})")
    if freeze.freeze_excess > 0:
        ratio_text += f", the freezes {times(freeze.freeze_ratio)} the first-token budget ({freeze.witness.label})"
    gw = _component(ttft_split, "gateway")
    if first_token and gw is not None and (gw.share or 0.0) > GATEWAY_MAJORITY and not any(f.over for f in servers):
        return Symptom.PROXY_ONLY, gateway or ttft, f"{ratio_text}; the gateway holds {fmt_pct(gw.share or 0.0)} of the first-token time"
    if gateway is not None and direct is None and not servers and not ttft_split.components:
        # Only the gateway was measured and nothing splits its time: let the findings decide.
        proxy = _severe(findings, SymptomClass.PROXY_ONLY)
        engine = _severe(findings, SymptomClass.PRE_FIRST_TOKEN) or _severe(findings, SymptomClass.INTER_TOKEN)
        if proxy and not engine:
            return Symptom.PROXY_ONLY, gateway, f"{ratio_text}; only the gateway was measured and only gateway checks fired"
        if not proxy and not engine:
            return Symptom.INCONCLUSIVE, gateway, f"{ratio_text}; only the gateway was measured and no check explains it"
        if proxy and engine:
            return Symptom.INCONCLUSIVE, gateway, (f"{ratio_text}; only the gateway was measured and both gateway and "
                                                   "engine checks fired")
    worst = tpot if tpot.tpot_excess >= freeze.freeze_excess else freeze
    preempting = [f for f in findings if f.cause == Cause.PREEMPTION and f.severity.rank >= Severity.WARNING.rank]
    critical = [f for f in preempting if f.severity is Severity.CRITICAL]
    if first_token and preempting and (worst.inter_excess > 0 or critical):
        # A KV cache that runs out does both: it freezes running answers (preempted, recomputed) and
        # holds new requests in the queue, the preempted ones among them. The queue is the symptom
        # of the same cause, so the inter-token class, whose finding names the KV setting, decides:
        # when a witness saw answers slow down, or when the preemption finding is critical (a tenth
        # of every user's requests preempted, or the probe's own streams stalled) though the few
        # witnessed gaps stayed within budget (seen on a real vLLM: 19 preemptions in 20 requests,
        # users' answers frozen up to 8 s, the probe's largest-gap p90 within).
        first = (critical or preempting)[0]
        return Symptom.INTER_TOKEN, worst, (f"{ratio_text}; but {first.code} saw the KV cache run out "
                                            f"({first.summary.split(';')[0]}), which both freezes answers and "
                                            "queues new requests (preempted ones back in the queue): "
                                            "the inter-token cause decides")
    if first_token:
        return Symptom.PRE_FIRST_TOKEN, ttft, f"{ratio_text}: the excess lies before the first token"
    return Symptom.INTER_TOKEN, worst, f"{ratio_text}: the excess lies between tokens"


def _severe(findings: list[Finding], cls: SymptomClass) -> list[Finding]:
    return [f for f in findings if f.felt and f.symptom is cls and f.severity.rank >= Severity.WARNING.rank]


def _primary(findings: list[Finding], dominant: Component | None, cls: SymptomClass) -> Finding | None:
    """The finding explaining the dominant component (its fallback causes next); else the most
    severe of the symptom's class."""
    if dominant is not None:
        for causes in (COMPONENT_CAUSES.get(dominant.name, ()), FALLBACK_CAUSES.get(dominant.name, ())):
            explaining = _by_cause(findings, causes)
            if explaining is not None:
                return explaining
    return min((f for f in findings if f.symptom is cls), key=_rank, default=None)


def _summary(symptom: Symptom, probe: dict[str, Felt], decider: Felt, budgets: Budgets,
             dominant: Component | None, split: _Split, primary: Finding | None, server_ttft: float | None,
             first_token: Felt) -> str:
    """One sentence with the numbers: what users felt (and who saw it), where it went, what to change.

    An inter-token verdict decided by a preemption finding while every witnessed gap stayed
    within budget (``_symptom``) leads with what was over, the first-token wait: the headline
    never quotes only numbers within budget for an incident."""
    if symptom is Symptom.PROXY_ONLY:
        gw, direct = probe.get(ProbePath.GATEWAY), probe.get(ProbePath.DIRECT)
        what = f"gateway {gw.ttft_text()}" if gw is not None else decider.ttft_text()
        if direct is not None:
            what += f" vs direct {direct.ttft_text()}"
        what += f", budget {fmt_seconds(budgets.ttft_s)}"
    elif symptom is Symptom.INTER_TOKEN:
        if decider.freeze_excess > decider.tpot_excess and decider.freeze_text:
            inner = f"{decider.freeze_text} ({decider.tpot_text()} vs budget {fmt_seconds(budgets.tpot_s)})"
        else:
            inner = f"{decider.tpot_text()} vs budget {fmt_seconds(budgets.tpot_s)}"
        what = f"{_who(decider)}: {inner}"
        if decider.inter_excess <= 0 < first_token.ttft_excess:
            where = "" if first_token is decider else f" ({_who(decider)})"
            what = (f"{_who(first_token)}: {first_token.ttft_text()} vs budget {fmt_seconds(budgets.ttft_s)}, the KV "
                    f"cache running out (preempted requests wait again); between tokens{where} {inner}")
    else:
        what = f"{_who(decider)}: {decider.ttft_text()} vs budget {fmt_seconds(budgets.ttft_s)}"
    if decider.witness.server and probe:
        own = probe.get(ProbePath.DIRECT) or probe.get(ProbePath.GATEWAY)
        if own is not None:
            what += f" (the probe's own {own.path} requests: {own.ttft_text()}" + (
                f", {own.tpot_text()})" if symptom is Symptom.INTER_TOKEN else ")")
    if dominant is not None and dominant.share is not None and symptom is not Symptom.PROXY_ONLY:
        phrase = COMPONENT_PHRASES.get(dominant.name, dominant.name)
        share, whole = dominant.share, split.whole
        if dominant.name in SERVER_PARTS and server_ttft:
            # the share the queue and prefill checks quote: of the server's own TTFT, one number for one thing
            share, whole = min((dominant.seconds or 0.0) / server_ttft, 1.0), f"the server's TTFT mean {fmt_seconds(server_ttft)}"
        what += f"; {fmt_pct(share)} of {whole} is {phrase}"
    fix = (f"; change {primary.remediation.setting} ({primary.code})" if primary is not None
           else "; no check explains it")
    return f"{symptom.value.capitalize()}: {what}{fix}"


def _who(f: Felt) -> str:
    return f.witness.label if f.witness.server else f"{f.path} (the probe)"
