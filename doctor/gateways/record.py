"""What llm-doctor knows about one gateway family, as one record: how its responses name it, how a
sentence names it, and how it spells the switch for each behaviour a check measures.

A check measures a behaviour (bursts, a compressed stream, a held response head, a cut after a
fixed silence, a cap on streams, retries, a long wait to connect); which gateway answered (the
``gateway`` view, ``doctor.derive.gateway``) only decides which setting the remediation names. Every
table that lists gateways (the tells the view reads, the display names, each behaviour's phrasings
and the usual suspects named to a gateway nothing identified, ``--gateway-kind``'s help) is derived
from the records in ``doctor.gateways.RECORDS``, so adding a family is one module of this package
plus its evidence; ``tests/gateways/test_records.py`` holds every record to the same questions:
each behaviour is a phrasing or said to have no row, with why.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from doctor.model import Remediation

#: The behaviours every record answers, each by a row or by ``NoSwitch``: ``buffering`` (LD301),
#: ``compression`` (LD302), ``response_start`` (LD307), ``idle_timeout`` (LD305), ``connection_cap``
#: (LD309), and upstream: ``retries`` (LD310) and ``connect_timeout`` (LD501's hung gateway).
BEHAVIOURS: tuple[str, ...] = ("buffering", "compression", "response_start", "idle_timeout", "connection_cap",
                               "retries", "connect_timeout")

#: Where most response-start rows apply: the whole streaming route.
START_WHERE = "{name}: the streaming route"


@dataclass(frozen=True)
class Suspect:
    """How the advice to a gateway nothing identified names this row among the usual suspects:
    ``rank`` its place in that list (lower first: the most met first; ties in ``RECORDS`` order),
    ``text`` its words (None: the family's display name and the row's setting, with its ``default``)."""

    rank: int
    text: str | None = None


@dataclass(frozen=True)
class Phrasing:
    """One gateway's remediation for one behaviour. ``where`` and ``why`` are templates:
    ``{name}`` the gateway as identified, ``{burst}`` (buffering) or ``{enc}`` (compression).
    ``default``: the setting's default where the advice to a gateway no header names should say it
    beside the setting, e.g. nginx's 60 s connect timeout, the long wait it explains. ``suspect``:
    whether and how that advice names this row."""

    setting: str
    suggested: str
    where: str
    why: str
    current: str | None = None
    default: str | None = None
    suspect: Suspect | None = None

    def remediation(self, verify: str, **fill: str) -> Remediation:
        def filled(template: str) -> str:
            # str.replace, not str.format: the phrasings quote nginx blocks and YAML with braces
            for key, value in fill.items():
                template = template.replace("{" + key + "}", value)
            return template

        return Remediation(setting=self.setting, suggested=self.suggested, current=self.current,
                           where=filled(self.where), why=filled(self.why), verify=verify)


@dataclass(frozen=True)
class IdleTimeout:
    """A gateway's idle (read) timeout: a number with a default, not a phrasing. Its default when
    users meet it unset (LD305 matches an observed cut against ``default_s``) and how it is set."""

    setting: str
    where: str  # ``{s}`` is the suggested timeout in seconds
    default_s: float | None = None
    default_what: str | None = None  # "nginx default proxy_read_timeout 60 s"
    advice: str = ""  # gateway-specific words after the common explanation
    suspect: Suspect | None = None


@dataclass(frozen=True)
class NoSwitch:
    """A behaviour a family has no row for, and why: its remediation is the generic one (the usual
    suspects' switches) under the family's own name."""

    why: str


#: The reason most families give for a behaviour nobody has read their documentation for yet.
NOT_RECORDED = NoSwitch("no setting recorded from its documentation: the generic advice names the usual suspects")


@dataclass(frozen=True)
class TellShape:
    """A header value in a shape only one product writes, though it names no product: ``note`` says so."""

    header: str
    pattern: re.Pattern[str]
    note: str


@dataclass(frozen=True, kw_only=True)
class GatewayRecord:
    """One gateway family.

    ``id``: the family, as the ``gateway`` view and the checks name it; ``display``: how a sentence
    names it; ``kind``: the ``--gateway-kind`` word its help offers (it must name this family).
    ``tokens``: substrings of a ``Server`` / ``Via`` / ``X-Powered-By`` value (or of
    ``--gateway-kind``) that name it; ``tell_headers``: header names, or prefixes ending in ``-``,
    that name it whatever ``Server`` says; ``tell_shapes``: values only it writes (a hop so named is
    inferred). ``edge``: a CDN or cloud load balancer in front of the operator's gateway.
    ``answers_as``: the family whose ``Server`` header it sends (an nginx Ingress controller's is
    nginx's); ``ingress_controller`` / ``annotation_prefix``: the IngressClass controller and the
    annotation prefix that name it on an Ingress. ``header_note``: what its headers cannot tell (a hop
    they name is inferred). ``wraps``: the server it runs on, whose header it passes on (that hop's
    tells are its own); ``engine_server``: its header is also the engine's (vLLM runs on uvicorn), so
    beside another hop it is taken for the engine's, passed on, with ``passed_note``. ``shares``: the
    family whose rows it reuses, named first where the usual suspects list both.

    One row per ``BEHAVIOURS`` entry, or ``NoSwitch``; and the variants some rows have:
    ``inferred_buffering`` (added to the buffering advice when only headers named it),
    ``uncompressed_start`` (the response-start row when its answer was not compressed),
    ``refusing_cap`` (the cap row when it refused with 429/503 rather than 502), ``cap_queues``
    (its cap queues the requests over it instead of refusing them).
    """

    id: str
    display: str
    kind: str
    tokens: tuple[str, ...] = ()
    tell_headers: tuple[str, ...] = ()
    tell_shapes: tuple[TellShape, ...] = ()
    edge: bool = False
    answers_as: str | None = None
    ingress_controller: str | None = None
    annotation_prefix: str | None = None
    header_note: str | None = None
    wraps: str | None = None
    engine_server: bool = False
    passed_note: str | None = None
    shares: str | None = None
    buffering: Phrasing | NoSwitch
    compression: Phrasing | NoSwitch
    response_start: Phrasing | NoSwitch
    idle_timeout: IdleTimeout | NoSwitch
    connection_cap: Phrasing | NoSwitch
    retries: Phrasing | NoSwitch
    connect_timeout: Phrasing | NoSwitch
    inferred_buffering: str = ""
    uncompressed_start: Phrasing | None = None
    refusing_cap: Phrasing | None = None
    cap_queues: bool = False
