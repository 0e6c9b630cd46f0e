"""What a gateway does to requests on their way to the engine, and how to undo it in its terms (each
family's ``connection_cap``, ``retries`` and ``connect_timeout`` rows, ``doctor.gateways``): a cap on
the streams it lets through (LD309, with ``QUEUEING_CAPS`` for the families that queue rather than
refuse), retries of requests the engine already took (LD310) and the wait to connect to an engine it
cannot reach (LD501's hung gateway, ``CONNECT_TIMEOUTS``).
Public through ``doctor.checklib``; the shared phrasing is ``gateway_phrasing``.
"""

from __future__ import annotations

from doctor.checklib.gateway_phrasing import also_in_path, as_unidentified
from doctor.checklib.gateway_responses import who_answered
from doctor.derive.gateway import GatewayView
from doctor.gateways import BY_ID, RECORDS, Phrasing, phrasing, suspects
from doctor.model import Remediation

GENERIC_CAP = Phrasing(
    "gateway connection limit",
    "at least {c} streams to the engine at once: " + "; ".join(suspects("connection_cap")),
    where="{name}: its per-upstream connection or request limit",
    why="{name} lets fewer streams through to the engine than were sent and queues or refuses the rest "
        "(HAProxy `maxconn` on a server line, nginx `max_conns` or `limit_conn`, Envoy circuit breakers, "
        "LiteLLM `max_parallel_requests`). Raise it to what the engine batches.")
#: Families whose cap queues the requests over it (a staircase of TTFTs) instead of refusing them.
QUEUEING_CAPS: tuple[str, ...] = tuple(r.id for r in RECORDS if r.cap_queues)


def cap_remediation(gw: GatewayView | None, refused_status: int | None, concurrency: int, verify: str,
                    measured: int | None = None, *, held: bool = False) -> Remediation:
    """LD309: raise the gateway's own limit on streams to the engine, in its terms; nginx's 503/429
    comes from ``limit_conn`` / ``limit_req`` (its record's ``refusing_cap``), its 502 from ``max_conns``. ``measured``: the most
    streams the probe saw it let through at once, its limit as measured. ``held``: the gateway held
    requests rather than refused them (LD315), so a family whose cap refuses instead (not in
    ``QUEUEING_CAPS``) gets the generic phrasing under its own name."""
    family, name = who_answered(gw)
    row = phrasing(family, "connection_cap") or GENERIC_CAP
    if held and family not in QUEUEING_CAPS:
        row = GENERIC_CAP
    refusing = BY_ID[family].refusing_cap if family in BY_ID else None
    if refusing is not None and refused_status in (429, 503):
        row = refusing
    rem = row.remediation(verify, name=name)
    rem.suggested = rem.suggested.replace("{c}", str(concurrency))
    if measured is not None:
        rem.current = f"{measured} streams at once (measured)"
    rem.why += also_in_path(gw)
    return as_unidentified(rem, family)


GENERIC_RETRIES = Phrasing(
    "retries", "none on timeout for the LLM routes",
    where="{name}: its retry policy, and the clients' (the OpenAI SDKs retry twice by default: `max_retries`)",
    why="The engine took in more requests than were sent (about {timeout} per try here): something between "
        "the client and the engine sends a request again when it times out, so the engine prefills the same "
        "prompt once per try and keeps working on the abandoned ones.")


def retry_remediation(gw: GatewayView | None, timeout: str, verify: str) -> Remediation:
    """LD310: stop the gateway from retrying requests the engine already took, in its terms."""
    family, name = who_answered(gw)
    rem = (phrasing(family, "retries") or GENERIC_RETRIES).remediation(verify, name=name, timeout=timeout)
    rem.why += also_in_path(gw)
    return rem


#: family -> the timeout a gateway waits to connect to the engine (LD501 ``hung-gateway``), for the families
#: that have one (each record's ``connect_timeout`` row): a gateway whose upstream drops the connection
#: attempt (a blackholed address, a dead node) answers nothing until it runs out, which from the client
#: looks like a hung server. ``{name}`` the gateway.
CONNECT_TIMEOUTS: dict[str, Phrasing] = {r.id: r.connect_timeout for r in RECORDS if isinstance(r.connect_timeout, Phrasing)}
GENERIC_CONNECT = Phrasing(
    "gateway upstream connect timeout",
    f"a few seconds, under the clients' own timeout: {'; '.join(suspects('connect_timeout'))}",
    where="{name}: its timeout for connecting to the engine, and the engine address it connects to",
    why="a gateway waits its connect timeout to reach an upstream that does not answer the connection "
        "attempt (nginx `proxy_connect_timeout`, 60 s by default) and its read timeout for one that accepted "
        "and says nothing")


def hung_gateway_remediation(gw: GatewayView | None, timeout_s: float | None, verify: str) -> Remediation:
    """LD501 ``hung-gateway``: a gateway that accepted and answered nothing in the whole ``--timeout``
    (``timeout_s``) is the gateway or its upstream, not a server to restart: the engine address it
    reaches and its connect timeout, in its family's terms."""
    family, name = who_answered(gw)
    rem = (phrasing(family, "connect_timeout") or GENERIC_CONNECT).remediation(verify, name=name)
    waited = f"the {timeout_s:g} s --timeout" if timeout_s is not None else "the whole --timeout"
    rem.why = (f"the gateway or its upstream: it accepted the probe's connections and sent not a byte in {waited}, "
               f"not even to GET /version. {rem.why[:1].upper()}{rem.why[1:]}, so an "
               "engine it cannot reach (a wrong or blackholed address, a node gone) reads as a hung server. "
               "Check the upstream address and the engine behind it, and lower the connect timeout so an "
               "unreachable engine is a quick 502/504; restart the gateway only if it answers nothing "
               "even when its upstream does." + also_in_path(gw))
    return as_unidentified(rem, family)
