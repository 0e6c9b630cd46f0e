"""What the router checks (LD311-LD314) share: the view they read and the router's own setting as a
remediation, spelled by the router's record and quoted with the value in use."""

from __future__ import annotations

from doctor.checking.contract import NotApplicable
from doctor.derive.router import ReplicaRow, RouterView
from doctor.model import EvidenceValue, Remediation


def router_read(routing: RouterView) -> RouterView:
    """The view, or ``NotApplicable`` when the router's /metrics named no product (its notes say why)."""
    if routing.product is None:
        raise NotApplicable("; ".join(routing.notes) or "the router's /metrics was not read")
    return routing


def setting_said(routing: RouterView, key: str) -> str:
    """``--policy cache_aware (router's log)``; the key itself when the product has no such setting."""
    setting = routing.setting(key)
    return setting.said() if setting is not None else key


def router_fix(routing: RouterView, key: str, suggested: str, why: str, verify: str) -> Remediation:
    """The router's own setting ``key`` as the one change, with its value in use and where it lives."""
    setting = routing.setting(key)
    flag = setting.flag if setting is not None else key
    current = None if setting is None or setting.value is None else f"{setting.value} ({setting.source})"
    return Remediation(setting=flag, suggested=suggested, why=why, verify=verify, current=current,
                       where=f"{routing.display} flag (--router-args)")


def replica_values(row: ReplicaRow) -> list[EvidenceValue]:
    """A replica's share, its router in-flight and its own queue, as evidence values."""
    source = f"routing view: {row.url}"
    values = [EvidenceValue("share of requests", None if row.share is None else round(row.share, 3), "fraction", source),
              EvidenceValue("requests routed", row.requests, "requests", source),
              EvidenceValue("waiting max", row.waiting_max, "requests", source)]
    return [v for v in values if v.value is not None]
