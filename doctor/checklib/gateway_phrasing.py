"""How a gateway remediation is phrased: ``Phrasing`` (one gateway's setting for one behaviour, as
templates) and the words every gateway remediation shares (an unidentified gateway, the other hops).

A check measures the behaviour (bursts, a compressed stream, a cut after a fixed silence); which
gateway it is (the ``gateway`` view, ``doctor.derive.gateway``) only decides which setting the
remediation names and how. Each behaviour keeps its own table of phrasings, keyed by gateway family,
in its own module (``buffering_advice``, ``compression_advice``, ``response_start_advice``,
``idle_timeout_advice``, ``upstream_advice``), so LD301, LD302 and LD305 name the same setting for the
same gateway; a family without an entry gets the generic advice under its own name. The phrasings
follow the public reports the tests quote (``fixtures/gateway-reports/``). This module holds what
those tables and their remediation functions share, so that none of them imports another.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from doctor.derive.gateway import DISPLAY, GatewayView
from doctor.model import Remediation


@dataclass(frozen=True)
class Phrasing:
    """One gateway's remediation for one behaviour. ``where`` and ``why`` are templates:
    ``{name}`` the gateway as identified, ``{burst}`` (buffering) or ``{enc}`` (compression).
    ``default``: the setting's default where the advice to a gateway no header names should say it
    beside the setting (``each_family``), e.g. nginx's 60 s connect timeout, the long wait it explains."""

    setting: str
    suggested: str
    where: str
    why: str
    current: str | None = None
    default: str | None = None

    def remediation(self, verify: str, **fill: str) -> Remediation:
        def filled(template: str) -> str:
            # str.replace, not str.format: the phrasings quote nginx blocks and YAML with braces
            for key, value in fill.items():
                template = template.replace("{" + key + "}", value)
            return template

        return Remediation(setting=self.setting, suggested=self.suggested, current=self.current,
                           where=filled(self.where), why=filled(self.why), verify=verify)


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


def each_family(table: Mapping[str, Phrasing]) -> str:
    """How each family of a behaviour's table spells its setting, for the advice to a gateway no
    header names: "nginx `proxy_connect_timeout` (60 s default); HAProxy `timeout connect`; ...", read
    from the table so a family added there is named here too; an alias (one phrasing under two
    families) once, with both names; a phrasing's ``default`` after its setting."""
    names: dict[Phrasing, list[str]] = {}
    for family, phrasing in table.items():
        names.setdefault(phrasing, []).append(DISPLAY.get(family, family))
    return "; ".join(f"{' / '.join(named)} `{p.setting}`" + (f" ({p.default} default)" if p.default else "")
                     for p, named in names.items())
