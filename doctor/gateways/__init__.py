"""The gateway families llm-doctor names, one record each, and the tables derived from them.

Each family is one module holding one ``GatewayRecord`` (``record``): how its responses name it,
how a sentence names it, and its switch for each behaviour a check measures (``BEHAVIOURS``).
The ``gateway`` view (``doctor.derive.gateway``) reads the tells, the remediations in
``doctor.checklib`` read the rows, ``--gateway-kind``'s help lists ``KINDS``: none of them keeps a
table of its own.

``RECORDS`` is in the order a ``Server``-like value is matched (``family_of``: the first family with a
token in it names it): a family whose token holds another's or is tried for it comes first (the
Ingress controllers before nginx, Envoy AI Gateway before Envoy, lighttpd before Apache httpd's
``httpd``, the short ``alb`` last), and the order tell headers add hops in (Kong before Envoy before
LiteLLM before Varnish).
"""

from __future__ import annotations

from collections.abc import Iterator

from doctor.gateways import (
    apache,
    aws_alb,
    caddy,
    cloudflare,
    envoy,
    envoy_ai_gateway,
    f5_nginx_ingress,
    haproxy,
    ingress_nginx,
    kong,
    lighttpd,
    litellm,
    nginx,
    node,
    traefik,
    uvicorn,
    varnish,
)
from doctor.gateways.record import (
    BEHAVIOURS,
    START_WHERE,
    GatewayRecord,
    IdleTimeout,
    NoSwitch,
    Phrasing,
    Suspect,
    TellShape,
)

RECORDS: tuple[GatewayRecord, ...] = (
    ingress_nginx.RECORD, f5_nginx_ingress.RECORD, nginx.RECORD, kong.RECORD, envoy_ai_gateway.RECORD,
    envoy.RECORD, traefik.RECORD, cloudflare.RECORD, caddy.RECORD, haproxy.RECORD, litellm.RECORD,
    varnish.RECORD, lighttpd.RECORD, apache.RECORD, uvicorn.RECORD, node.RECORD, aws_alb.RECORD,
)
BY_ID: dict[str, GatewayRecord] = {r.id: r for r in RECORDS}

#: ``Server`` / ``Via`` / ``X-Powered-By`` substrings -> the family they name, in matching order.
TOKENS: tuple[tuple[str, str], ...] = tuple((t, r.id) for r in RECORDS for t in r.tokens)

#: Headers (a name, or a prefix ending in ``-``) that name a hop whatever ``Server`` says -> the family.
TELL_HEADERS: tuple[tuple[str, str], ...] = tuple((h, r.id) for r in RECORDS for h in r.tell_headers)

#: Family -> how a sentence names it.
DISPLAY: dict[str, str] = {r.id: r.display for r in RECORDS}

#: The ``--gateway-kind`` words the help offers, in alphabetical order (each names its family).
KINDS: tuple[str, ...] = tuple(sorted(r.kind for r in RECORDS))


def family_of(text: str) -> str | None:
    """The family a ``Server``-like value or a ``--gateway-kind`` names, or None."""
    low = text.lower()
    return next((family for needle, family in TOKENS if needle in low), None)


def phrasing(family: str | None, behaviour: str) -> Phrasing | None:
    """The family's row for a behaviour of ``BEHAVIOURS`` other than ``idle_timeout``; None for a
    family without one (``NoSwitch``) or no family: the caller's generic advice speaks."""
    row = getattr(BY_ID[family], behaviour) if family in BY_ID else None
    return row if isinstance(row, Phrasing) else None


def _suspect_rows(behaviour: str) -> Iterator[tuple[Phrasing | IdleTimeout, Suspect, list[GatewayRecord]]]:
    """Each distinct row of ``behaviour`` the usual suspects name, by rank, with the families that share it
    (the family whose rows the others reuse first)."""
    rows: dict[Phrasing | IdleTimeout, tuple[Suspect, list[GatewayRecord]]] = {}
    for record in RECORDS:
        row = getattr(record, behaviour)
        if not isinstance(row, NoSwitch) and row.suspect is not None:
            rows.setdefault(row, (row.suspect, []))[1].append(record)
    for row, (suspect, records) in sorted(rows.items(), key=lambda item: item[1][0].rank):
        yield row, suspect, sorted(records, key=lambda r: r.shares is not None)


def suspects(behaviour: str) -> list[str]:
    """How the advice to a gateway nothing identified names each family's switch for ``behaviour``,
    most met first: a row's own words, else its families' display names and its setting, with the
    default where the row states one ("nginx `proxy_connect_timeout` (60 s default)"; a row two
    families share once: "Envoy / Envoy AI Gateway `connect_timeout`")."""
    spelled = []
    for row, suspect, records in _suspect_rows(behaviour):
        if suspect.text is not None:
            spelled.append(suspect.text)
            continue
        default = row.default if isinstance(row, Phrasing) else None
        spelled.append(f"{' / '.join(r.display for r in records)} `{row.setting}`" + (f" ({default} default)" if default else ""))
    return spelled


def common_idle_timeout(seconds: float) -> list[str]:
    """The families among the usual suspects whose idle timeout defaults to ``seconds``, by display name."""
    return [r.display for row, _, records in _suspect_rows("idle_timeout") for r in records[:1]
            if isinstance(row, IdleTimeout) and row.default_s == seconds]


__all__ = [
    "BEHAVIOURS", "BY_ID", "DISPLAY", "KINDS", "RECORDS", "START_WHERE", "TELL_HEADERS", "TOKENS", "GatewayRecord",
    "IdleTimeout", "NoSwitch", "Phrasing", "Suspect", "TellShape", "common_idle_timeout", "family_of", "phrasing", "suspects",
]
