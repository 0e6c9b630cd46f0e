"""The router retries requests or ejects replicas.

What it detects:
Over the window the router sent requests again (its retries counter) or its circuit breaker opened
for a replica (ejected, its share moved to its peers): a failing or slow replica, retries of
timed-out streams that double the work.

Why it matters:
A retried request pays its first try's wait again; an ejected replica's share lands on the
others, which then queue. The engine's metrics show neither: the router decides.

Evidence:
routing: the router's retries counter over the window against the requests it routed, and each
replica's circuit-breaker state and share.

Remediation:
Find the failing replica; meanwhile bound the retries (or the breaker's threshold) so the peers
are not flooded.

Options:
min_retry_share: retries per routed request at or above which it fires

Example:
vllm-router retried 7 of 8 requests (--retry-max-retries 5); replica :8002 failed every one -> fix
:8002, --retry-max-retries 1.
"""

from __future__ import annotations

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import rerun
from doctor.checklib.routing import router_fix, router_read
from doctor.derive.router import RouterView
from doctor.model import Cause, EvidenceValue, SymptomClass


@check(code="LD314", name="router-retries", symptom=SymptomClass.PROXY_ONLY, cause=Cause.GATEWAY_RETRIES)
def router_retries(routing: RouterView, *, min_retry_share: float = 0.05) -> Result:
    view = router_read(routing)
    ejected = [r for r in view.replicas if r.ejected]
    if view.retries is None and not ejected:
        raise NotApplicable(f"{view.display} publishes no retry counter and ejected no replica")
    routed = view.routed or 0
    share = (view.retries or 0) / routed if routed else 0.0
    if share < min_retry_share and not ejected:
        return Pass(f"{view.retries or 0:g} retries of {routed:g} routed requests, no replica ejected")
    parts = []
    if view.retries:
        parts.append(f"{view.display} retried {view.retries:g} time(s) for {routed:g} routed request(s)")
    if ejected:
        parts.append("circuit breaker open for " + ", ".join(f"{r.url} (share {r.share or 0:.0%})" for r in ejected))
    key = "circuit_breaker" if ejected else "retries"
    return Fire(
        title=f"{view.display} retries requests" + (" and ejects replicas" if ejected else ""),
        summary="; ".join(parts),
        remediation=router_fix(view, key, "1 while the failing replica is found" if key == "retries" else "lower, so it ejects sooner",
                               "each retry pays the first try's wait again and its work lands on the peers",
                               rerun("no retries and every replica's breaker closed")),
        evidence=[EvidenceValue("retries", view.retries, "requests", "router /metrics delta"),
                  EvidenceValue("routed", routed, "requests", "router /metrics delta"),
                  EvidenceValue("ejected replicas", len(ejected), "replicas", "router circuit-breaker state")],
    )
