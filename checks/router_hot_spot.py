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

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import rerun
from doctor.checklib.routing import replica_values, router_fix, router_read, setting_said
from doctor.derive.router import RouterView
from doctor.model import Cause, EvidenceValue, SymptomClass


@check(code="LD312", name="router-hot-spot", symptom=SymptomClass.PROXY_ONLY, cause=Cause.ROUTING)
def router_hot_spot(routing: RouterView, *, min_over_fair: float = 1.5, min_requests: float = 8) -> Result:
    view = router_read(routing)
    rows = [r for r in view.replicas if r.share is not None]
    if len(rows) < 2 or not view.routed or view.routed < min_requests:
        raise NotApplicable(f"needs at least 2 replicas and {min_requests:g} routed requests (the router routed "
                            f"{view.routed or 0:g} to {len(rows)} replica(s))")
    fair = 1 / len(rows)
    hot = max(rows, key=lambda r: r.share or 0)
    over = (hot.share or 0) / fair
    idle = [r for r in rows if r is not hot and (r.waiting_max or 0) < 1]
    policy = setting_said(view, "policy")
    if over < min_over_fair:
        return Pass(f"the busiest replica took {hot.share:.0%} of {view.routed:g} requests (fair {fair:.0%}) under {policy}")
    if (hot.waiting_max or 0) < 1 and (hot.in_flight_max or 0) < 2:
        return Pass(f"{hot.url} took {hot.share:.0%} of the requests (fair {fair:.0%}) but never queued: the imbalance cost nothing")
    if not idle:
        return Pass(f"{hot.url} took {hot.share:.0%} of the requests, but every replica queued: the fleet is full")
    queued = max(hot.waiting_max or 0, (hot.in_flight_max or 0) - (hot.running_max or 0))
    in_use = view.setting("policy")
    policy_value = (in_use.value if in_use is not None else None) or ""
    if policy_value in ("cache_aware", "") and view.setting("balance_abs") is not None:
        key, suggested = "balance_abs", f"{max(1, int(queued // 2) or 1)} (load wins once a replica queues)"
    else:
        key, suggested = "policy", "power_of_two (load-aware)"
    thresholds = ", ".join(setting_said(view, k) for k in ("balance_abs", "balance_rel", "cache_threshold") if view.setting(k))
    summary = (f"{view.display} under {policy} sent {hot.url} {hot.share:.0%} of {view.routed:g} requests (fair {fair:.0%}); "
               f"it had up to {queued:.0f} waiting while {', '.join(r.url for r in idle)} had none"
               + (f" (thresholds: {thresholds})" if thresholds else ""))
    return Fire(
        title=f"A hot replica behind {view.display}: {hot.share:.0%} of the requests",
        summary=summary,
        remediation=router_fix(view, key, suggested,
                               f"{policy} keeps choosing {hot.url} while it queues; the balance thresholds in use let the "
                               "cache win over load", rerun("the shares near 1/N and no replica waiting while another idles")),
        evidence=[*replica_values(hot), EvidenceValue("fair share", round(fair, 3), "fraction", f"1/{len(rows)} replicas"),
                  *(v for r in idle for v in replica_values(r))],
    )
