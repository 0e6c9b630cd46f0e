"""Did the scaler try? kube-state-metrics' HPA series over a past incident's window, from Prometheus.

A live read shows what the HorizontalPodAutoscaler says now; an incident an hour ago needs what it
said then. kube-state-metrics exports each HPA's floor and ceiling, its current and desired
replicas and its conditions as gauges, so Prometheus kept them beside the engine's queue. Read
over the window they answer the on-call question: did the desired replicas rise, did they reach
the ceiling (``ScalingLimited``), did the running replicas follow, could the scaler read its
metric at all (``ScalingActive``).

kube-state-metrics 2.0 renamed ``kube_hpa_*`` (label ``hpa``) to ``kube_horizontalpodautoscaler_*``
(label ``horizontalpodautoscaler``); the probe asks the new names first and the old only when
the new have no series (``GENERATIONS``). The raw answers are ``PromQuery``s of the bundle's
``PrometheusEvidence`` named ``scaler.<series>@<metric>``; this module reads them at analysis. Pure.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise

from doctor.engine_metrics.history import query_name, result_rows, sample_point, split_query_name
from doctor.evidence import PrometheusEvidence, PromQuery
from doctor.foundation.units import fmt_seconds

FAMILY = "scaler"
#: (metric prefix, the label naming the HPA), newest first (kube-state-metrics v2.0 renamed them).
GENERATIONS = (("kube_horizontalpodautoscaler", "horizontalpodautoscaler"), ("kube_hpa", "hpa"))
#: The series read, the one that says whether a generation has series first.
SERIES = ("status_desired_replicas", "status_current_replicas", "spec_max_replicas", "spec_min_replicas", "status_condition")

#: The conditions timed over the window: (condition, status) -> the ``ScalerHistory`` field.
CONDITIONS = {("ScalingLimited", "true"): "limited_s", ("ScalingActive", "false"): "inactive_s"}

Samples = list[tuple[float, float]]  # (seconds from the window's start, value)


def queries(namespace: str | None) -> list[list[tuple[str, str]]]:
    """Per generation, (``PromQuery.name``, PromQL) of each series, for the HPAs of ``namespace``
    (every namespace when None): one range query each, by HPA (and condition)."""
    selector = f'{{namespace="{namespace}"}}' if namespace else ""
    asked = []
    for prefix, label in GENERATIONS:
        by = f"namespace, {label}"
        asked.append([(query_name(FAMILY, series, f"{prefix}_{series}"),
                       f"max by ({by}{', condition, status' if series == 'status_condition' else ''}) ({prefix}_{series}{selector})")
                      for series in SERIES])
    return asked


@dataclass
class ScalerHistory:
    """One HPA over the window: its floor and ceiling (the last values), its desired and current
    replicas sampled, and how long ``ScalingLimited`` was true and ``ScalingActive`` false
    (seconds, None when the condition series was not there); ``metric``: the series' prefix read."""

    namespace: str
    name: str
    metric: str
    floor: float | None = None
    ceiling: float | None = None
    desired: Samples = field(default_factory=list)
    current: Samples = field(default_factory=list)
    limited_s: float | None = None
    inactive_s: float | None = None
    # Asked for the served workload's namespace (a ``k8s://`` target named it): only then is this HPA
    # known to scale the engine; without it every HPA of the cluster answers, and it is context.
    scoped: bool = False

    @property
    def label(self) -> str:
        return f"HorizontalPodAutoscaler {self.namespace}/{self.name}"

    @property
    def rose(self) -> bool:
        """Whether the desired replicas went above where they started."""
        return bool(self.desired) and max(v for _, v in self.desired) > self.desired[0][1]

    @property
    def at_ceiling_s(self) -> float:
        """Seconds the desired replicas stood at the ceiling (or ``ScalingLimited`` said so, the longer)."""
        top = self.ceiling
        at = _while(self.desired, lambda v: top is not None and v >= top)
        return max(at, self.limited_s or 0.0)

    @property
    def lag_s(self) -> float:
        """Seconds the current replicas stood below the desired ones."""
        wanted = dict(self.desired)
        return _while([(t, v - wanted.get(t, v)) for t, v in self.current], lambda short: short < 0)

    def said(self) -> str:
        """What the scaler did over the window, in one sentence of numbers."""
        if not self.desired:
            return f"{self.label}: no desired-replicas samples in the window"
        first, top, last = self.desired[0][1], max(v for _, v in self.desired), self.desired[-1][1]
        bounds = f"floor {_n(self.floor)}, ceiling {_n(self.ceiling)}"
        stayed = ("stood at its ceiling" if self.ceiling is not None and first >= self.ceiling
                  else "the scaler did not try")
        parts = [f"desired rose {_n(first)} -> {_n(top)} (now {_n(last)}; {bounds})" if self.rose
                 else f"desired stayed at {_n(first)} ({bounds}): {stayed}"]
        if self.at_ceiling_s > 0:
            parts.append(f"at its ceiling for {fmt_seconds(self.at_ceiling_s)}")
        if self.lag_s > 0:
            parts.append(f"current replicas below desired for {fmt_seconds(self.lag_s)}")
        if self.inactive_s:
            parts.append(f"ScalingActive false for {fmt_seconds(self.inactive_s)} (its metric unreadable)")
        return f"{self.label}: " + ", ".join(parts)


def read_history(evidence: PrometheusEvidence | None) -> list[ScalerHistory]:
    """Every HPA the answered ``scaler.*`` queries hold, under the first generation that has series."""
    if evidence is None:
        return []
    answered: dict[tuple[str, str], PromQuery] = {}
    for query in evidence.queries:
        key = split_query_name(query.name)
        if key is not None and key[0] == FAMILY and query.error is None and query.response:
            answered[(key[1], key[2])] = query
    start = evidence.end_wall - evidence.since_s
    for prefix, label in GENERATIONS:
        rows = {series: result_rows(answered.get((series, f"{prefix}_{series}"))) for series in SERIES}
        if rows[SERIES[0]]:
            scoped = 'namespace="' in answered[(SERIES[0], f"{prefix}_{SERIES[0]}")].expr
            return [dataclasses.replace(h, scoped=scoped) for h in _generation(rows, prefix, label, start)]
    return []


def _generation(rows: dict[str, list[dict]], prefix: str, label: str, start: float) -> list[ScalerHistory]:
    """The HPAs of one generation's answers (``label`` names the HPA), by namespace and name."""
    found: dict[tuple[str, str], ScalerHistory] = {}

    def hpa(labels: dict[str, str]) -> ScalerHistory:
        key = (labels.get("namespace", ""), labels.get(label, "?"))
        return found.setdefault(key, ScalerHistory(namespace=key[0], name=key[1], metric=prefix))

    for series, attr in (("status_desired_replicas", "desired"), ("status_current_replicas", "current")):
        for row in rows[series]:
            setattr(hpa(row["metric"]), attr, _samples(row, start))
    for series, attr in (("spec_max_replicas", "ceiling"), ("spec_min_replicas", "floor")):
        for row in rows[series]:
            if samples := _samples(row, start):
                setattr(hpa(row["metric"]), attr, samples[-1][1])
    for row in rows["status_condition"]:
        labels = row["metric"]
        timed = CONDITIONS.get((labels.get("condition", ""), labels.get("status", "")))
        if timed is not None:
            setattr(hpa(labels), timed, _while(_samples(row, start), lambda v: v >= 1))
    return sorted(found.values(), key=lambda h: (h.namespace, h.name))


def _samples(row: dict, start: float) -> Samples:
    return [(t - start, v) for t, v in (sample_point(p) for p in row.get("values") or []) if t is not None and v is not None]


def _while(samples: Samples, holds: Callable[[float], bool]) -> float:
    """Seconds over which ``holds(value)`` is true, each sample counting until the next one."""
    return sum(t_next - t for (t, v), (t_next, _) in pairwise(samples) if holds(v))


def _n(value: float | None) -> str:
    return "?" if value is None else f"{value:g}"
