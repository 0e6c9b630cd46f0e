"""``llm-doctor watch``: ``diagnose`` every ``--every``, the latest round served on ``/metrics``.

Each round is a whole ``diagnose`` through ``doctor.runs.pipeline`` (its own warm-up, so every round
measures from the same warm floor), and rounds never overlap: the next starts one period after
the previous one started, or at once when a round ran longer than the period. A target that is
down does not end the watch: the round retries it with backoff while that fits in the period
(``doctor.runs.outage``), then reports the outage as the round's result (exit 1, ``llm_doctor_up`` 0,
``llm_doctor_target_up`` 0), and the next round tries again. With a canary, each round probes
the stable and the canary and compares them (``doctor.runs.watch_round``). SIGTERM (a Kubernetes pod stopping) lets the round in progress finish,
so the last round kept in ``--history`` and served on ``/metrics`` is always a complete one:
unlike ``diagnose``, which treats SIGTERM as Ctrl-C (``doctor.foundation.signals``), ``watch`` installs its own
handler for its rounds. Ctrl-C still cuts the round short, reports it as partial and exits 130.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from doctor.commands.round_outputs import exported, run_round
from doctor.exit_codes import ExitCode
from doctor.foundation.console import err, progress
from doctor.foundation.errors import UsageError
from doctor.model import Report
from doctor.runs.watch_round import round_targets
from doctor.settings import RunSettings, lookup_targets
from reports.prometheus_export import metrics_registry


class LatestRound(Collector):
    """The latest complete round's families; nothing before the first round ends."""

    def __init__(self) -> None:
        self.reports: dict[str, Report] | None = None

    def collect(self) -> Iterator[Metric]:
        reports = self.reports  # one read: a round ending mid-scrape swaps the whole round
        if reports is not None:
            yield from metrics_registry(exported(reports)).collect()


def run(settings: RunSettings) -> ExitCode:
    """Rounds until ``--count`` or SIGTERM; the exit code is the last complete round's."""
    settings = lookup_targets(settings)
    plan = settings.watch
    assert settings.collect is not None and plan is not None
    targets = round_targets(settings.collect, plan)
    latest = LatestRound()
    server = None
    if plan.listen is not None:
        served = CollectorRegistry(auto_describe=False)
        served.register(latest)
        try:
            server, _thread = start_http_server(plan.listen[1], plan.listen[0], registry=served)
        except OSError as exc:
            raise UsageError(f"--listen {plan.listen[0]}:{plan.listen[1]}: {exc.strerror or exc}") from None
        err.print(f"serving /metrics on http://{plan.listen[0]}:{plan.listen[1]}/metrics")
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda _sig, _frame: stop.set())
    code = ExitCode.NO_DIAGNOSIS
    try:
        rounds = 0
        while not stop.is_set() and (plan.count is None or rounds < plan.count):
            started = time.monotonic()
            rounds += 1
            progress(f"round {rounds}" + (f"/{plan.count}" if plan.count else ""))
            reports, code = run_round(targets, settings, started, stop)
            latest.reports = reports
            if any(report.bundle.interrupted for report in reports.values()):  # Ctrl-C: reported as partial, the watch ends (130)
                break
            if plan.count is not None and rounds >= plan.count:
                break
            stop.wait(max(plan.every_s - (time.monotonic() - started), 0.0))
    finally:
        signal.signal(signal.SIGTERM, previous)
        if server is not None:
            server.shutdown()
            server.server_close()
    return code
