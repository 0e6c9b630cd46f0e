"""The whole of a ``verify`` run: the halves' verdicts (answers, long context, latency), the incident's symptom, and the exit code.

The latency half is ``compare``'s rule, not a new one: TTFT and TPOT per request on each endpoint,
each row ``judge``d (Mann-Whitney and the practical threshold), the half's decision from
``decision_code`` (a regression fails, an undecided row cannot tell). Exit 1 when either half
fails, else 2 when either cannot tell, else 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from doctor.exit_codes import ExitCode
from doctor.foundation.stats import quantile
from doctor.foundation.units import fmt_seconds
from doctor.model import Practical
from doctor.runs.compare_runs import Comparison, Row, decision_code, judge, p50_p90
from doctor.verify.gate import AnswersVerdict, Decision, Half
from doctor.verify.needles import NeedleVerdict

#: The metrics the latency half judges: what users feel before the answer, and while it streams.
LATENCY_METRICS = ("TTFT", "TPOT")

#: The share of a side's requests that may fail before the failures decide: a candidate that fails
#: more than the baseline by this much fails, whatever its answered requests' latency.
FAILED_SHARE = 0.1

_BY_CODE = {ExitCode.HEALTHY: Decision.PASS, ExitCode.SYMPTOM: Decision.FAIL, ExitCode.NO_DIAGNOSIS: Decision.ABSTAIN}


@dataclass
class Endpoint:
    """One side as the reports name it: its role, URL (no credentials), model and engine."""

    role: str
    url: str | None
    model: str | None = None
    engine: str | None = None
    recorded: str | None = None  # the --baseline-answers file that stands in for it


@dataclass
class LatencyVerdict(Half):
    """The latency half: a sentence per row as its reasons, and the rows (``compare``'s)."""

    rows: list[Row] = field(default_factory=list)


@dataclass
class SymptomCheck:
    """``verify REPORT``: the incident's symptom re-measured on the changed stack. ``fixed`` None: not measured."""

    symptom: str  # "pre-first-token from queueing"
    metric: str  # "TTFT" or "TPOT"
    before_p90: float | None
    after_p90: float | None
    budget_s: float
    fixed: bool | None
    failed: int = 0  # the re-probe's requests that got no answer, of ``measured``
    measured: int = 0
    basis: str = ""  # how ``fixed`` was judged where the budget alone cannot say (``judge_symptom``)

    @property
    def sentence(self) -> str:
        after = fmt_seconds(self.after_p90) if self.after_p90 is not None else "not measured"
        verdict = {True: "fixed", False: "still there", None: "cannot tell"}[self.fixed]
        before = fmt_seconds(self.before_p90) if self.before_p90 is not None else "?"
        failures = f", {self.failed} of {self.measured} requests failed" if self.failed else ""
        basis = f" ({self.basis})" if self.basis else ""
        return (f"{self.symptom}: {self.metric} p90 {before} -> {after}{failures}, budget {fmt_seconds(self.budget_s)}: "
                f"{verdict}{basis}")


def judge_symptom(symptom: str, metric: str, before: list[float], after: list[float], budget_s: float,
                  recurred: str | None, *, failed: int = 0, measured: int = 0) -> SymptomCheck:
    """Whether the incident's symptom is gone: the re-diagnosis's per-request ``metric`` samples, and
    ``recurred``, what the re-diagnosis says of the finding that named the symptom ("LD101 fired
    again: ...", "" when it did not, None when nothing could tell).

    The finding decides, the budget bounds: the real queueing incident's probe measured TTFT p90
    3.3 s under a 4 s budget while 89 % of it was queued, so a p90 within the budget says nothing
    by itself, and the same server re-probed unchanged came out 15 % faster by chance, beyond
    ``compare``'s noise test at these sample sizes. Gone when the finding does not fire again and
    the p90 is within the budget; still there when it fires again, or when the p90 is over the
    budget, or when the re-probe's requests failed (more than ``FAILED_SHARE``: they helped no one).
    """
    p90 = quantile(sorted(after), 0.9) if after else None
    before_p90 = quantile(sorted(before), 0.9) if before else None
    check = SymptomCheck(symptom, metric, before_p90, p90, budget_s, None, failed=failed, measured=measured,
                         basis=recurred or "")
    if measured and failed / measured > FAILED_SHARE:
        check.fixed = False
    elif p90 is None:
        return check
    elif p90 > budget_s or recurred:
        check.fixed = False
    elif recurred is not None:
        check.fixed, check.basis = True, "the finding that named it did not fire again"
    return check


@dataclass
class VerifyResult:
    """What ``verify`` prints and exits on."""

    baseline: Endpoint | None
    candidate: Endpoint
    answers: AnswersVerdict | None = None
    latency: LatencyVerdict | None = None
    long_context: NeedleVerdict | None = None
    symptom: SymptomCheck | None = None
    notes: list[str] = field(default_factory=list)

    def exit_code(self) -> ExitCode:
        """1 when a half fails or the symptom is still there, else 2 when one cannot tell, else 0."""
        decisions = [h.decision for h in (self.answers, self.long_context, self.latency) if h is not None]
        if Decision.FAIL in decisions or (self.symptom is not None and self.symptom.fixed is False):
            return ExitCode.SYMPTOM
        if Decision.ABSTAIN in decisions or (self.symptom is not None and self.symptom.fixed is None) or (not decisions and self.symptom is None):
            return ExitCode.NO_DIAGNOSIS
        return ExitCode.HEALTHY


def judge_latency(baseline: dict[str, list[float]], candidate: dict[str, list[float]], practical: Practical) -> LatencyVerdict:
    """The latency half from each endpoint's per-request samples (``LATENCY_METRICS`` -> seconds)."""
    rows = []
    for metric in LATENCY_METRICS:
        b, c = baseline.get(metric, []), candidate.get(metric, [])
        row = Row("candidate", metric, *p50_p90(b), *p50_p90(c), n_base=len(b), n_current=len(c))
        judge(row, b, c, practical)
        rows.append(row)
    decision = _BY_CODE[decision_code(Comparison(rows=rows, practical=practical))]
    return LatencyVerdict(decision, [latency_sentence(r) for r in rows], rows=rows)


def latency_sentence(row: Row) -> str:
    """``TTFT p50 41 ms -> 38 ms (n 12 / 12): within noise``, with what would decide an undecided row."""
    p50 = (f"p50 {fmt_seconds(row.base_p50)} -> {fmt_seconds(row.current_p50)}" if row.base_p50 is not None
           and row.current_p50 is not None else "not measured on both")
    more = f"; about {row.needed} requests per endpoint would decide it" if row.needed else ""
    return f"{row.metric} {p50} (n {row.n_base} / {row.n_current}): {row.decision.value}{more}"
