"""Requests wait in the router while the replicas have free seats.

What it detects:
The first token takes far longer through the router than straight to a replica, or the router
refuses requests (an HTTP error status on its path only: vllm-router answers 408 when a request's wait for
admission times out, 429 when its queue is full), while the replicas behind it had seats (each
replica's own waiting gauge, averaged over the window, under `max_replica_waiting`): the wait is
the router's own admission, `--max-concurrent-requests` (a token bucket that also caps the
request rate, unless `--rate-limit-tokens-per-second`), `--queue-size` and `--queue-timeout-secs`
on vllm-router and sglang-router, the endpoint picker's flow control.

Why it matters:
Neither the gateway nor any engine shows the wait: adding replicas or tuning the engine changes
nothing while the router admits fewer requests than the replicas can hold.

Evidence:
stream_stats: TTFT p50 on the router path (gateway) and on the direct path; routing: each
replica's waiting gauge and the router's settings in use.

Remediation:
Raise the router's cap above the load offered (the router's own flag, its current value quoted).

Options:
min_wait_s: router wait (TTFT p50 through it minus direct) at or above which it fires
min_share: the router's share of the TTFT through it at or above which it fires
max_replica_waiting: a replica's mean waiting requests over the window at or above which the replicas, not the router, are full

Example:
TTFT p50 6.1 s through vllm-router against 0.4 s direct, no replica had a request waiting
(--max-concurrent-requests 2) -> --max-concurrent-requests 8.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import PathPair, measured_pair, rerun
from doctor.checklib.routing import router_fix, router_read, setting_said
from doctor.derive.router import ReplicaRow, RouterView
from doctor.derive.stream_stats import StreamStats
from doctor.model import Cause, EvidenceValue, Remediation, Severity, SymptomClass


@dataclass(frozen=True)
class Found:
    """TTFT p50 through the router and direct, the wait the router adds, the requests it refused
    (an HTTP error status through it, none direct) of those sent, the replicas whose own /metrics
    were read, and the router's concurrency cap in use."""

    view: RouterView
    pair: PathPair
    through: float
    direct: float
    refused: int
    replicas: tuple[ReplicaRow, ...]
    cap: int | None

    @property
    def wait(self) -> float:
        return self.through - self.direct


@check(code="LD311", name="router-queue", symptom=SymptomClass.PROXY_ONLY, cause=Cause.GATEWAY_CAP)
def router_queue(stream_stats: StreamStats, routing: RouterView, *, min_wait_s: float = 0.5, min_share: float = 0.5,
                 max_replica_waiting: float = 0.5) -> Result:
    view = router_read(routing)
    pair = measured_pair(stream_stats)
    through, direct = pair.gateway.ttft.p50, pair.direct.ttft.p50
    if through is None or direct is None:
        raise NotApplicable("no TTFT p50 on both paths")
    read = [r for r in view.replicas if r.waiting_mean is not None]
    if not read:
        raise NotApplicable("no replica's own /metrics was read: whether the replicas had seats is unknown")
    cap = view.setting("max_concurrent")
    found = Found(view, pair, through, direct,
                  pair.gateway.failures.get("http-status", 0) if not pair.direct.failures.get("http-status") else 0,
                  tuple(read), int(cap.value) if cap is not None and cap.value and cap.value.isdigit() else None)
    wait = found.wait
    waited = wait >= min_wait_s and wait >= min_share * through
    if not waited and not found.refused:
        return Pass(_router_adds_little(found))
    queued = [r for r in read if (r.waiting_mean or 0) >= max_replica_waiting]
    if queued:
        return Pass(_replicas_full(found, tuple(queued)))
    return Fire(
        title=_title(found),
        summary=_summary(found),
        severity=(Severity.CRITICAL if found.refused or (wait >= 2 * min_wait_s and wait >= 0.8 * through)
                  else Severity.WARNING),
        remediation=_remediation(found),
        evidence=_evidence(found),
    )


def _router_adds_little(found: Found) -> str:
    return (f"TTFT p50 {found.through:.2f} s through the router against {found.direct:.2f} s direct: "
            f"the router adds {max(found.wait, 0):.2f} s and refused none")


def _replicas_full(found: Found, queued: tuple[ReplicaRow, ...]) -> str:
    return (f"the router adds {found.wait:.2f} s but {len(queued)} replica(s) had requests waiting "
            f"({', '.join(r.url for r in queued)}): the replicas are full, not the router")


def _title(found: Found) -> str:
    return f"Requests wait in {found.view.display}, not in the replicas"


def _most_waiting(found: Found) -> float:
    return max(r.waiting_mean or 0 for r in found.replicas)


def _summary(found: Found) -> str:
    read, gateway = found.replicas, found.pair.gateway
    peak = sum(r.running_max or 0 for r in read)
    sent = gateway.n_ok + gateway.n_failed
    refusals = (f", {found.refused} of {sent} requests refused by it (an HTTP error status, none direct)"
                if found.refused else "")
    return (f"TTFT p50 {found.through:.2f} s through {found.view.display} against {found.direct:.2f} s direct "
            f"({max(found.wait, 0):.2f} s in the router){refusals} while the replicas had seats (at most "
            f"{_most_waiting(found):.1f} waiting on average, running at most {peak:.0f} across {len(read)} replica(s))")


def _remediation(found: Found) -> Remediation:
    view = found.view
    suggested = f"{found.cap * 4}, above the streams offered" if found.cap else "above the streams offered"
    return router_fix(view, "max_concurrent", suggested,
                      f"the router admits fewer requests than the replicas hold: they wait in its queue "
                      f"({setting_said(view, 'queue_size')}, {setting_said(view, 'queue_timeout')}) or are refused",
                      rerun("TTFT through the router near the direct path's"))


def _evidence(found: Found) -> list[EvidenceValue]:
    pair = found.pair
    return [
        EvidenceValue("ttft p50 through the router", round(found.through, 3), "s", f"stream: gateway, n={pair.gateway.ttft.n}"),
        EvidenceValue("refused by the router", found.refused, "requests", "stream: gateway HTTP errors, none direct"),
        EvidenceValue("ttft p50 direct", round(found.direct, 3), "s", f"stream: direct, n={pair.direct.ttft.n}"),
        EvidenceValue("replicas waiting mean, highest", round(_most_waiting(found), 2), "requests", "replicas' /metrics"),
    ]
