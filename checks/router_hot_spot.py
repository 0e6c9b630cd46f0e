"""One replica takes far more than its share of the requests and queues while others idle.

What it detects:
Over the window the router sent one replica a share of the requests far above its fair share
(1/N), that replica had requests waiting (its own waiting gauge) while another replica had none:
cache-aware routing pinning a shared prefix to the replica that holds it, stale load scores with a
tie-break that keeps picking one replica, a consistent hash with a hot key.

Why it matters:
The fleet has room and users still queue: the policy, not the capacity, decides the wait. The
router's balance thresholds say when it stops following the cache for load (vllm-router: only when
the busiest replica has `--balance-abs-threshold` more requests than the idlest AND more than
`--balance-rel-threshold` times it).

Evidence:
routing: per replica the router's requests counter over the window (share), its in-flight
count, the replica's own waiting gauge; the policy and thresholds in use.

Remediation:
Lower the balance threshold so load wins sooner (cache_aware), or a load-aware policy.

Options:
min_over_fair: the hot replica's share over the fair share (1/N) at or above which it fires
min_requests: routed requests in the window below which shares say nothing

Example:
vllm-router --policy cache_aware: replica :8001 took 94 % of 48 requests (fair 50 %) with up to 7
waiting while :8002 had none -> --balance-abs-threshold 2.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import rerun
from doctor.checklib.routing import replica_values, router_fix, router_read, setting_said
from doctor.derive.router import ReplicaRow, RouterView
from doctor.model import Cause, EvidenceValue, Remediation, SymptomClass


@dataclass(frozen=True)
class Found:
    """The busiest replica against its fair share (1 / ``replicas``) of the ``routed`` requests, the
    replicas that stayed idle meanwhile, how many waited on it, and the setting to change (the
    cache-aware balance threshold where the policy has one, else the policy) with its value."""

    view: RouterView
    routed: float
    replicas: int
    hot: ReplicaRow
    idle: tuple[ReplicaRow, ...]
    queued: float
    key: str

    @property
    def fair(self) -> float:
        return 1 / self.replicas


@check(code="LD312", name="router-hot-spot", symptom=SymptomClass.PROXY_ONLY, cause=Cause.ROUTING)
def router_hot_spot(routing: RouterView, *, min_over_fair: float = 1.5, min_requests: float = 8) -> Result:
    view = router_read(routing)
    rows = [r for r in view.replicas if r.share is not None]
    if len(rows) < 2 or not view.routed or view.routed < min_requests:
        raise NotApplicable(_too_few(min_requests, view.routed or 0, len(rows)))
    hot = max(rows, key=lambda r: r.share or 0)
    in_use = view.setting("policy")
    policy_value = (in_use.value if in_use is not None else None) or ""
    found = Found(
        view=view, routed=view.routed, replicas=len(rows), hot=hot,
        idle=tuple(r for r in rows if r is not hot and (r.waiting_max or 0) < 1),
        queued=max(hot.waiting_max or 0, (hot.in_flight_max or 0) - (hot.running_max or 0)),
        key=("balance_abs" if policy_value in ("cache_aware", "") and view.setting("balance_abs") is not None
             else "policy"),
    )
    if (hot.share or 0) / found.fair < min_over_fair:
        return Pass(_fair_enough(found))
    if (hot.waiting_max or 0) < 1 and (hot.in_flight_max or 0) < 2:
        return Pass(_never_queued(found))
    if not found.idle:
        return Pass(_fleet_full(found))
    return Fire(
        title=_title(found),
        summary=_summary(found),
        remediation=_remediation(found),
        evidence=_evidence(found),
    )


def _too_few(min_requests: float, routed: float, replicas: int) -> str:
    return (f"needs at least 2 replicas and {min_requests:g} routed requests (the router routed "
            f"{routed:g} to {replicas} replica(s))")


def _fair_enough(found: Found) -> str:
    return (f"the busiest replica took {found.hot.share:.0%} of {found.routed:g} requests (fair {found.fair:.0%}) "
            f"under {setting_said(found.view, 'policy')}")


def _never_queued(found: Found) -> str:
    return (f"{found.hot.url} took {found.hot.share:.0%} of the requests (fair {found.fair:.0%}) but never queued: "
            "the imbalance cost nothing")


def _fleet_full(found: Found) -> str:
    return f"{found.hot.url} took {found.hot.share:.0%} of the requests, but every replica queued: the fleet is full"


def _title(found: Found) -> str:
    return f"A hot replica behind {found.view.display}: {found.hot.share:.0%} of the requests"


def _summary(found: Found) -> str:
    view, hot = found.view, found.hot
    thresholds = ", ".join(setting_said(view, k) for k in ("balance_abs", "balance_rel", "cache_threshold")
                           if view.setting(k))
    return (f"{view.display} under {setting_said(view, 'policy')} sent {hot.url} {hot.share:.0%} of {found.routed:g} "
            f"requests (fair {found.fair:.0%}); it had up to {found.queued:.0f} waiting while "
            f"{', '.join(r.url for r in found.idle)} had none" + (f" (thresholds: {thresholds})" if thresholds else ""))


def _remediation(found: Found) -> Remediation:
    if found.key == "balance_abs":
        suggested = f"{max(1, int(found.queued // 2) or 1)} (load wins once a replica queues)"
    else:
        suggested = "power_of_two (load-aware)"
    return router_fix(found.view, found.key, suggested,
                      f"{setting_said(found.view, 'policy')} keeps choosing {found.hot.url} while it queues; the balance "
                      "thresholds in use let the cache win over load",
                      rerun("the shares near 1/N and no replica waiting while another idles"))


def _evidence(found: Found) -> list[EvidenceValue]:
    return [*replica_values(found.hot),
            EvidenceValue("fair share", round(found.fair, 3), "fraction", f"1/{found.replicas} replicas"),
            *(v for r in found.idle for v in replica_values(r))]
