"""How a gateway remediation is phrased: the words every gateway remediation shares (an unidentified
gateway, the other hops), beside ``Phrasing`` (one gateway's setting for one behaviour, as templates).

A check measures the behaviour (bursts, a compressed stream, a cut after a fixed silence); which
gateway it is (the ``gateway`` view, ``doctor.derive.gateway``) only decides which setting the
remediation names and how. Each family's phrasing for each behaviour is a row of its record
(``doctor.gateways``); each behaviour's remediation function is in its own module
(``buffering_advice``, ``compression_advice``, ``response_start_advice``, ``idle_timeout_advice``,
``upstream_advice``), so LD301, LD302 and LD305 name the same setting for the same gateway; a family
whose row is ``NoSwitch`` gets the generic advice (the usual suspects, ``doctor.gateways.suspects``)
under its own name. The phrasings follow the public reports the tests quote
(``fixtures/gateway-reports/``). This module holds what those functions share, so that none of them
imports another.
"""

from __future__ import annotations

from doctor.derive.gateway import GatewayView
from doctor.model import Remediation

#: What a remediation adds when nothing only the gateway path shows named the gateway.
UNIDENTIFIED_NOTE = (" No header of its own says which software it is (what it passed on is the engine's): "
                     "pass `--gateway-kind` to name it.")


#: What an unidentified gateway's ``where`` adds: the terminal prints ``where``, not ``why``.
UNIDENTIFIED_WHERE = " (no header of its own names it: pass `--gateway-kind` with its product to name its one setting)"


def as_unidentified(rem: Remediation, family: str | None) -> Remediation:
    """An unidentified gateway's remediation: its sentence capitalised, and how to name it, in ``why`` and in ``where``."""
    if family is None:
        rem.why = rem.why[:1].upper() + rem.why[1:] + UNIDENTIFIED_NOTE
        rem.where = (rem.where or "") + UNIDENTIFIED_WHERE
    return rem


def also_in_path(gw: GatewayView | None) -> str:
    """The other hops seen in front of or behind the named one, for the remediation's last words."""
    others = gw.others() if gw else []
    return f" Also in the path: {', '.join(h.name for h in others)}." if others else ""
