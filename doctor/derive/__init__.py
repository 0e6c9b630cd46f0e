"""Derived evidence: pure views computed from the bundle at analysis time, memoised per run.

A check names a view as a parameter exactly as it names a raw kind. Each derivation takes the
whole ``Bundle`` and returns its view, or raises ``Missing`` with a reason the report shows
(e.g. "no /metrics scrape and no Prometheus history"). Adding a view means adding a module and
one entry here: views belong to the engine, checks to ``checks/``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from doctor.derive.log_facts import derive_log_facts
from doctor.derive.metrics_window import derive_metrics_window
from doctor.derive.missing import Missing
from doctor.derive.stream_stats import derive_stream_stats
from doctor.derive.user_felt import derive_user_felt
from doctor.evidence import Bundle

DERIVED: dict[str, Callable[[Bundle], Any]] = {
    "stream_stats": derive_stream_stats,
    "metrics_window": derive_metrics_window,
    "log_facts": derive_log_facts,
    "user_felt": derive_user_felt,
}

__all__ = ["DERIVED", "Missing"]
