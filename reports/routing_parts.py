"""The router's replicas as table rows, for the terminal summary and the HTML page alike.

Takes the report's ``routing`` view as its dataclass (``doctor.derive.router.RouterView``, which
``view(report, "routing")`` reads back), as every renderer reads views: per replica the share of
the requests the router sent it over the window, the in-flight count the router kept, the
replica's own queue (its waiting gauge, max and mean), whether it answered, and what the router
thought of its health.
"""

from __future__ import annotations

from doctor.derive.router import RouterView

ROUTER_HEADERS = ("replica", "share", "requests", "in flight (router)", "waiting max", "waiting mean", "answered", "router says")


def _n(value: float | None, fmt: str = "{:.0f}") -> str:
    return "-" if value is None else fmt.format(value)


def router_title(routing: RouterView) -> str:
    """``vLLM router (--policy round_robin (router's log)), 12 s window``."""
    policy = routing.setting("policy")
    said = f" ({policy.said()})" if policy is not None and policy.value else ""
    window = f", {routing.window_s:.0f} s window" if routing.window_s else ""
    return f"{routing.display or 'the router'}{said}{window}"


def router_rows(routing: RouterView) -> list[tuple[str, ...]]:
    """One row per replica, in ``ROUTER_HEADERS`` order."""
    rows: list[tuple[str, ...]] = []
    for r in routing.replicas:
        health = {True: "healthy", False: "unhealthy", None: "-"}[r.router_healthy]
        if r.ejected:
            health += ", ejected"
        rows.append((r.url, _n(r.share, "{:.0%}"), _n(r.requests), _n(r.in_flight_max),
                     _n(r.waiting_max), _n(r.waiting_mean, "{:.1f}"), f"{r.answered}/{r.scraped}", health))
    return rows
