"""A run's metrics out: the node_exporter textfile and the Pushgateway (``diagnose``, ``watch``,
``analyze``, ``load`` and ``sweep``).

The families themselves are built by ``reports.prometheus_export`` from the report alone (a load
run's with its summary; a sweep's from its result). A failed push is a warning, not a change of
exit code: the exit code is the diagnosis's (the contract of gates), and the Pushgateway's own
``push_time_seconds`` shows a stale push.

Each kind of run pushes under a job of its own (``PUSH_JOB``, ``LOAD_JOB``, ``SWEEP_JOB``): a push
replaces its whole group (HTTP PUT), so a weekly sweep must not wipe the five-minute diagnosis'
numbers, nor the other way round.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.error import URLError

from prometheus_client import CollectorRegistry, push_to_gateway, write_to_textfile

from doctor.derive.load_summary import LoadSummary
from doctor.foundation.console import err, warn
from doctor.foundation.errors import UsageError
from doctor.foundation.redact import Redactor
from doctor.model import Report
from doctor.settings import ExportTargets
from reports.prometheus_export import metrics_registry

#: The Pushgateway jobs the families are pushed under; the region is their grouping key.
PUSH_JOB = "llm-doctor"
LOAD_JOB = "llm-doctor-load"  # ``load``, and ``analyze`` of a bundle a load run or sweep level kept
SWEEP_JOB = "llm-doctor-sweep"
PUSH_TIMEOUT_S = 10.0


def export_metrics(report: Report | Mapping[str, Report], targets: ExportTargets, *, load: LoadSummary | None = None) -> None:
    """The report's families (several reports: ``watch``'s targets, grouped on the Pushgateway
    by the region they share; ``load``: a load run's summary beside them), written and pushed as asked."""
    if not targets.asked:
        return
    first = next(iter(report.values())) if isinstance(report, Mapping) else report
    job = PUSH_JOB if first.bundle.run.scenario is None else LOAD_JOB
    export_registry(metrics_registry(report, load=load), targets, region=first.bundle.run.region, job=job)


def export_registry(registry: CollectorRegistry, targets: ExportTargets, *, region: str | None, job: str) -> None:
    """Write the textfile atomically and push ``registry`` under ``job``, grouped by ``region``.

    ``write_to_textfile`` writes ``PATH.<pid>.<thread>`` in the same folder and renames it over
    ``PATH`` (atomic on one filesystem), so node_exporter never reads half a file, and the
    temporary name does not end in ``.prom``, so it never collects one either.
    """
    if targets.textfile is not None:
        try:
            write_to_textfile(str(targets.textfile), registry)
        except OSError as exc:
            raise UsageError(f"cannot write {targets.textfile}: {exc.strerror or exc}") from None
        err.print(f"wrote {targets.textfile}")
    if targets.pushgateway is not None:
        try:
            push_to_gateway(targets.pushgateway, job=job, registry=registry, timeout=PUSH_TIMEOUT_S,
                            grouping_key={"region": region} if region else None)
        except (URLError, OSError) as exc:  # HTTPError is a URLError; a refused connection an OSError
            warn(f"could not push the metrics to {Redactor().text(targets.pushgateway)}: {getattr(exc, 'reason', exc)}")
        else:
            err.print(f"pushed the metrics to {Redactor().text(targets.pushgateway)}")
