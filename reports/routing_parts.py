"""The router's replicas as table rows, for the terminal summary and the HTML page alike.

Reads the report's ``routing`` view as JSON (``doctor.derive.router``), as every renderer reads
views: per replica the share of the requests the router sent it over the window, the in-flight
count the router kept, the replica's own queue (its waiting gauge, max and mean), whether it
answered, and what the router thought of its health.
"""

from __future__ import annotations

from typing import Any

from doctor.model import Report

ROUTER_HEADERS = ("replica", "share", "requests", "in flight (router)", "waiting max", "waiting mean", "answered", "router says")


def _n(value: Any, fmt: str = "{:.0f}") -> str:
    return "-" if value is None else fmt.format(value)


def routing_of(report: Report) -> dict[str, Any] | None:
    """The ``routing`` view's JSON, or None when no router was read."""
    data = report.views.get("routing")
    return data if isinstance(data, dict) and "replicas" in data else None


def router_title(routing: dict[str, Any]) -> str:
    """``vLLM router (--policy round_robin (router's log)), 12 s window``."""
    policy = (routing.get("settings") or {}).get("policy") or {}
    said = f" ({policy.get('flag')} {policy.get('value')} ({policy.get('source')}))" if policy.get("value") else ""
    window = f", {routing['window_s']:.0f} s window" if routing.get("window_s") else ""
    return f"{routing.get('display') or 'the router'}{said}{window}"


def router_rows(routing: dict[str, Any]) -> list[tuple[str, ...]]:
    """One row per replica, in ``ROUTER_HEADERS`` order."""
    rows: list[tuple[str, ...]] = []
    for r in routing.get("replicas") or []:
        health = {True: "healthy", False: "unhealthy", None: "-"}[r.get("router_healthy")]
        if r.get("ejected"):
            health += ", ejected"
        rows.append((str(r.get("url")), _n(r.get("share"), "{:.0%}"), _n(r.get("requests")), _n(r.get("in_flight_max")),
                     _n(r.get("waiting_max")), _n(r.get("waiting_mean"), "{:.1f}"), f"{r.get('answered', 0)}/{r.get('scraped', 0)}",
                     health))
    return rows
