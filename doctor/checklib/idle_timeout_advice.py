"""LD305's gateway knowledge: each family's idle (read) timeout and its default (``IDLE_TIMEOUTS``),
which hop's default an observed cut matches (``idle_timeout_for``), and the remediation that raises it
in that hop's terms. A timeout is a number with a default, not a phrasing, so it has its own record
(``IdleTimeout``). Public through ``doctor.checklib``.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.checklib.gateway_phrasing import as_unidentified
from doctor.checklib.gateway_responses import who_answered
from doctor.derive.gateway import GatewayView
from doctor.foundation.units import fmt_seconds
from doctor.model import Remediation


@dataclass(frozen=True)
class IdleTimeout:
    """A gateway's idle (read) timeout: its default when users meet it unset, and how it is set."""

    setting: str
    where: str  # ``{s}`` is the suggested timeout in seconds
    default_s: float | None = None
    default_what: str | None = None  # "nginx default proxy_read_timeout 60 s"
    advice: str = ""  # gateway-specific words after the common explanation


#: family -> its idle timeout. LD305 matches an observed cut against ``default_s``.
IDLE_TIMEOUTS: dict[str, IdleTimeout] = {
    "nginx": IdleTimeout("proxy_read_timeout", "nginx: the `location` that proxies the streaming route: "
                         "`proxy_read_timeout {s}s;`", 60.0, "nginx default proxy_read_timeout 60 s"),
    "ingress-nginx": IdleTimeout("nginx.ingress.kubernetes.io/proxy-read-timeout",
                                 'the streaming route\'s Ingress: `nginx.ingress.kubernetes.io/proxy-read-timeout: "{s}"` '
                                 "(seconds; `proxy-read-timeout` in the ConfigMap for all)", 60.0,
                                 "ingress-nginx default proxy-read-timeout 60 s"),
    "f5-nginx-ingress": IdleTimeout("nginx.org/proxy-read-timeout",
                                    'the streaming route\'s Ingress: `nginx.org/proxy-read-timeout: "{s}s"`', 60.0,
                                    "F5 NGINX Ingress default proxy-read-timeout 60 s"),
    "cloudflare": IdleTimeout("Cloudflare proxy read timeout", "the origin behind Cloudflare: its headers and a "
                              "first event at once, then an event well within every 100 s (Enterprise: raise "
                              "its Proxy Read Timeout to {s} s)", 100.0,
                              "Cloudflare proxy read timeout 100 s",
                              " Below Enterprise the 100 s cannot be raised (a 524 until the first byte): send "
                              "the headers and a first event at once, then a real event (not an SSE comment, "
                              "which some hops drop) well within every 100 s."),
    "aws-alb": IdleTimeout("idle_timeout.timeout_seconds", "the load balancer's attributes: "
                           "`idle_timeout.timeout_seconds = {s}` (1-4000 s)", 60.0,
                           "AWS ALB default idle timeout 60 s"),
    "kong": IdleTimeout("read_timeout", "Kong: the Service of the streaming route: `read_timeout: {s}000` "
                        "(milliseconds)", 60.0, "Kong default Service read_timeout 60 s"),
    "envoy": IdleTimeout("stream_idle_timeout", "Envoy: the route's `idle_timeout: {s}s` (or the connection "
                         "manager's `stream_idle_timeout`), and the route `timeout: 0s` for streams", 300.0,
                         "Envoy default stream_idle_timeout 300 s",
                         " Envoy's route `timeout` (15 s by default) also ends a whole response, silent or not."),
    "litellm": IdleTimeout("stream_timeout", "LiteLLM: the model's `litellm_params.stream_timeout: {s}` "
                           "(and `request_timeout` in `litellm_settings`)"),
    "apache": IdleTimeout("ProxyTimeout", "Apache httpd: `ProxyTimeout {s}` (or `timeout={s}` on the streaming "
                          "route's ProxyPass)", 60.0, "Apache httpd default ProxyTimeout: Timeout, 60 s"),
    "lighttpd": IdleTimeout("read-timeout", 'lighttpd: the backend\'s `"read-timeout" => {s}` in `proxy.server`'),
    "haproxy": IdleTimeout("timeout server", "HAProxy: `timeout server {s}s` in the streaming route's backend "
                           "(HAProxy has no default: the configuration's value decides)"),
    "caddy": IdleTimeout("read_timeout", "Caddy: the streaming reverse_proxy's `transport http {{ read_timeout {s}s }}`"),
    "varnish": IdleTimeout("between_bytes_timeout", "Varnish: the backend's `.between_bytes_timeout = {s}s;` (and "
                           "`.first_byte_timeout` for the wait before the first token)", 60.0,
                           "Varnish default between_bytes_timeout 60 s"),
    "traefik": IdleTimeout("respondingTimeouts", "Traefik: the entry point's `transport.respondingTimeouts` "
                           "(`writeTimeout`, `idleTimeout`) and the serversTransport's `forwardingTimeouts."
                           "responseHeaderTimeout`: at least {s}s, or 0 for none"),
    "uvicorn": IdleTimeout("read timeout", "the Python edge: its upstream client's read timeout, e.g. "
                           "`httpx.AsyncClient(timeout=httpx.Timeout(10.0, read={s}))`", 5.0,
                           "httpx's default 5 s read timeout in a Python edge"),
}

#: The usual suspects' idle timeouts, for a gateway nothing identified.
GENERIC_IDLE = (" The timeout is one of: "
                "nginx `proxy_read_timeout` (60 s default); Apache httpd `ProxyTimeout` (60 s); HAProxy "
                "`timeout server`; Varnish `between_bytes_timeout` (60 s); lighttpd `read-timeout` in "
                "`proxy.server`; Caddy `transport http { read_timeout }`; Traefik `respondingTimeouts`; an "
                "AWS ALB's `idle_timeout.timeout_seconds` (60 s); a Python edge's client read timeout.")

#: A timeout users meet on many gateways alike, when the one that answered has no match.
COMMON_IDLE = (60.0, "a common 60 s idle timeout (nginx, Apache httpd, Varnish, AWS ALB)")


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

