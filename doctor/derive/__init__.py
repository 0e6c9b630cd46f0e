"""Derived evidence: pure views computed from the bundle at analysis time, memoised per run.

A check names a view as a parameter exactly as it names a raw kind. Each derivation takes the
whole ``Bundle`` and returns its view, or raises ``Missing`` with a reason the report shows
(e.g. "no /metrics scrape and no Prometheus history"). A derivation that builds on other views
names them as its further parameters, as a check names its evidence; ``Evidence`` computes each
once and passes it, or the ``Missing`` that says why there is none (so the parameter's type is
``View | Missing``, and the derivation decides what an absent input means). Adding a view means
adding a module and one entry here: views belong to the engine, checks to ``checks/``. A view
that renderers read is rebuilt from the report's JSON by ``doctor.derive.view_json.view``.

``Evidence`` is what the runner, the classifier and tests read a bundle through: it resolves
exactly the names a check may declare (``bundle``, the raw kinds, the views below), once each.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from functools import cache
from typing import Any

from doctor.derive.engine import derive_engine
from doctor.derive.gateway import derive_gateway
from doctor.derive.log_facts import derive_log_facts
from doctor.derive.metrics_window import derive_history_window, derive_metrics_window, derive_scrape_window
from doctor.derive.missing import Missing
from doctor.derive.request_hops import derive_request_hops
from doctor.derive.router import derive_routing
from doctor.derive.scaling import derive_scalers
from doctor.derive.sizing import derive_sizing
from doctor.derive.stream_stats import derive_stream_stats
from doctor.derive.user_felt import derive_user_felt
from doctor.evidence import RAW_KINDS, Bundle

#: The views a check may name; the report carries each of them (``doctor.checking.runner.views_of``).
DERIVED: dict[str, Callable[..., Any]] = {
    "stream_stats": derive_stream_stats,
    "metrics_window": derive_metrics_window,
    "log_facts": derive_log_facts,
    "user_felt": derive_user_felt,
    "sizing": derive_sizing,
    "gateway": derive_gateway,
    "engine": derive_engine,
    "scalers": derive_scalers,
    "request_hops": derive_request_hops,
    "routing": derive_routing,
}

#: Views only derivations name: each metrics source's window alone, which ``metrics_window``
#: chooses between and ``user_felt`` reads both of. The report carries ``metrics_window``.
INTERMEDIATE: dict[str, Callable[..., Any]] = {
    "scrape_window": derive_scrape_window,
    "history_window": derive_history_window,
}

VIEWS: dict[str, Callable[..., Any]] = {**DERIVED, **INTERMEDIATE}


@cache
def view_inputs(derivation: Callable[..., Any]) -> tuple[str, ...]:
    """The views a derivation builds on: its parameters after the bundle."""
    return tuple(inspect.signature(derivation).parameters)[1:]


class Evidence:
    """Lazy, memoised access to raw kinds and derived views of one bundle."""

    def __init__(self, bundle: Bundle) -> None:
        self.bundle = bundle
        self._cache: dict[str, Any] = {}
        self._missing: dict[str, str] = {}

    def get(self, kind: str) -> Any:
        """The evidence of that kind; raises ``Missing`` with the reason when there is none."""
        if kind in self._missing:
            raise Missing(self._missing[kind])
        if kind in self._cache:
            return self._cache[kind]
        try:
            value = self._resolve(kind)
        except Missing as exc:
            self._missing[kind] = str(exc)
            raise
        self._cache[kind] = value
        return value

    def maybe(self, kind: str) -> Any:
        try:
            return self.get(kind)
        except Missing:
            return None

    def missing_reason(self, kind: str) -> str | None:
        """Why ``kind`` was missing when it was last asked for; None if it was found or never asked."""
        return self._missing.get(kind)

    def _input(self, kind: str) -> Any:
        """A view as a derivation receives it: the view, or the ``Missing`` that says why not."""
        try:
            return self.get(kind)
        except Missing as exc:
            return exc

    def _resolve(self, kind: str) -> Any:
        if kind == "bundle":
            return self.bundle
        if kind in RAW_KINDS:
            value = getattr(self.bundle, kind)
            if value is None:
                errors = [e.message for e in self.bundle.errors_for(kind) if e.fatal]
                raise Missing("; ".join(errors) if errors else f"no {kind} evidence was collected")
            return value
        if kind in VIEWS:
            derivation = VIEWS[kind]
            inputs = {name: self._input(name) for name in view_inputs(derivation)}
            try:
                return derivation(self.bundle, **inputs)
            except Missing:
                raise
            except Exception as exc:  # a parser bug must not take the run down
                raise Missing(f"could not derive {kind}: {type(exc).__name__}: {exc}") from exc
        raise Missing(f"unknown evidence kind {kind!r}")


__all__ = ["DERIVED", "INTERMEDIATE", "VIEWS", "Evidence", "Missing", "view_inputs"]
