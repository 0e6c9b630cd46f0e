"""Process exit statuses, stable for cron jobs and CI gates, and the rules that pick one.

``exit_code_for`` decides a diagnosis's status from its report and ``--fail-on``;
``usable_evidence`` whether a collected bundle is worth analysing at all.
"""

from __future__ import annotations

from enum import IntEnum

from doctor.evidence import Bundle
from doctor.model import Report, Severity, Symptom


class ExitCode(IntEnum):
    """What ``llm-doctor`` returns to the shell.

    HEALTHY      nothing at or above ``--fail-on`` was found.
    SYMPTOM      a finding at or above ``--fail-on`` (the verdict names the symptom).
    NO_DIAGNOSIS no usable evidence, or a usage error (bad flag, unreadable bundle).
    INTERRUPTED  Ctrl-C; a partial report is still written.
    """

    HEALTHY = 0
    SYMPTOM = 1
    NO_DIAGNOSIS = 2
    INTERRUPTED = 130


def exit_code_for(report: Report, fail_on: Severity) -> ExitCode:
    """0 healthy; 1 a finding (or symptom) at or above ``fail_on``; else 2 when inconclusive.

    A finding at or above ``fail_on`` wins over an inconclusive verdict: a service refusing
    every request cannot be decomposed, yet that failure is itself a critical finding (LD501),
    and a health check must report it as a failure (1), not as "could not diagnose" (2).
    """
    ranks = [f.severity.rank for f in report.findings]
    if report.verdict.symptom in (Symptom.PRE_FIRST_TOKEN, Symptom.INTER_TOKEN, Symptom.PROXY_ONLY):
        ranks.append(Severity.WARNING.rank)
    if max(ranks, default=0) >= fail_on.rank:
        return ExitCode.SYMPTOM
    if report.verdict.symptom is Symptom.INCONCLUSIVE:
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
