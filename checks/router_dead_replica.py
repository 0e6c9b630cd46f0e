"""The router sends requests to a replica that does not answer.

What it detects:
A replica behind the router did not answer its /metrics (it stopped answering during the window,
or never did) while the router still counted it healthy or kept sending it requests: a wedged or
frozen engine (SIGSTOP, a hung GPU) whose health the router checks only every
`--health-check-interval-secs` (vllm-router: 60 s, on `--health-check-endpoint` /health, after
`--health-failure-threshold` failures). A replica the worker list names that never answered is a
finding too.

Why it matters:
Every request the router sends there waits until its timeout: users see stalls the engine's
metrics cannot show (it writes none) and the gateway blames no one.

Evidence:
routing: per replica its /metrics scrapes (answered or not), the router's health gauge and its
requests over the window; the health-check settings in use.

Remediation:
Check health more often, on an endpoint that exercises the engine, and eject sooner.

Example:
replica :8002 stopped answering at the window's middle; vllm-router still counted it healthy and
sent it 9 requests (--health-check-interval-secs 60) -> --health-check-interval-secs 5.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.checking.contract import Fire, Pass, Result, check
from doctor.checklib import rerun
from doctor.checklib.routing import router_fix, router_read, setting_said
from doctor.derive.router import ReplicaRow, RouterView
from doctor.model import Cause, EvidenceValue, Remediation, Severity, SymptomClass


def _said(row: ReplicaRow) -> str:
    how = "stopped answering during the window" if row.stopped_answering else "never answered"
    routed = f", the router sent it {row.requests:g} request(s)" if row.requests else ""
    health = {True: ", the router counted it healthy", False: ", the router counted it unhealthy", None: ""}[row.router_healthy]
    return f"{row.url} {how} ({row.failure or 'no answer'}){health}{routed}"


@dataclass(frozen=True)
class Found:
    """The replicas that stopped answering or never answered their /metrics, how many of them the
    router still routed to (or counted healthy), and the health-check interval to suggest."""

    view: RouterView
    silent: tuple[ReplicaRow, ...]
    routed: int
    interval: int


@check(code="LD313", name="router-dead-replica", symptom=SymptomClass.PROXY_ONLY, cause=Cause.ROUTING)
def router_dead_replica(routing: RouterView) -> Result:
    view = router_read(routing)
    silent = [r for r in view.replicas if r.scraped and (r.stopped_answering or r.answered == 0)]
    if not silent:
        return Pass(_all_answered(len(view.replicas)))
    routed = [r for r in silent if r.router_healthy or (r.requests or 0) > 0]
    interval = view.setting("health_interval")
    seconds = interval.value if interval is not None and interval.value else None
    found = Found(view, tuple(silent), len(routed), 5 if seconds is None or not seconds.isdigit() or int(seconds) > 5 else 2)
    return Fire(
        title=_title(found),
        summary=_summary(found),
        severity=Severity.CRITICAL if routed else Severity.WARNING,
        felt=bool(routed),
        remediation=_remediation(found),
        evidence=_evidence(found),
    )


def _all_answered(replicas: int) -> str:
    return f"every replica answered its /metrics over the window ({replicas} read)"


def _title(found: Found) -> str:
    if found.routed:
        return f"{found.view.display} routes to a replica that does not answer"
    return "A replica the router lists does not answer"


def _summary(found: Found) -> str:
    checks = ", ".join(setting_said(found.view, k) for k in ("health_interval", "health_endpoint", "health_failures"))
    return "; ".join(_said(r) for r in found.silent) + f" (health checks: {checks})"


def _remediation(found: Found) -> Remediation:
    return router_fix(found.view, "health_interval", f"{found.interval} (and a health endpoint that runs the engine)",
                      f"the router learns a replica is gone only at its next health check: "
                      f"{found.routed} silent replica(s) still routed", rerun("the silent replica ejected within seconds"))


def _evidence(found: Found) -> list[EvidenceValue]:
    return ([EvidenceValue("requests routed to it", r.requests, "requests", f"routing view: {r.url}")
             for r in found.silent if r.requests is not None]
            + [EvidenceValue("silent replicas", len(found.silent), "replicas", "replicas' /metrics")])
