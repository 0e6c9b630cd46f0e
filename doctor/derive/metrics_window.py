"""What /metrics (or Prometheus history) says happened over the probe window.

Scrapes taken around the probe are preferred: they cover exactly the requests the doctor sent.
Prometheus history is the fallback (and the only source when no probe was sent). The view's
dataclasses live in ``doctor.vllm_metrics.views`` with the code that fills them.
"""

from __future__ import annotations

from doctor.derive.missing import Missing
from doctor.evidence import Bundle
from doctor.vllm_metrics.history import window_from_history
from doctor.vllm_metrics.readings import NoWindow
from doctor.vllm_metrics.views import EngineWindow, GaugeWindow, HistogramWindow, MetricsWindow
from doctor.vllm_metrics.window import window_from_scrapes

__all__ = [
    "EngineWindow",
    "GaugeWindow",
    "HistogramWindow",
    "MetricsWindow",
    "derive_metrics_window",
]


def derive_metrics_window(bundle: Bundle) -> MetricsWindow:
    """The ``metrics_window`` view: scrapes when two are usable, else Prometheus history."""
    if bundle.metrics is None and bundle.prometheus is None:
        raise Missing("no /metrics scrape and no Prometheus history (pass --metrics-url or --prometheus)")
    reasons: list[str] = []
    if bundle.metrics is not None:
        try:
            window = window_from_scrapes(bundle.metrics.scrapes)
        except NoWindow as exc:
            reasons.append(str(exc))
        else:
            window.errors = [e.message for e in bundle.errors_for("metrics")]
            return window
    if bundle.prometheus is not None:
        try:
            window = window_from_history(bundle.prometheus)
        except NoWindow as exc:
            reasons.append(f"Prometheus history: {exc}")
        else:
            window.notes[:0] = [f"/metrics scrapes unusable ({r}); used Prometheus history" for r in reasons]
            window.errors = [e.message for e in bundle.errors_for("prometheus")]
            return window
    raise Missing("; ".join(reasons))
