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

from dataclasses import dataclass

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import rerun
from doctor.checklib.routing import router_fix, router_read
from doctor.derive.router import ReplicaRow, RouterView
from doctor.model import Cause, EvidenceValue, Remediation, SymptomClass


@dataclass(frozen=True)
class Found:
    """The router's retries over the window against the requests it routed, and the replicas its
    circuit breaker ejected."""

    view: RouterView
    retries: float | None
    routed: float
    ejected: tuple[ReplicaRow, ...]


@check(code="LD314", name="router-retries", symptom=SymptomClass.PROXY_ONLY, cause=Cause.GATEWAY_RETRIES)
def router_retries(routing: RouterView, *, min_retry_share: float = 0.05) -> Result:
    view = router_read(routing)
    ejected = [r for r in view.replicas if r.ejected]
    if view.retries is None and not ejected:
        raise NotApplicable(_no_signal(view))
    found = Found(view, view.retries, view.routed or 0, tuple(ejected))
    share = (view.retries or 0) / found.routed if found.routed else 0.0
    if share < min_retry_share and not ejected:
        return Pass(_few_retries(found))
    return Fire(
        title=_title(found),
        summary=_summary(found),
        remediation=_remediation(found),
        evidence=_evidence(found),
    )


def _no_signal(view: RouterView) -> str:
    return f"{view.display} publishes no retry counter and ejected no replica"


def _few_retries(found: Found) -> str:
    return f"{found.retries or 0:g} retries of {found.routed:g} routed requests, no replica ejected"


def _title(found: Found) -> str:
    return f"{found.view.display} retries requests" + (" and ejects replicas" if found.ejected else "")


def _summary(found: Found) -> str:
    parts = []
    if found.retries:
        parts.append(f"{found.view.display} retried {found.retries:g} time(s) for {found.routed:g} routed request(s)")
    if found.ejected:
        parts.append("circuit breaker open for " + ", ".join(f"{r.url} (share {r.share or 0:.0%})" for r in found.ejected))
    return "; ".join(parts)


def _remediation(found: Found) -> Remediation:
    if found.ejected:
        key, suggested = "circuit_breaker", "lower, so it ejects sooner"
    else:
        key, suggested = "retries", "1 while the failing replica is found"
    return router_fix(found.view, key, suggested, "each retry pays the first try's wait again and its work lands on the peers",
                      rerun("no retries and every replica's breaker closed"))


def _evidence(found: Found) -> list[EvidenceValue]:
    return [EvidenceValue("retries", found.retries, "requests", "router /metrics delta"),
            EvidenceValue("routed", found.routed, "requests", "router /metrics delta"),
            EvidenceValue("ejected replicas", len(found.ejected), "replicas", "router circuit-breaker state")]
