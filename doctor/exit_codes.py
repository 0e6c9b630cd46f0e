"""Process exit statuses, stable for cron jobs and CI gates, and the rules that pick one.

``exit_code_for`` decides a diagnosis's status from its report and ``--fail-on``;
``usable_evidence`` whether a collected bundle is worth analysing at all.
"""

from __future__ import annotations

from enum import IntEnum

from doctor.evidence import Bundle
from doctor.model import FailOn, Report, Severity, Symptom


class ExitCode(IntEnum):
    """What ``llm-doctor`` returns to the shell.

    HEALTHY      nothing ``--fail-on`` fails on was found (risks alone, by default).
    SYMPTOM      by default latency users felt; under a strict ``--fail-on`` a finding at or above it.
    NO_DIAGNOSIS no usable evidence, a usage error (bad flag, unreadable bundle), an inconclusive
                 verdict, or, under a strict ``--fail-on``, a healthy one the run could not establish.
    INTERRUPTED  Ctrl-C; a partial report is still written.
    """

    HEALTHY = 0
    SYMPTOM = 1
    NO_DIAGNOSIS = 2
    INTERRUPTED = 130


_UNHEALTHY = (Symptom.PRE_FIRST_TOKEN, Symptom.INTER_TOKEN, Symptom.PROXY_ONLY)


def exit_code_for(report: Report, fail_on: FailOn | Severity) -> ExitCode:
    """0 healthy; 1 what ``fail_on`` fails on; else 2 when the verdict could not be established.

    ``felt`` (the default): 1 for an unhealthy verdict (the classifier makes one only from
    latency users felt) or a felt finding at warning or above, of any class (an error rate, a GPU
    fault); a risk alone exits 0, and so does a healthy verdict "within budget so far" (nothing
    was felt). A severity (a strict gate): 1 for any finding at or above it, risks included (an
    unhealthy verdict counts as a warning), and 2 for a healthy verdict that is not conclusive.

    Either way 1 wins over an inconclusive verdict: a service refusing every request cannot be
    decomposed, yet that failure is itself a critical finding (LD501), and a health check must
    report it as a failure (1), not as "could not diagnose" (2).
    """
    level = FailOn(fail_on)
    unhealthy = report.verdict.symptom in _UNHEALTHY
    gate = level.severity
    if gate is None:
        failed = unhealthy or any(f.felt and f.severity.rank >= Severity.WARNING.rank for f in report.findings)
    else:
        ranks = [f.severity.rank for f in report.findings] + ([Severity.WARNING.rank] if unhealthy else [])
        failed = max(ranks, default=0) >= gate.rank
    if failed:
        return ExitCode.SYMPTOM
    if report.verdict.symptom is Symptom.INCONCLUSIVE or (gate is not None and not report.verdict.conclusive):
        return ExitCode.NO_DIAGNOSIS
    return ExitCode.HEALTHY


#: Which of two codes a run of several parts (a canary and its stable, a fleet's replicas) ends
#: with: an interruption, then a symptom, then "could not diagnose", then healthy.
_PRECEDENCE = (ExitCode.HEALTHY, ExitCode.NO_DIAGNOSIS, ExitCode.SYMPTOM, ExitCode.INTERRUPTED)


def worst_code(codes: list[ExitCode]) -> ExitCode:
    """The code of several parts of one run: the worst by ``_PRECEDENCE`` (healthy when none)."""
    return max(codes, key=_PRECEDENCE.index, default=ExitCode.HEALTHY)


def usable_evidence(bundle: Bundle) -> bool:
    """Whether a bundle holds anything about the service a diagnosis can start from.

    A successful streamed request, log lines, a /metrics scrape or a Prometheus answer count;
    GPU and host facts do not: they describe a machine, and alone they say nothing about
    where the latency goes. ``collect`` exits 2 without any of these (the bundle is still
    written: its errors say why every probe failed).
    """
    return bool(
        (bundle.stream and any(r.ok for r in bundle.stream.requests))
        or (bundle.log and bundle.log.lines_total)
        or (bundle.metrics and any(s.error is None for s in bundle.metrics.scrapes))
        or (bundle.prometheus and any(q.error is None for q in bundle.prometheus.queries))
    )
