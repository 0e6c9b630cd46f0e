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

from doctor.checking.contract import Fire, Pass, Result, check
from doctor.checklib import rerun
from doctor.checklib.routing import router_fix, router_read, setting_said
from doctor.derive.router import ReplicaRow, RouterView
from doctor.model import Cause, EvidenceValue, Severity, SymptomClass


def _said(row: ReplicaRow) -> str:
    how = "stopped answering during the window" if row.stopped_answering else "never answered"
    routed = f", the router sent it {row.requests:g} request(s)" if row.requests else ""
    health = {True: ", the router counted it healthy", False: ", the router counted it unhealthy", None: ""}[row.router_healthy]
    return f"{row.url} {how} ({row.failure or 'no answer'}){health}{routed}"


@check(code="LD313", name="router-dead-replica", symptom=SymptomClass.PROXY_ONLY, cause=Cause.ROUTING)
def router_dead_replica(routing: RouterView) -> Result:
    view = router_read(routing)
    silent = [r for r in view.replicas if r.scraped and (r.stopped_answering or r.answered == 0)]
    if not silent:
        return Pass(f"every replica answered its /metrics over the window ({len(view.replicas)} read)")
    routed = [r for r in silent if r.router_healthy or (r.requests or 0) > 0]
    interval = view.setting("health_interval")
    seconds = interval.value if interval is not None and interval.value else None
    suggested = "5" if seconds is None or not seconds.isdigit() or int(seconds) > 5 else "2"
    checks = ", ".join(setting_said(view, k) for k in ("health_interval", "health_endpoint", "health_failures"))
    summary = "; ".join(_said(r) for r in silent) + f" (health checks: {checks})"
    return Fire(
        title=f"{view.display} routes to a replica that does not answer" if routed else "A replica the router lists does not answer",
        summary=summary,
        severity=Severity.CRITICAL if routed else Severity.WARNING,
        felt=bool(routed),
        remediation=router_fix(view, "health_interval", f"{suggested} (and a health endpoint that runs the engine)",
                               f"the router learns a replica is gone only at its next health check: "
                               f"{len(routed)} silent replica(s) still routed", rerun("the silent replica ejected within seconds")),
        evidence=[EvidenceValue("requests routed to it", r.requests, "requests", f"routing view: {r.url}") for r in silent if r.requests is not None]
        + [EvidenceValue("silent replicas", len(silent), "replicas", "replicas' /metrics")],
    )
