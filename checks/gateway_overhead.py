"""The gateway adds a constant delay before the first token.

What it detects:
Every request through the gateway gets its first token later than the same request sent
straight to vLLM, by about the same amount each time, without bursts (tokens still arrive one
per read) and without a staircase under concurrency: a fixed cost per request on the gateway
hop (authentication call, TLS handshake without session reuse, a new upstream connection per
request, an extra proxy in the chain).

Why it matters:
The added time is paid by every request before anything appears, on top of the engine's TTFT,
and no engine setting recovers it.

Evidence:
Stream probe on both paths: gateway minus direct TTFT at p50 and at the minimum (a constant cost
shows in both; a serialising edge, LD303, leaves its fastest request unharmed), its share of the
gateway TTFT p50, and events per read on each path (to leave buffering to LD301).

Remediation:
Remove the per-request work from the gateway hop (setting `gateway_hop`): keep upstream
connections alive (nginx: `keepalive 16;` in the `upstream` block with `proxy_http_version 1.1;`
and `proxy_set_header Connection "";`), cache authentication results, reuse TLS sessions,
drop hops that add nothing.

Options:
overhead_share: added TTFT p50 / gateway TTFT p50 that fires
min_added_s: added time below this is noise for interactive use
constant_share: the added time at the minimum must be at least this share of the added p50
burst_factor: events per read ratio left to proxy-buffering, as in LD301
warning_share: share that makes it a warning, else info

Example:
LD304 gateway-overhead: gateway adds 180 ms to TTFT p50 (n=8; 172 ms at the minimum), 64 % of the
gateway's 281 ms; 1.0 events per read on both paths -> keep upstream connections alive.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.checking.contract import Fire, Pass, Result, check
from doctor.checklib import PathPair, measured_pair, rerun, who_answered
from doctor.derive.gateway import GatewayView
from doctor.derive.stream_stats import StreamStats
from doctor.foundation.units import fmt_seconds
from doctor.model import Cause, EvidenceValue, Remediation, Severity, SymptomClass

#: nginx's switch for a per-request upstream connection.
NGINX_KEEPALIVE = ('`keepalive 16;` in the `upstream` block (with `proxy_http_version 1.1;` and '
                   '`proxy_set_header Connection "";`) avoids a new upstream connection per request.')


@dataclass(frozen=True)
class Found:
    """What the gateway adds to TTFT at p50 and at the minimum, its share of the gateway's TTFT p50,
    the events per read on each path, and who answered (the family names the switch)."""

    pair: PathPair
    added: float
    added_min: float
    share: float
    gateway_epr: float
    direct_epr: float
    family: str | None
    gateway: str


@check(code="LD304", name="gateway-overhead", symptom=SymptomClass.PROXY_ONLY, cause=Cause.GATEWAY_OVERHEAD)
def gateway_overhead(
    stream_stats: StreamStats, gateway: GatewayView | None = None,
    *,
    overhead_share: float = 0.25,
    min_added_s: float = 0.05,
    constant_share: float = 0.5,
    burst_factor: float = 4.0,
    warning_share: float = 0.5,
) -> Result:
    pair = measured_pair(stream_stats)  # raises NotApplicable unless both paths were measured
    d, g = pair.direct, pair.gateway
    added = (g.ttft.p50 or 0.0) - (d.ttft.p50 or 0.0)
    family, name = who_answered(gateway)
    found = Found(pair, added, (g.ttft.min or 0.0) - (d.ttft.min or 0.0), added / g.ttft.p50 if g.ttft.p50 else 0.0,
                  g.events_per_read.p50 or 1.0, d.events_per_read.p50 or 1.0, family, name)
    if added <= 0:
        return Pass(_no_slower(found))
    if added < min_added_s or found.share < overhead_share:
        return Pass(_small(found))
    if found.gateway_epr / max(found.direct_epr, 1.0) >= burst_factor:
        return Pass(_bursts(found))
    if found.added_min < constant_share * added:
        return Pass(_not_constant(found, concurrent=stream_stats.concurrency > 1))
    return Fire(
        title="The gateway adds a constant delay before the first token",
        summary=_summary(found),
        remediation=_remediation(found),
        severity=Severity.WARNING if found.share >= warning_share else Severity.INFO,
        evidence=_evidence(found),
    )


def _no_slower(found: Found) -> str:
    d, g = found.pair.direct, found.pair.gateway
    return (f"the gateway is no slower than direct: TTFT p50 {fmt_seconds(g.ttft.p50 or 0.0)} vs "
            f"{fmt_seconds(d.ttft.p50 or 0.0)} (n={g.ttft.n}, {d.ttft.n})")


def _small(found: Found) -> str:
    return f"the gateway adds {fmt_seconds(found.added)} to TTFT p50 ({found.share:.0%} of it)"


def _bursts(found: Found) -> str:
    return f"the added TTFT comes with bursts of {found.gateway_epr:.1f} events per read: see proxy-buffering (LD301)"


def _not_constant(found: Found, *, concurrent: bool) -> str:
    why = "see gateway-serialisation (LD303)" if concurrent else "a few slow requests"
    return (f"the added TTFT is not constant ({fmt_seconds(found.added_min)} at the minimum vs "
            f"{fmt_seconds(found.added)} at p50): not a fixed cost; {why}")


def _summary(found: Found) -> str:
    g = found.pair.gateway
    return (f"gateway adds {fmt_seconds(found.added)} to TTFT p50 (n={g.ttft.n}; {fmt_seconds(found.added_min)} at the "
            f"minimum), {found.share:.0%} of the gateway's {fmt_seconds(g.ttft.p50)}; {found.gateway_epr:.1f} events "
            f"per read vs {found.direct_epr:.1f} direct")


def _remediation(found: Found) -> Remediation:
    family, name = found.family, found.gateway
    why = (
        f"Each request pays about {fmt_seconds(found.added)} on the gateway hop before its first token, with no "
        "buffering and no queueing behind other streams: a fixed per-request cost. "
    )
    if family == "uvicorn":
        why += (
            f"In {name}: create the upstream client (openai.AsyncOpenAI, httpx.AsyncClient) once at startup and "
            "reuse it, so requests share kept-alive connections; a client per request opens a new connection "
            "each time. Cache authentication results instead of calling out per request."
        )
    elif family == "nginx":
        why += f"In nginx, {NGINX_KEEPALIVE}"
    elif family is None:
        # no header names it: the behaviour, and nginx's switch only as one possibility
        why += (f"In {name}: pool and keep alive its upstream connections, and cache authentication results "
                f"(pass --gateway-kind to name it). If it is nginx, {NGINX_KEEPALIVE}")
    else:
        why += f"In {name}: pool and keep alive its upstream connections, and cache authentication results."
    if family == "litellm":
        why += (" LiteLLM reports its own share per request in x-litellm-overhead-duration-ms: litellm-overhead "
                "(LD308) weighs it and names the LiteLLM setting.")
    return Remediation(
        setting="gateway_hop",
        suggested="remove the per-request cost: upstream keep-alive, cached auth, TLS session reuse",
        where=f"{name} between the client and the engine",
        why=why,
        verify=rerun("gateway TTFT p50 within a few ms of the direct one"),
    )


def _evidence(found: Found) -> list[EvidenceValue]:
    d, g = found.pair.direct, found.pair.gateway
    return [
        EvidenceValue("added TTFT p50 (gateway - direct)", round(found.added, 6), "s",
                      f"stream: gateway n={g.ttft.n}, direct n={d.ttft.n}"),
        EvidenceValue("added TTFT at the minimum", round(found.added_min, 6), "s", "stream: gateway min - direct min"),
        EvidenceValue("share of gateway TTFT p50", round(found.share, 4), "", f"stream: gateway, n={g.ttft.n}"),
        EvidenceValue("gateway TTFT p50", g.ttft.p50, "s", f"stream: gateway, n={g.ttft.n}"),
        EvidenceValue("direct TTFT p50", d.ttft.p50, "s", f"stream: direct, n={d.ttft.n}"),
        EvidenceValue("gateway events per read p50", found.gateway_epr, "events",
                      f"stream: gateway, n={g.events_per_read.n} reads"),
    ]
