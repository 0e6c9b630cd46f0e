"""A report's metrics out: the node_exporter textfile and the Pushgateway (``diagnose``, later ``watch``).

The families themselves are built by ``reports.prometheus_export`` from the report alone. A
failed push is a warning, not a change of exit code: the exit code is the diagnosis's (the
contract of gates), and the Pushgateway's own ``push_time_seconds`` shows a stale push.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.error import URLError

from prometheus_client import push_to_gateway, write_to_textfile

from doctor.console import err, warn
from doctor.errors import UsageError
from doctor.model import Report
from doctor.redact import Redactor
from doctor.settings import ExportTargets
from reports.prometheus_export import metrics_registry

#: The Pushgateway job the families are pushed under; the region is its grouping key.
PUSH_JOB = "llm-doctor"
PUSH_TIMEOUT_S = 10.0


def export_metrics(report: Report | Mapping[str, Report], targets: ExportTargets) -> None:
    """Write the textfile atomically and push, as asked (several reports: ``watch``'s targets,
    grouped on the Pushgateway by the region they share).

    ``write_to_textfile`` writes ``PATH.<pid>.<thread>`` in the same folder and renames it over
    ``PATH`` (atomic on one filesystem), so node_exporter never reads half a file, and the
    temporary name does not end in ``.prom``, so it never collects one either.
    """
    if targets.textfile is None and targets.pushgateway is None:
        return
    registry = metrics_registry(report)
    if targets.textfile is not None:
        try:
            write_to_textfile(str(targets.textfile), registry)
        except OSError as exc:
            raise UsageError(f"cannot write {targets.textfile}: {exc.strerror or exc}") from None
        err.print(f"wrote {targets.textfile}")
    if targets.pushgateway is not None:
        first = next(iter(report.values())) if isinstance(report, Mapping) else report
        region = first.bundle.run.region
        try:
            push_to_gateway(targets.pushgateway, job=PUSH_JOB, registry=registry, timeout=PUSH_TIMEOUT_S,
                            grouping_key={"region": region} if region else None)
        except (URLError, OSError) as exc:  # HTTPError is a URLError; a refused connection an OSError
            warn(f"could not push the metrics to {Redactor().text(targets.pushgateway)}: {getattr(exc, 'reason', exc)}")
        else:
            err.print(f"pushed the metrics to {Redactor().text(targets.pushgateway)}")
