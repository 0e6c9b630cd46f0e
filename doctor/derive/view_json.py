"""The views as the report carries them, read back into the dataclasses that declare them.

``doctor.checking.runner.views_of`` writes each view into ``Report.views`` as JSON
(``serial.to_jsonable``): what the JSON report and its schema publish. ``view`` reads one back
into the dataclass its derivation returns (``serial.from_jsonable``, its exact inverse), so a
renderer, ``compare`` and a fleet's rows read ``ps.ttft.p90`` as attributes mypy checks, and
each field of a view is declared once, on its dataclass: there is no hand-written JSON twin to
keep in step, and the schema's ``view_*`` definitions are generated from the same dataclasses
(``tests/support/view_schema.py``). Like Lighthouse's ``types/lhr``, the dataclasses are the
contract of the report's ``views``; a view that could not be computed is ``{"missing": reason}``.

The ``sizing`` view is a JSON document from the start (``doctor.sizing.sizing_json.SizingSummary``)
and is returned as it is.
"""

from __future__ import annotations

from functools import cache
from typing import Any, Literal, get_type_hints, is_typeddict, overload

from doctor.derive import DERIVED
from doctor.derive.engine import EngineIdentity
from doctor.derive.log_facts import LogFacts
from doctor.derive.metrics_window import MetricsWindow
from doctor.derive.request_hops import RequestHopsView
from doctor.derive.router import RouterView
from doctor.derive.stream_stats import StreamStats
from doctor.derive.user_felt import UserFelt
from doctor.foundation.serial import from_jsonable
from doctor.model import Report
from doctor.scalers.model import ScalingView
from doctor.sizing.sizing_json import SizingSummary

#: The views by the name ``Report.views`` keys them with, as a renderer reads them.
ViewName = Literal["stream_stats", "metrics_window", "log_facts", "user_felt", "sizing", "engine", "request_hops", "scalers",
                   "routing"]

# Field names a renderer picks by name from a table of rows; ``tests/derive/test_view_json.py``
# holds each to a field of that type, so a renamed field fails there.

#: The fields of ``stream_stats.PathStats`` that hold a ``Dist``.
DistKey = Literal["client_frozen", "ttft", "tpot", "itl", "e2e", "max_gap", "client_queue", "events_per_read",
                  "bytes_per_read", "headers_to_first_token", "first_to_last_token", "warmup_ttft", "ttft_felt"]
#: The quantiles of a ``Dist`` a renderer shows.
Quantile = Literal["min", "p50", "p90", "p99", "max", "mean", "p95"]
#: The fields of ``MetricsWindow`` holding a ``HistogramWindow`` / ``GaugeWindow``.
HistogramKey = Literal["ttft", "queue", "prefill", "prefill_forward", "decode", "itl", "e2e", "step_tokens"]
GaugeKey = Literal["kv_usage", "running", "waiting"]
#: Its counter deltas, each ``None`` when the family was absent.
CounterKey = Literal["preemptions", "prompt_tokens", "generation_tokens", "prefix_cache_hits", "prefix_cache_queries",
                     "spec_draft_tokens", "spec_accepted_tokens", "spec_drafts"]


@cache
def view_type(name: ViewName) -> Any:
    """The type of a view: what its derivation (``doctor.derive.DERIVED``) returns."""
    return get_type_hints(DERIVED[name])["return"]


@overload
def view(report: Report, name: Literal["stream_stats"]) -> tuple[StreamStats | None, str | None]: ...
@overload
def view(report: Report, name: Literal["metrics_window"]) -> tuple[MetricsWindow | None, str | None]: ...
@overload
def view(report: Report, name: Literal["log_facts"]) -> tuple[LogFacts | None, str | None]: ...
@overload
def view(report: Report, name: Literal["user_felt"]) -> tuple[UserFelt | None, str | None]: ...
@overload
def view(report: Report, name: Literal["sizing"]) -> tuple[SizingSummary | None, str | None]: ...
@overload
def view(report: Report, name: Literal["engine"]) -> tuple[EngineIdentity | None, str | None]: ...
@overload
def view(report: Report, name: Literal["request_hops"]) -> tuple[RequestHopsView | None, str | None]: ...
@overload
def view(report: Report, name: Literal["scalers"]) -> tuple[ScalingView | None, str | None]: ...
@overload
def view(report: Report, name: Literal["routing"]) -> tuple[RouterView | None, str | None]: ...
def view(report: Report, name: ViewName) -> tuple[Any, str | None]:
    """A derived view as its dataclass, and, when it is absent or unreadable, the reason instead."""
    data = report.views.get(name)
    if not isinstance(data, dict):
        return None, f"{name} was not computed"
    if set(data) == {"missing"}:
        return None, data["missing"] or f"{name} is missing"
    tp = view_type(name)
    if is_typeddict(tp):
        return data, None
    try:
        return from_jsonable(tp, data), None
    except TypeError as exc:  # a report's views are written by this version's code: a bug, said, not raised
        return None, f"{name} could not be read: {exc}"


__all__ = ["CounterKey", "DistKey", "GaugeKey", "HistogramKey", "Quantile", "ViewName", "view", "view_type"]
