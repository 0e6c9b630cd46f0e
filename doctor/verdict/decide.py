"""The decision: which symptom, from which witness, and which finding's remediation.

``classify`` gathers the views, asks ``felt`` what each witness felt and ``split`` where the time
went, then ends in one of four cases: no witness at all (``_no_witness``), a gateway failing
while the direct path succeeds, every witness within budget (``_within_budget``), or over budget
(``_over_budget``, whose symptom ``symptom_of`` picks). Every sentence comes from
``doctor.verdict.wording`` and ``doctor.verdict.headline``: this module builds none.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from doctor.derive import Evidence
from doctor.derive.stream_stats import StreamStats
from doctor.derive.user_felt import UserFelt
from doctor.evidence.stream import CANCELLED, ProbePath
from doctor.model import Budgets, Cause, CheckResult, Decomposition, Finding, Outcome, Severity, Symptom, SymptomClass, Verdict
from doctor.verdict import headline, remedy, wording
from doctor.verdict import missing as hint
from doctor.verdict.cases import Decision, NoLatency, Why
from doctor.verdict.failures import Tally, tally
from doctor.verdict.felt import Bursts, Felt, bursts, felt_of, so_far, unshown
from doctor.verdict.split import Split, itl_split, server_itl_split, server_ttft, slow_split, ttft_split

if TYPE_CHECKING:
    from doctor.derive.metrics_window import MetricsWindow
    from doctor.evidence import RunRecord, StreamEvidence

#: Share of the first-token time the gateway must hold for the verdict to blame it alone.
GATEWAY_MAJORITY = 0.5

#: Over budget, a bursting gateway is blamed when its TTFT is at least this multiple of the direct one's.
BURST_TTFT_FACTOR = 2.0


@dataclass
class _Run:
    """What the decision reads once the witnesses are weighed: shared by its cases."""

    verdict: partial[Verdict]
    budgets: Budgets
    findings: list[Finding]
    severe: list[Finding]  # felt latency-class findings at warning or above: they may make the class
    felts: list[Felt]
    probe: dict[str, Felt]
    servers: list[Felt]
    stats: StreamStats | None
    stream: StreamEvidence | None
    tally: Tally
    reasoning: list[str]
    failed: str  # the run's notes for the headline
    suspect: str


def classify(evidence: Evidence, results: list[CheckResult], budgets: Budgets) -> Verdict:
    """The verdict: what users felt against the budgets, where the excess went, the one change.

    Pure: reads the derived views through ``evidence`` and the findings in ``results``.
    """
    findings = [r.finding for r in results if r.outcome is Outcome.FINDING and r.finding is not None]
    stats: StreamStats | None = evidence.maybe("stream_stats")
    view: UserFelt | None = evidence.maybe("user_felt")
    stream: StreamEvidence | None = evidence.maybe("stream")
    mw: MetricsWindow | None = evidence.maybe("metrics_window")
    suspect = stream is not None and stream.client.suspect
    felts = [felt_of(w, budgets) for w in view.witnesses] if view is not None else []
    counted = tally(stats, stream)
    run = _Run(
        verdict=partial(Verdict, client_suspect=suspect, budgets={"ttft_s": budgets.ttft_s, "tpot_s": budgets.tpot_s}),
        budgets=budgets, findings=findings,
        # Only a finding users felt may make the verdict's class; a risk is listed beside it (``risks_of``).
        severe=[f for f in findings if f.felt and f.severity.rank >= Severity.WARNING.rank and f.symptom in remedy.CLASS_SYMPTOM],
        felts=felts, probe={f.path: f for f in felts if not f.witness.server}, servers=[f for f in felts if f.witness.server],
        stats=stats, stream=stream, tally=counted,
        reasoning=wording.path_notes(stats, budgets) + [wording.felt_line(f, budgets) for f in felts],
        failed=wording.failed_note(counted.failed, counted.measured), suspect=wording.suspect_note(stream),
    )
    if not felts:
        return _no_witness(run)

    probe, servers = run.probe, run.servers
    user = probe.get(ProbePath.GATEWAY) or probe.get(ProbePath.DIRECT) or max(servers, key=lambda f: f.ttft_excess)
    engine_ps = None
    if stats is not None:
        engine_ps = stats.path(ProbePath.DIRECT) if ProbePath.DIRECT in probe else stats.path(ProbePath(user.path)) if not user.witness.server else None
    worst_ttft = max(felts, key=lambda f: f.ttft_excess)
    server_mean = server_ttft(mw)
    prefer_server = (worst_ttft.witness.server and worst_ttft.ttft_excess > 0) or not probe or (
        server_mean is not None and stats is not None and not user.witness.server
        and server_mean > (stats.paths[ProbePath(user.path)].ttft.mean or 0.0))
    first = ttft_split(stats, set(probe), mw, prefer_server)
    slow, slow_whole, slow_count = slow_split(evidence.maybe("request_hops"))
    if slow:
        run.reasoning.append(wording.slow_line(slow, wording.slow_basis(slow_whole, slow_count)))
    inter = itl_split(engine_ps, stream, mw, findings) if engine_ps is not None else server_itl_split(mw, findings)
    decomposition = Decomposition(
        ttft_client_s=user.witness.ttft.p90_low if user.witness.ttft is not None else None,
        ttft_budget_s=budgets.ttft_s,
        ttft_components=first.components,
        ttft_basis=first.label if first.components else None,
        tpot_client_s=user.witness.tpot.p90_low if user.witness.tpot is not None else None,
        tpot_budget_s=budgets.tpot_s,
        itl_components=inter.components,
        itl_basis=inter.label if inter.components else None,
        ttft_slow_components=slow,
        ttft_slow_basis=wording.slow_basis(slow_whole, slow_count) if slow else None,
    )
    missing = list(dict.fromkeys(first.missing + inter.missing))
    record: RunRecord | None = evidence.maybe("run")
    if record is not None and record.engine_url and not record.metrics_url:  # the engine's /metrics, turned off
        missing = [hint.METRICS_OFF if m == hint.METRICS else m for m in missing]
    common: dict[str, Any] = {"decomposition": decomposition, "missing": missing}

    gateway_failing = counted.failing.get(ProbePath.GATEWAY)
    if gateway_failing is not None and ProbePath.DIRECT in probe and ProbePath.DIRECT not in counted.failing:
        run.reasoning.append(wording.gateway_fails(gateway_failing))
        primary = remedy.most_severe(findings, SymptomClass.PROXY_ONLY) or remedy.by_cause(findings, (Cause.ERRORS,))
        return _decided(run, Symptom.PROXY_ONLY, primary, common,
                        headline.gateway_fails(gateway_failing, probe[ProbePath.DIRECT], primary, run.suspect))
    burst = bursts(stats)
    if not any(f.over for f in felts):
        return _within_budget(run, user, burst, first, common)
    return _over_budget(run, user, burst, first, inter, server_mean, common)


def _decided(run: _Run, symptom: Symptom, primary: Finding | None, common: dict[str, Any], summary: str) -> Verdict:
    """A verdict whose remediation is ``primary``'s, with its finding last in the reasoning."""
    return run.verdict(symptom=symptom, summary=summary, reasoning=run.reasoning + wording.primary_line(primary),
                       primary_remediation=primary.remediation if primary is not None else None,
                       primary_code=primary.code if primary else None, **common)


def _within_budget(run: _Run, user: Felt, burst: Bursts | None, first: Split, common: dict[str, Any]) -> Verdict:
    """Every witness within budget: a bursting gateway, a felt latency finding or a failing path
    still decides; else healthy ("so far" when an adaptive run ended before it could show it)."""
    if burst is not None:
        primary = remedy.primary(run.findings, first.part("gateway"), SymptomClass.PROXY_ONLY)
        run.reasoning.append(wording.bursts_text(burst))
        return _decided(run, Symptom.PROXY_ONLY, primary, common,
                        headline.bursts_within(burst, primary, run.failed, run.suspect))
    if run.severe:
        # the finding saw what the witnesses did not (another user's queue, a preemption, a buffered stream)
        top = min(run.severe, key=remedy.rank)
        symptom = remedy.CLASS_SYMPTOM[top.symptom]
        run.reasoning.append(wording.finding_decides(top))
        return _decided(run, symptom, top, common,
                        headline.finding_within(symptom, user, top, run.severe, run.failed, run.suspect))
    # Failed requests users felt are a headline: a failing path, or a felt critical error finding
    # (LD501) over fewer failures; the gateway's alone, while the direct path succeeds, is the gateway's.
    erring = [f for f in run.findings if f.felt and f.cause == Cause.ERRORS and f.severity is Severity.CRITICAL]
    failed = run.tally.failing or (run.tally.failed_paths if erring else {})
    if failed:
        primary = remedy.by_cause(run.findings, (Cause.ERRORS,))
        gateway, direct = failed.get(ProbePath.GATEWAY), run.probe.get(ProbePath.DIRECT)
        if gateway is not None and direct is not None and ProbePath.DIRECT not in run.tally.failed_paths:
            run.reasoning.append(wording.gateway_fails(gateway))
            return _decided(run, Symptom.PROXY_ONLY, primary, common,
                            headline.gateway_fails(gateway, direct, primary, run.suspect))
        worst = max(failed.values(), key=lambda x: x.failed / x.total)
        run.reasoning.append(wording.never_healthy(worst))
        return _decided(run, Symptom.INCONCLUSIVE, primary, common, headline.failing_within(worst, primary, run.suspect))
    gap = unshown(run.felts, run.stats)
    if gap is not None:
        # a wait cut below the budget (a tight --deadline), or no TTFT at all, shows nothing of the budget
        run.reasoning.append(wording.unshown_text(gap, run.budgets))
        if gap.cut:
            common["missing"].insert(0, hint.LONGER_DEADLINE)
        return run.verdict(symptom=Symptom.INCONCLUSIVE, reasoning=run.reasoning,
                           summary=headline.unshown(gap, run.budgets, run.failed, run.suspect), **common)
    short = so_far(run.stream, run.budgets)
    if short is not None:
        run.reasoning.append(wording.not_conclusive(short))
        common["missing"].insert(0, hint.LONGER_DURATION)
    return run.verdict(symptom=Symptom.HEALTHY, reasoning=run.reasoning, conclusive=short is None,
                       summary=headline.healthy(user, run.felts, short, run.budgets, run.findings, run.failed, run.suspect),
                       **common)


def _over_budget(run: _Run, user: Felt, burst: Bursts | None, first: Split, inter: Split, server_mean: float | None,
                 common: dict[str, Any]) -> Verdict:
    """Over budget on some witness: the symptom, its dominant component, the finding that explains it."""
    decision = symptom_of(run.felts, run.probe, run.servers, first, run.findings, burst)
    symptom = decision.symptom
    run.reasoning.append(wording.decision_text(decision, run.felts, run.probe, run.servers, burst, first))
    if symptom is Symptom.INCONCLUSIVE:
        common["missing"].insert(0, hint.GATEWAY_OR_ENGINE)
        return run.verdict(symptom=symptom, summary=headline.inconclusive(user, run.failed, run.suspect),
                           reasoning=run.reasoning, decomposition=common["decomposition"],
                           missing=list(dict.fromkeys(common["missing"])))
    split = inter if symptom is Symptom.INTER_TOKEN else first
    if split.components:
        run.reasoning.append(wording.split_line(split))
    if symptom is Symptom.PROXY_ONLY:
        dominant = first.part("gateway")
    else:
        dominant = split.dominant(run.budgets.tpot_s if symptom is Symptom.INTER_TOKEN else 0.0)
    primary = remedy.primary(run.findings, dominant, remedy.SYMPTOM_CLASS[symptom])
    primary, trade = remedy.trade_off(symptom, primary, run.severe, any(f.ttft_excess > 0 for f in run.felts))
    run.reasoning += wording.primary_line(primary)
    run.reasoning += wording.scaler_lines(remedy.scaler_context(symptom, primary, run.findings))
    run.reasoning += wording.other_classes(symptom, run.severe, run.felts)
    if trade is not None:
        run.reasoning.append(wording.trade_text(trade))
    if run.stream is not None and run.stream.client.suspect:
        run.reasoning.append(wording.self_check(run.stream))
    summary = headline.over_budget(symptom, run.probe, decision.decider, run.budgets, dominant, split, primary, server_mean,
                                   max(run.felts, key=lambda f: f.ttft_excess), trade, run.severe, run.failed, run.suspect)
    return run.verdict(symptom=symptom, summary=summary, reasoning=run.reasoning,
                       primary_remediation=primary.remediation if primary is not None else None,
                       primary_code=primary.code if primary else None, **common)


def _no_witness(run: _Run) -> Verdict:
    """No request measured and no server histogram: the findings may still speak, else inconclusive."""
    if run.stats is None:
        run.reasoning.append(wording.NO_STREAM)
        if run.severe:
            top = min(run.severe, key=remedy.rank)
            symptom = remedy.CLASS_SYMPTOM[top.symptom]
            return run.verdict(symptom=symptom, summary=headline.finding_unmeasured(symptom, top),
                               reasoning=run.reasoning + wording.primary_line(top),
                               primary_remediation=top.remediation, primary_code=top.code)
        return run.verdict(symptom=Symptom.INCONCLUSIVE, summary=headline.NOTHING_MEASURED, reasoning=run.reasoning,
                           missing=[hint.NO_WITNESS])
    paths = run.stats.paths.values()
    failing = run.tally.failing
    gap = unshown([], run.stats)  # what the warm-up measured, and every request the --deadline cut
    assert gap is not None  # no witness shows any first token
    cut = gap.cut
    if any(ps.failures.get(CANCELLED) for ps in paths):
        why, need = NoLatency.INTERRUPTED, hint.INTERRUPTED
    elif cut and not failing:  # the user's own deadline, not the target: no capacity advice for it
        why, need = NoLatency.DEADLINE, hint.LONGER_DEADLINE
    else:
        why, need = (NoLatency.FAILING if failing else NoLatency.ALL_FAILED), hint.ONE_SUCCESS
    primary = remedy.by_cause(run.findings, (Cause.ERRORS,))
    summary = headline.no_latency(why, run.tally.failed, cut, list(failing.values()), primary, run.suspect,
                                  gap.warmups, run.budgets)
    return _decided(run, Symptom.INCONCLUSIVE, primary, {"missing": [need]}, summary)


def symptom_of(felts: list[Felt], probe: dict[str, Felt], servers: list[Felt], first: Split,
               findings: list[Finding], burst: Bursts | None) -> Decision:
    """The symptom, the witness that decided it, and why.

    ``proxy-only`` when the gateway bursts and its TTFT is ``BURST_TTFT_FACTOR`` x the direct one's,
    when the engine is within budget and the gateway path is not, or when the gateway holds most of
    the first-token time; with only the gateway measured and nothing to split its time, the findings
    decide. Otherwise the symptom furthest over its budget, relative to that budget, except that a
    KV cache running out (preemption) makes a first-token excess the inter-token cause's.
    """
    direct, gateway = probe.get(ProbePath.DIRECT), probe.get(ProbePath.GATEWAY)
    engine_over = (direct is not None and direct.over) or any(f.over for f in servers)
    if burst is not None and gateway is not None and direct is not None and gateway.over \
            and gateway.ttft_ratio >= BURST_TTFT_FACTOR * direct.ttft_ratio:
        # Between bursts the gateway's answers look frozen, so its freezes are the bursts; what the
        # gateway adds is told by its first token against the direct path's, whatever the engine does.
        return Decision(Symptom.PROXY_ONLY, gateway, Why.BURSTS)
    if gateway is not None and gateway.over and not engine_over and (direct is not None or servers):
        return Decision(Symptom.PROXY_ONLY, gateway, Why.GATEWAY_ALONE)
    ttft = max(felts, key=lambda f: f.ttft_excess)
    tpot = max(felts, key=lambda f: f.tpot_excess)
    freeze = max(felts, key=lambda f: f.freeze_excess)
    first_token = ttft.ttft_excess >= max(tpot.tpot_excess, freeze.freeze_excess)
    gw = first.part("gateway")
    if first_token and gw is not None and (gw.share or 0.0) > GATEWAY_MAJORITY and not any(f.over for f in servers):
        return Decision(Symptom.PROXY_ONLY, gateway or ttft, Why.GATEWAY_MAJORITY)
    if gateway is not None and direct is None and not servers and not first.components:
        # Only the gateway was measured and nothing splits its time: let the findings decide.
        proxy = remedy.severe(findings, SymptomClass.PROXY_ONLY)
        engine = remedy.severe(findings, SymptomClass.PRE_FIRST_TOKEN) or remedy.severe(findings, SymptomClass.INTER_TOKEN)
        if proxy and not engine:
            return Decision(Symptom.PROXY_ONLY, gateway, Why.ONLY_GATEWAY_CHECKS)
        if not proxy and not engine:
            return Decision(Symptom.INCONCLUSIVE, gateway, Why.ONLY_GATEWAY_UNEXPLAINED)
        if proxy and engine:
            return Decision(Symptom.INCONCLUSIVE, gateway, Why.ONLY_GATEWAY_BOTH)
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
        return Decision(Symptom.INTER_TOKEN, worst, Why.KV_PREEMPTION, (critical or preempting)[0])
    if first_token:
        return Decision(Symptom.PRE_FIRST_TOKEN, ttft, Why.FIRST_TOKEN)
    return Decision(Symptom.INTER_TOKEN, worst, Why.BETWEEN_TOKENS)
