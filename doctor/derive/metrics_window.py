"""What /metrics (or Prometheus history) says happened over the probe window.

Scrapes taken around the probe are preferred: they cover exactly the requests the doctor sent.
Prometheus history is the fallback (and the only source when no probe was sent). Each source's
window is a view of its own (``scrape_window``, ``history_window``), parsed once per run:
``metrics_window`` chooses between them, ``user_felt`` reads both. The view's dataclasses live
in ``doctor.engine_metrics.views`` with the code that fills them.
"""

from __future__ import annotations

import dataclasses

from doctor.derive.missing import Missing
from doctor.engine_metrics.history import window_from_history
from doctor.engine_metrics.readings import NoWindow
from doctor.engine_metrics.views import EngineWindow, GaugeWindow, HistogramWindow, MetricsWindow
from doctor.engine_metrics.window import window_from_scrapes
from doctor.evidence import Bundle

__all__ = [
    "EngineWindow",
    "GaugeWindow",
    "HistogramWindow",
    "MetricsWindow",
    "derive_history_window",
    "derive_metrics_window",
    "derive_scrape_window",
]


def derive_scrape_window(bundle: Bundle) -> MetricsWindow:
    """The ``scrape_window`` view: the /metrics scrapes' window alone; ``Missing`` says why none."""
    if bundle.metrics is None:
        raise Missing("no /metrics scrape (pass --metrics-url)")
    try:
        return window_from_scrapes(bundle.metrics.scrapes)
    except NoWindow as exc:
        raise Missing(str(exc)) from None


def derive_history_window(bundle: Bundle) -> MetricsWindow:
    """The ``history_window`` view: Prometheus history's window alone; ``Missing`` says why none."""
    if bundle.prometheus is None:
        raise Missing("no Prometheus history (pass --prometheus)")
    try:
        return window_from_history(bundle.prometheus)
    except NoWindow as exc:
        raise Missing(str(exc)) from None


def derive_metrics_window(bundle: Bundle, scrape_window: MetricsWindow | Missing,
                          history_window: MetricsWindow | Missing) -> MetricsWindow:
    """The ``metrics_window`` view: scrapes when two are usable, else Prometheus history.

    A copy of the chosen window with its source's errors (and why scrapes were passed over):
    the source's own view is shared with ``user_felt`` and stays as parsed.
    """
    if bundle.metrics is None and bundle.prometheus is None:
        raise Missing("no /metrics scrape and no Prometheus history (pass --metrics-url or --prometheus)")
    reasons: list[str] = []
    if bundle.metrics is not None:
        if not isinstance(scrape_window, Missing):
            return dataclasses.replace(scrape_window, errors=[e.message for e in bundle.errors_for("metrics")])
        reasons.append(str(scrape_window))
    if bundle.prometheus is not None:
        if not isinstance(history_window, Missing):
            skipped = [f"/metrics scrapes unusable ({r}); used Prometheus history" for r in reasons]
            return dataclasses.replace(history_window, notes=skipped + history_window.notes,
                                       errors=[e.message for e in bundle.errors_for("prometheus")])
        reasons.append(f"Prometheus history: {history_window}")
    raise Missing("; ".join(reasons))
