"""LD305's gateway knowledge: each family's idle (read) timeout and its default (``IDLE_TIMEOUTS``, from
each record's ``idle_timeout`` row, ``doctor.gateways``), which hop's default an observed cut matches
(``idle_timeout_for``), and the remediation that raises it in that hop's terms. Public through
``doctor.checklib``.
"""

from __future__ import annotations

from doctor.checklib.gateway_phrasing import as_unidentified
from doctor.checklib.gateway_responses import who_answered
from doctor.derive.gateway import GatewayView
from doctor.foundation.units import fmt_seconds
from doctor.gateways import RECORDS, IdleTimeout, common_idle_timeout, suspects
from doctor.model import Remediation

#: family -> its idle timeout, for the families that have one (each record's ``idle_timeout`` row).
#: LD305 matches an observed cut against ``default_s``.
IDLE_TIMEOUTS: dict[str, IdleTimeout] = {r.id: r.idle_timeout for r in RECORDS if isinstance(r.idle_timeout, IdleTimeout)}

#: The usual suspects' idle timeouts, for a gateway nothing identified.
GENERIC_IDLE = " The timeout is one of: " + "; ".join(suspects("idle_timeout")) + "."

#: A timeout users meet on many gateways alike, when the one that answered has no match.
COMMON_IDLE = (60.0, f"a common 60 s idle timeout ({', '.join(common_idle_timeout(60.0))})")


def idle_timeout_for(gw: GatewayView | None, idle_lo: float, idle_hi: float,
                     tolerance: float) -> tuple[str | None, str | None]:
    """``(family, what)``: the hop whose default idle timeout the observed cuts match, outermost
    first (a CDN cuts before the proxy behind it), else the primary hop with the common 60 s or none."""
    def matches(secs: float) -> bool:
        return abs(idle_hi - secs) <= tolerance * secs and abs(idle_lo - secs) <= tolerance * secs

    for hop in gw.hops if gw else []:
        entry = IDLE_TIMEOUTS.get(hop.family)
        if entry and entry.default_s is not None and matches(entry.default_s):
            return hop.family, entry.default_what
    family = gw.family if gw else None
    return family, COMMON_IDLE[1] if matches(COMMON_IDLE[0]) else None


def idle_timeout_remediation(gw: GatewayView | None, family: str | None, idle_s: float, suggested_s: float,
                             verify: str) -> Remediation:
    """LD305: raise the idle timeout of the hop that cut the stream (``family``), in its own terms."""
    hop = gw.hop(family) if gw and family else None
    name = hop.name if hop else who_answered(gw)[1]
    entry = IDLE_TIMEOUTS.get(family or "")
    why = (f"{name} closes a stream after {fmt_seconds(idle_s)} without upstream data; the engine produces silences that "
           "long (queueing, long prefills, preemption stalls), so those answers are cut. Raise the timeout above "
           "the longest silence, and shorten the silences with the engine findings.")
    current = f"{idle_s:.0f}s (observed)"
    if entry is None:
        return as_unidentified(Remediation(setting="upstream idle timeout", suggested=f"{suggested_s:.0f}s", current=current,
                                            where=f"{name}: its upstream read / idle timeout", why=why + GENERIC_IDLE,
                                            verify=verify), hop.family if hop else gw.family if gw else None)
    if entry.default_what:
        current += f" — {entry.default_what}"
    return Remediation(setting=entry.setting, suggested=f"{suggested_s:.0f}s", current=current,
                       where=entry.where.format(s=f"{suggested_s:.0f}"), why=why + entry.advice, verify=verify)

