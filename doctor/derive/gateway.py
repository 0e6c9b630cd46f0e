"""Which gateway answered, from its response headers: the ``gateway`` view.

Behaviour is measured elsewhere (bursts, compression, held headers, cuts: the LD3xx checks read
the stream); the gateway's name only decides how a remediation is phrased, so it is identified
once, here, from what every gateway response carried, and never guessed inside a check. The
headers are raw in the bundle (every request's, redacted), so a newer table re-reads an old run.

A request may cross several hops, each leaving its own tell: a CDN or load balancer in front
(Cloudflare's ``cf-ray``, an ALB's ``server: awselb/2.0`` on the errors it makes itself), an API
gateway (Kong's ``via: kong``, Envoy's ``x-envoy-upstream-service-time``, LiteLLM's
``x-litellm-*``), a proxy's ``Server`` header, an application edge's ``server: uvicorn``. They
are kept outermost first; the remediation speaks to ``primary``: what ``--gateway-kind`` says,
else the first hop that is not a CDN or load balancer (the one the operator configures), else the
CDN. ``server: uvicorn`` beside another hop's tell is taken for vLLM's own header passed on (Kong,
an ALB and Envoy Gateway keep the upstream's ``Server``), so it is listed last and never primary.

Each family's tells (tokens, tell headers, shapes) and name are its record's (``doctor.gateways``).
Only what the gateway path alone shows names a gateway. Apache httpd, lighttpd, HAProxy and
Varnish pass the engine's ``server: uvicorn`` through (Caddy appends it: ``Caddy, uvicorn``), so a
header value the direct path also carries is the engine's, never a hop: ``engine`` is the direct
path's responses, or, without a direct path, ``KNOWN_ENGINE`` (what engines are known to send).
What is left names the hop: its own ``Server`` or ``Via`` token (Varnish's ``Via: 1.1 varnish
(Varnish/7.1)``, ``Server: Caddy``), a tell header (``X-Varnish``), or a behaviour only one product
shows (Apache httpd's ``Keep-Alive: timeout=5, max=100``, inferred). Nothing left is "an
unidentified gateway": lighttpd and HAProxy add no header of their own by default.

nginx's ``Server`` header is the same for a plain nginx, F5's NGINX Ingress Controller and the
community ingress-nginx: headers cannot tell them apart. ``--gateway-kind ingress-nginx`` /
``f5-nginx-ingress`` names a controller; else, in a pod, the Ingress for the gateway's host
(``bundle.ingress``, ``doctor.probes.ingress``) does, by its IngressClass's controller (or, when
that cannot be read, by the prefix of its nginx annotations); else an nginx hop is ``inferred``
to be plain nginx.

LiteLLM's ``x-litellm-overhead-duration-ms`` (always sent: its total time minus the upstream
call's) is read from every measured gateway request: LiteLLM's own share of the first token,
split from the upstream's even without a direct path.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from doctor.derive.missing import Missing
from doctor.derive.stream_stats import Dist, dist
from doctor.evidence import Bundle, IngressInfo, ProbePath
from doctor.gateways import BY_ID, DISPLAY, RECORDS, TELL_HEADERS, family_of

#: What an engine answers with, which a gateway passes on: vLLM (and SGLang) run on uvicorn. Without a
#: direct path to compare with, these values are taken for the engine's, never for a hop.
KNOWN_ENGINE: tuple[Mapping[str, str], ...] = ({"server": "uvicorn"},)

#: How a view without an identified hop names it.
UNIDENTIFIED = "an unidentified gateway"

#: Tells kept per hop: enough to show what named it; a response of thousands of ``x-envoy-*``
#: headers no longer costs a look-up in a list as long as itself for each of them.
MAX_TELLS = 8

LITELLM_OVERHEAD = "x-litellm-overhead-duration-ms"
LITELLM_CALLBACK = "x-litellm-callback-duration-ms"


@dataclass
class GatewayHop:
    """One hop that left a tell in the gateway's responses."""

    family: str  # a record's id (``doctor.gateways``), or the user's word
    name: str  # how a remediation names it: "nginx (nginx/1.22.1)", "Kong (via: 1.1 kong/3.6.0)"
    tells: list[str] = field(default_factory=list)  # "server: envoy", "x-envoy-upstream-service-time"
    source: str = "headers"  # "headers" | "--gateway-kind" | "Ingress NAMESPACE/NAME"
    # Headers name the software, not its deployment: nginx could be an Ingress controller.
    inferred: bool = False
    note: str | None = None  # what headers cannot tell, when ``inferred``


@dataclass
class GatewayView:
    """The gateway that answered and what it said about its own time."""

    hops: list[GatewayHop] = field(default_factory=list)  # outermost first
    primary: GatewayHop | None = None  # the hop a remediation speaks to
    server: str | None = None  # the raw Server header (else Via, X-Powered-By)
    kind: str | None = None  # --gateway-kind as given
    # LiteLLM's own time per measured gateway request (x-litellm-overhead-duration-ms), seconds.
    litellm_overhead: Dist = field(default_factory=Dist)
    litellm_callback: Dist = field(default_factory=Dist)  # x-litellm-callback-duration-ms, seconds
    ingress: IngressInfo | None = None  # the Ingress that named the primary hop's controller
    # Header values the gateway passed on from the engine ("server: uvicorn"): never a hop's tell.
    engine: list[str] = field(default_factory=list)

    @property
    def family(self) -> str | None:
        return self.primary.family if self.primary else None

    @property
    def name(self) -> str:
        """How a remediation names the gateway: by the hop that answered when one is known."""
        return self.primary.name if self.primary else UNIDENTIFIED

    def hop(self, family: str) -> GatewayHop | None:
        return next((h for h in self.hops if h.family == family), None)

    def others(self) -> list[GatewayHop]:
        """The hops besides the primary one, outermost first."""
        return [h for h in self.hops if h is not self.primary]


def header(headers: Mapping[str, str], name: str) -> str | None:
    """A response header by name, case-insensitively (HTTP header names are)."""
    wanted = name.lower()
    for key, value in headers.items():
        if key.lower() == wanted:
            return value
    return None


def server_of(headers: Mapping[str, str]) -> tuple[str | None, str | None, str | None]:
    """``(family, raw value, header name)`` from ``Server``, else ``Via``, else ``X-Powered-By``."""
    for name in ("server", "via", "x-powered-by"):
        raw = header(headers, name)
        if raw:
            return family_of(raw), raw, name
    return None, None, None


def _named(family: str, detail: str | None) -> str:
    """``nginx (nginx/1.22.1)``; the detail left out when it only repeats the name (``Traefik``)."""
    display = DISPLAY.get(family, family)
    return f"{display} ({detail})" if detail and detail.lower() not in display.lower() else display


def controller_family(ingress: IngressInfo) -> str | None:
    """The nginx controller an Ingress is served by: its class's controller, else its annotations' prefix."""
    if ingress.controller is not None:
        return next((r.id for r in RECORDS if r.ingress_controller == ingress.controller), None)
    prefixes = {key.split("/", 1)[0] for key in ingress.annotations}
    return next((r.id for r in RECORDS if r.annotation_prefix in prefixes), None)


def _tokens(value: str) -> list[str]:
    """A header's comma-separated values: a merged ``Server: Caddy, uvicorn``, a ``Via`` of several hops."""
    return [t.strip() for t in value.split(",") if t.strip()]


def engine_values(engine: Iterable[Mapping[str, str]]) -> dict[str, set[str]]:
    """Header name (lower case) -> every value the engine answered with, split at commas."""
    out: dict[str, set[str]] = {}
    for headers in engine:
        for key, value in headers.items():
            out.setdefault(key.lower(), set()).update(_tokens(value))
    return out


def identify(headers_seen: Iterable[Mapping[str, str]], kind: str | None = None,
             ingress: IngressInfo | None = None,
             engine: Iterable[Mapping[str, str]] = KNOWN_ENGINE) -> GatewayView:
    """The hops that left tells in ``headers_seen`` (responses in order of trust), and the primary one:
    ``kind``'s, else the nginx controller ``ingress`` names, else the first gateway hop. A value the
    ``engine``'s responses (the direct path's) also carry is the engine's, passed on: never a tell."""
    found: dict[str, GatewayHop] = {}
    server: str | None = None
    theirs = engine_values(engine)
    passed_on: list[str] = []
    for headers in headers_seen:
        for hname in ("server", "via", "x-powered-by"):
            raw = header(headers, hname)
            if not raw:
                continue
            values = _tokens(raw)
            own = [v for v in values if v not in theirs.get(hname, ())]
            passed_on += [f"{hname}: {v}" for v in values if v not in own and f"{hname}: {v}" not in passed_on]
            server = server or (", ".join(own) if own else None)
            for value in own:
                family = family_of(value)
                if family is not None:
                    hop = found.setdefault(family, GatewayHop(family, _named(family, value)))
                    if len(hop.tells) < MAX_TELLS and f"{hname}: {value}" not in hop.tells:
                        hop.tells.append(f"{hname}: {value}")
        # a tell header the direct path carries too is a hop in front of both (or the engine's own)
        lowered = sorted(k.lower() for k in headers if k.lower() not in theirs)
        for prefix, fam in TELL_HEADERS:
            for key in (k for k in lowered if k == prefix or (prefix.endswith("-") and k.startswith(prefix))):
                hop = found.setdefault(fam, GatewayHop(fam, DISPLAY[fam]))
                if len(hop.tells) < MAX_TELLS and key not in hop.tells:
                    hop.tells.append(key)
        for fam, shape in ((r.id, shape) for r in RECORDS for shape in r.tell_shapes):
            hname, raw = shape.header, header(headers, shape.header)
            if raw is None or not shape.pattern.match(raw) or set(_tokens(raw)) <= theirs.get(hname, set()):
                continue
            if fam not in found:
                found[fam] = GatewayHop(fam, DISPLAY[fam], inferred=True, note=shape.note)
            if not any(t.startswith(f"{hname}: ") for t in found[fam].tells):  # one is enough: max= counts down
                found[fam].tells.append(f"{hname}: {raw}")
    # LiteLLM runs on uvicorn and passes its Server header on: the x-litellm-* headers name it.
    for family in list(found):
        wrapped = BY_ID[family].wraps
        if wrapped is not None and wrapped in found:
            found[family].tells += found.pop(wrapped).tells
    for hop in found.values():
        if (note := BY_ID[hop.family].header_note) is not None:
            hop.inferred, hop.note = True, note
    passed = next((h for h in found.values() if BY_ID[h.family].engine_server), None) if len(found) > 1 else None
    if passed is not None:
        passed.name, passed.inferred, passed.note = passed.family, True, BY_ID[passed.family].passed_note
    # Outermost first: a CDN or load balancer, the gateways, then a Python server last.
    hops = sorted(found.values(), key=lambda h: (not BY_ID[h.family].edge) + (h is passed))
    view = GatewayView(hops=hops, server=server, kind=kind, engine=passed_on)
    if kind:
        # The user's word wins: an edge behind a CDN answers with the CDN's headers, and only the
        # user can say that an nginx is an Ingress controller.
        family = family_of(kind) or kind.lower()
        answers_as = BY_ID[family].answers_as if family in BY_ID else None
        seen = found.get(family) or (found.get(answers_as) if answers_as else None)
        detail = seen.tells[0].split(": ", 1)[-1] if seen and seen.tells else kind
        name = _named(family, detail) if family in BY_ID else f"the gateway ({kind})"
        _put_primary(view, seen, GatewayHop(family, name, tells=seen.tells if seen else [], source="--gateway-kind"))
        return view
    gateways = [h for h in hops if not BY_ID[h.family].edge and h is not passed]
    family = controller_family(ingress) if ingress is not None else None
    answers_as = BY_ID[family].answers_as if family in BY_ID else None
    seen = found.get(answers_as or "") or found.get(family or "")
    # The Ingress names the nginx that answered, or the gateway no header named; never another gateway.
    if ingress is not None and family is not None and (seen is not None or not gateways):
        where = f"{ingress.namespace}/{ingress.name}"
        _put_primary(view, seen, GatewayHop(family, f"{DISPLAY[family]} (Ingress {where})",
                                            tells=seen.tells if seen else [], source=f"Ingress {where}"))
        view.ingress = ingress
    else:
        view.primary = gateways[0] if gateways else (hops[0] if hops else None)
    return view


def _put_primary(view: GatewayView, seen: GatewayHop | None, primary: GatewayHop) -> None:
    """Make ``primary`` the view's primary hop, in the place of the header hop it names (else last)."""
    view.primary = primary
    view.hops = [primary if h is seen else h for h in view.hops] + ([] if seen else [primary])


def _header_s(headers: Mapping[str, str], name: str) -> float | None:
    """A header holding milliseconds, in seconds; None when absent or not a number."""
    try:
        value = float(header(headers, name) or "nan")
    except ValueError:
        return None
    return value / 1000.0 if math.isfinite(value) and value >= 0 else None


def derive_gateway(bundle: Bundle) -> GatewayView:
    """The ``gateway`` view: the stream probe's gateway responses (answered ones first, then the
    errors a hop made itself: an ALB's 504), then the endpoint probe's gateway headers, each read
    against the direct path's (else ``KNOWN_ENGINE``): what the engine sent names no gateway."""
    stream, endpoints = bundle.stream, bundle.endpoints
    requests = [r for r in (stream.requests if stream else []) if r.path == ProbePath.GATEWAY and not r.warmup]
    probed = [ep.headers for ep in (endpoints.endpoints if endpoints else []) if ep.role == "gateway"]
    kind = stream.shape.gateway_kind if stream else None
    if not requests and not probed and not kind:
        raise Missing("no gateway was probed (pass --gateway)")
    answered = [r.headers for r in requests if r.ok and r.headers]
    failed = [r.headers for r in requests if not r.ok and r.headers]
    # what the engine answered with on the direct path: the stream probe's, then the endpoint probe's
    direct = [r.headers for r in (stream.requests if stream else []) if r.path == ProbePath.DIRECT and r.headers]
    direct += [ep.headers for ep in (endpoints.endpoints if endpoints else []) if ep.role == "engine" and ep.headers]
    view = identify([*answered, *failed, *probed], kind, bundle.ingress.ingress if bundle.ingress else None,
                    engine=direct or KNOWN_ENGINE)
    ok = [r for r in requests if r.ok]
    view.litellm_overhead = dist([v for r in ok if (v := _header_s(r.headers, LITELLM_OVERHEAD)) is not None])
    view.litellm_callback = dist([v for r in ok if (v := _header_s(r.headers, LITELLM_CALLBACK)) is not None])
    return view
