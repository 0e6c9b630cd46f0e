"""Pull the metrics window of an incident that already happened from Prometheus's HTTP API.

The same quantities the scrapes give, over ``[end - since, end]``: counter increases,
histogram ``_sum`` / ``_count`` / ``_bucket`` increases, and gauge min / max (per engine with
``min_over_time`` / ``max_over_time``, across engines through a subquery) plus a range query
for the charts. Every answer is stored raw in ``PromQuery.response`` so analysis re-derives.

For each quantity the newest vLLM name is asked first; older names are asked only when it has
no series, so a Prometheus holding one vLLM version costs one query per part.

Then kube-state-metrics' HorizontalPodAutoscaler series over the same window (range queries of
``doctor.scalers.history.queries``: floor, ceiling, current and desired replicas, conditions),
for the HPAs of the engine's namespace when a ``k8s://`` target names it, else of every
namespace, so that a past incident says whether the scaler tried. One query when Prometheus
holds none (the desired replicas, under the new name, then the old).
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Mapping

import httpx

from doctor.engine_metrics.history import PRESENCE_PART, query_name
from doctor.engine_metrics.metric_names import FAMILIES, Family
from doctor.evidence import EvidenceError, PrometheusEvidence, PromQuery
from doctor.foundation import wire
from doctor.probes.deadlines import RunDeadline
from doctor.probes.http import (
    BodyTooLarge,
    DeadlineExceeded,
    bounded_get,
    error_kind,
    http_client,
    without_credentials,
)
from doctor.scalers.history import queries as scaler_queries

BY_ENGINE = "engine, model_name"
#: Range-query resolution (charts only): about this many points over the window, never finer than 1 s.
RANGE_POINTS = 240
#: Subquery resolution for the across-engines min / max: finer than any usual scrape interval so
#: no sample is stepped over, coarser only for windows so long that 20,000 steps are not enough.
SUBQUERY_STEPS = 20_000
SUBQUERY_MIN_STEP_S = 0.5


class _Stop(Exception):
    """Prometheus cannot answer any query (unreachable, not Prometheus, bad selector)."""


def matchers(selector: str) -> str:
    """``{job="vllm"}``, ``job="vllm"`` or ``""`` -> the label matchers inside the braces."""
    inner = selector.strip()
    if inner.startswith("{") and inner.endswith("}"):
        inner = inner[1:-1]
    return inner.strip().strip(",")


def duration(seconds: float) -> str:
    """A PromQL duration; milliseconds because PromQL durations take no fraction."""
    return f"{max(1, round(seconds * 1000))}ms"


def family_queries(family: Family, metric: str, selector: str, since_s: float) -> list[tuple[str, str, str]]:
    """(part, endpoint, PromQL) for one vLLM name of one family, the ``PRESENCE_PART`` first."""
    only = f'{family.label[0]}="{family.label[1]}"' if family.label else ""
    sel = "{" + ", ".join(filter(None, [matchers(selector), only])) + "}"
    window = duration(since_s)
    if family.kind == "counter":
        by = BY_ENGINE + (f", {family.sub_label}" if family.sub_label else "")
        # vLLM 0.2's aioprometheus exposed counters without the _total suffix: ask for both names.
        either = "{" + ", ".join(filter(None, [f'__name__=~"{metric}(_total)?"', matchers(selector)])) + "}"
        return [("increase", "query", f"sum by ({by}) (increase({either}[{window}]))")]
    if family.kind == "histogram":
        return [
            ("count", "query", f"sum by ({BY_ENGINE}) (increase({metric}_count{sel}[{window}]))"),
            ("sum", "query", f"sum by ({BY_ENGINE}) (increase({metric}_sum{sel}[{window}]))"),
            ("bucket", "query", f"sum by ({BY_ENGINE}, le) (increase({metric}_bucket{sel}[{window}]))"),
        ]
    agg = family.aggregate
    sub = f"[{window}:{duration(max(SUBQUERY_MIN_STEP_S, since_s / SUBQUERY_STEPS))}]"
    return [
        ("max", "query", f"{agg} by ({BY_ENGINE}) (max_over_time({metric}{sel}[{window}]))"),
        ("min", "query", f"{agg} by ({BY_ENGINE}) (min_over_time({metric}{sel}[{window}]))"),
        ("total_max", "query", f"max_over_time({agg}({metric}{sel}){sub})"),
        ("total_min", "query", f"min_over_time({agg}({metric}{sel}){sub})"),
        ("range", "query_range", f"{agg} by ({BY_ENGINE}) ({metric}{sel})"),
    ]


def query_history(
    url: str,
    *,
    since_s: float,
    selector: str = "",
    end_wall: float | None = None,
    headers: Mapping[str, str] | None = None,
    verify: bool | str = True,
    timeout_s: float = 10.0,
    run: RunDeadline | None = None,
    namespace: str | None = None,
) -> tuple[PrometheusEvidence, list[EvidenceError]]:
    """The vLLM metrics of ``[end - since_s, end]`` from Prometheus: (evidence with every raw answer, errors).

    For an incident that already happened, the live /metrics scrapes cannot see the window;
    Prometheus kept it. Never raises: an unreachable or non-Prometheus URL stops the queries
    and becomes one fatal error; one slow query costs only itself (a second stops the rest).
    Each query waits ``min(timeout_s, what is left of run)``; none is sent once it ran out.
    ``namespace``: the HPAs' (every namespace's when None).
    """
    # Rounded to what the API is sent, so sample times line up with the window's edges.
    end = round(time.time() if end_wall is None else end_wall, 3)
    evidence = PrometheusEvidence(url=without_credentials(url), since_s=since_s, selector=selector, end_wall=end)
    step_s = max(1.0, since_s / RANGE_POINTS)
    try:
        client = http_client(headers, verify, timeout_s)
    except (OSError, ssl.SSLError) as exc:
        message = f"cannot use the CA certificates {verify}: {exc}"
        return evidence, [EvidenceError("prometheus", evidence.url, "load CA certificates", "tls", message, fatal=True)]
    session = _Session(client, url.rstrip("/"), evidence.url, timeout_s, run)
    with client:
        try:
            for family in FAMILIES:
                for metric in family.names:
                    if _ask_family(session, evidence, family, metric, end, step_s):
                        break  # an older name is asked only when the newer one has no series
            _ask_scalers(session, evidence, namespace, end, step_s)
        except _Stop:
            pass
    return evidence, session.errors


def _ask_family(
    session: _Session, evidence: PrometheusEvidence, family: Family, metric: str, end: float, step_s: float
) -> bool:
    """Ask every part of one family under one name; False when that name has no series."""
    since_s = evidence.since_s
    for part, endpoint, expr in family_queries(family, metric, evidence.selector, since_s):
        params = {"query": expr, "timeout": duration(session.timeout_s)}
        if endpoint == "query":
            params["time"] = f"{end:.3f}"
        else:
            params.update(start=f"{end - since_s:.3f}", end=f"{end:.3f}", step=f"{step_s:g}")
        query = PromQuery(name=query_name(family.key, part, metric), expr=expr, endpoint=endpoint)
        evidence.queries.append(query)
        answered = session.run(endpoint, params, query)
        if part == PRESENCE_PART[family.kind] and not (answered and _has_result(query.response)):
            return False
    return True


def _ask_scalers(session: _Session, evidence: PrometheusEvidence, namespace: str | None, end: float, step_s: float) -> None:
    """The HPA series of one kube-state-metrics generation: the first whose desired replicas have series."""
    window = {"start": f"{end - evidence.since_s:.3f}", "end": f"{end:.3f}", "step": f"{step_s:g}",
              "timeout": duration(session.timeout_s)}
    for generation in scaler_queries(namespace):
        for i, (name, expr) in enumerate(generation):
            query = PromQuery(name=name, expr=expr, endpoint="query_range")
            evidence.queries.append(query)
            answered = session.run("query_range", {"query": expr, **window}, query)
            if i == 0 and not (answered and _has_result(query.response)):
                break  # no series under these names: the older generation's, if any
        else:
            return


class _Session:
    """One Prometheus, its errors, and when to stop asking it."""

    #: Timeouts tolerated before giving up: one slow query is an overloaded server, more is a pattern
    #: that would otherwise cost a deadline for each of the ~30 queries.
    MAX_TIMEOUTS = 2

    def __init__(self, client: httpx.Client, base: str, target: str, timeout_s: float,
                 run: RunDeadline | None = None) -> None:
        self.client = client
        self.base = base
        self.target = target
        self.timeout_s = timeout_s
        self.deadline = run
        self.errors: list[EvidenceError] = []
        self.timeouts = 0

    def fail(self, query: PromQuery, kind: str, message: str, *, fatal: bool) -> None:
        self.errors.append(
            EvidenceError("prometheus", self.target, f"{query.endpoint} {query.expr}", kind, message, fatal=fatal)
        )
        if fatal:
            raise _Stop

    def run(self, endpoint: str, params: dict[str, str], query: PromQuery) -> bool:
        """Run one query into ``query``; False on a per-query error, ``_Stop`` when none can succeed."""
        timeout = self.timeout_s if self.deadline is None else self.deadline.grant(self.timeout_s)
        if timeout <= 0 and self.deadline is not None:
            query.error = "not sent: no time left"
            self.fail(query, "deadline", self.deadline.spent(f"Prometheus at {self.target}: {query.name}"), fatal=True)
        try:
            response, text = bounded_get(
                self.client, f"{self.base}/api/v1/{endpoint}", deadline_s=timeout, params=params
            )
        except (httpx.HTTPError, DeadlineExceeded, BodyTooLarge, OSError) as exc:
            query.error = f"{type(exc).__name__}: {exc}"
            kind = error_kind(exc)
            if kind == "timeout":
                self.timeouts += 1
            fatal = kind != "timeout" or self.timeouts >= self.MAX_TIMEOUTS
            self.fail(query, kind, f"Prometheus at {self.target}: {query.error}", fatal=fatal)
            return False
        query.response = text
        try:
            body = wire.loads(text)
        except wire.WireError:
            body = None
        if not isinstance(body, dict) or "status" not in body:
            query.error = f"HTTP {response.status_code}, not a Prometheus API answer"
            self.fail(query, "malformed", f"{self.target} is not a Prometheus HTTP API ({query.error})", fatal=True)
            return False
        if body["status"] != "success":
            query.error = f"{body.get('errorType', 'error')}: {body.get('error', '')}"
            # bad_data is the selector or the URL, so every other query would fail the same way.
            fatal = body.get("errorType") == "bad_data"
            self.fail(query, "http-status", f"Prometheus rejected a query: {query.error}", fatal=fatal)
            return False
        return True


def _has_result(response: str) -> bool:
    try:
        data = wire.loads(response)
    except wire.WireError:
        return False
    data = data.get("data") if isinstance(data, dict) else None
    return isinstance(data, dict) and bool(data.get("result"))
