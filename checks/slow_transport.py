"""The network between the client and vLLM adds a large share of the time to first token.

What it detects:
Slow transport: on the direct path (no gateway), the client's mean time to first token is well
above the server's own (``vllm:time_to_first_token_seconds``); the difference is connect, TLS,
network round trips and the HTTP server's own handling.

Why it matters:
Time spent between the client and the engine is invisible to the engine's metrics and no
engine setting shortens it. A client in another region, a new TLS connection per request or
a congested link adds the same delay to every request.

Evidence:
stream_stats: direct-path client TTFT mean. metrics_window: server TTFT mean. Stream: connect
time (``t_connected - t_sent``) of requests that opened a new connection, and the client
self-check's event-loop lag p99 and send time p99: a client that reads its socket late stamps
the first token late, and one slow to write a request starts it late, so up to that much of
the difference is the client's own and is not counted. The two means are compared only while
the server's histogram holds mostly the probe's own requests: during an incident other users'
requests dominate it, and a difference of means of different requests is no network time.

Remediation:
When new connections take most of it: reuse connections (``http_keepalive``: a connection
pool / HTTP keep-alive on the caller). Otherwise: place the caller near the engine
(``region_placement``: same region / zone, or a gateway in the engine's region).

Options:
transport_share: share of the client's TTFT outside the server that fires
min_transport_s: ignore differences smaller than this (a LAN round trip)
max_foreign_share_x: compare the means only while the server timed at most this many times the
    requests the probe sent (else most of them are other users')

Example:
direct: client TTFT mean 420 ms vs server TTFT mean 60 ms: 360 ms (86 %) between client and
engine; new connections take 12 ms -> move the caller into the engine's region.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import metric_read, rerun
from doctor.derive.metrics_window import MetricsWindow
from doctor.derive.stream_stats import StreamStats
from doctor.evidence import ProbePath, StreamEvidence
from doctor.foundation.units import fmt_pct, fmt_seconds
from doctor.model import Cause, EvidenceValue, Remediation, SymptomClass


@dataclass(frozen=True)
class Found:
    """The direct path's client TTFT mean against the server's, the time outside the server once
    the client's own lag is set aside (and its ``share`` of TTFT), the mean connect time of new
    connections (over ``connects``), and how many direct requests opened one (of ``known``)."""

    client_s: float
    client_n: int
    server_s: float
    server_metric: str | None
    server_n: float
    lag_s: float
    outside_s: float
    share: float
    connect_s: float | None
    connects: int
    new_connections: int
    known: int


@check(code="LD104", name="slow-transport", symptom=SymptomClass.PRE_FIRST_TOKEN, cause=Cause.TRANSPORT,
       aliases=("transport",))
def slow_transport(
    stream_stats: StreamStats,
    metrics_window: MetricsWindow,
    stream: StreamEvidence | None = None,
    *,
    transport_share: float = 0.3,
    min_transport_s: float = 0.05,
    max_foreign_share_x: float = 1.5,
) -> Result:
    direct = stream_stats.path(ProbePath.DIRECT)
    if direct is None or not direct.ttft.n or direct.ttft.mean is None:
        return NotApplicable("no measured direct path (--engine): the gateway's share cannot be told from the network's")
    if metrics_window.ttft is None or metrics_window.ttft.mean is None:
        return NotApplicable(_no_server_ttft(metric_read(metrics_window, "ttft")))
    client_s, server_s = direct.ttft.mean, metrics_window.ttft.mean
    sent = direct.n_ok + direct.n_failed + direct.n_warmup + sum(
        ps.n_ok + ps.n_failed + ps.n_warmup for ps in stream_stats.paths.values() if ps is not direct)
    if metrics_window.ttft.count > max_foreign_share_x * max(sent, 1):
        # Two means of the same requests differ by the network; of different requests, by which
        # requests they are (another user's queue, our lucky slot), so they say nothing here.
        return NotApplicable(_other_users(metrics_window.ttft.count, sent))
    lag_s = _client_lag_s(stream)
    outside_s = max(client_s - server_s - lag_s, 0.0)
    connect = _connect_s(stream)
    reused = _reused(stream)
    found = Found(
        client_s=client_s, client_n=direct.ttft.n, server_s=server_s, server_metric=metrics_window.ttft.metric,
        server_n=metrics_window.ttft.count, lag_s=lag_s, outside_s=outside_s,
        share=outside_s / client_s if client_s > 0 else 0.0, connect_s=connect[0] if connect is not None else None,
        connects=connect[1] if connect is not None else 0, new_connections=reused.count(False), known=len(reused),
    )
    if found.share < transport_share or outside_s < min_transport_s:
        return Pass(_inside_the_server(found))
    return Fire(
        title="The network between the client and the engine adds to every first token",
        summary=_summary(found),
        remediation=_remediation(found),
        evidence=_evidence(found),
    )


def _client_lag_s(stream: StreamEvidence | None) -> float:
    """How much of a first token's time the client itself may have added, in seconds: its event
    loop's lag p99 (a late stamp) plus its send time p99 (a request slow to leave)."""
    if stream is None:
        return 0.0
    return ((stream.client.loop_lag_p99_ms or 0.0) + (stream.client.send_p99_ms or 0.0)) / 1000


def _reused(stream: StreamEvidence | None) -> list[bool]:
    """Whether each direct request reused a connection, where the probe recorded it."""
    if stream is None:
        return []
    return [r.connection_reused for r in stream.requests
            if r.path == ProbePath.DIRECT and r.connection_reused is not None]


def _connect_s(stream: StreamEvidence | None) -> tuple[float, int] | None:
    """Mean connect time of direct requests that opened a new connection."""
    if stream is None:
        return None
    times = [
        r.t_connected - r.t_sent
        for r in stream.requests
        if r.path == ProbePath.DIRECT and r.connection_reused is False and r.t_connected is not None and r.t_sent is not None
    ]
    return (statistics.fmean(times), len(times)) if times else None


def _no_server_ttft(metric: str) -> str:
    return f"no server TTFT histogram ({metric}) in /metrics"


def _other_users(timed: float, sent: int) -> str:
    return (f"the server timed {timed:.0f} first tokens, the probe sent {sent} "
            "requests: other users' requests dominate its mean, which then cannot be set against ours")


def _inside_the_server(found: Found) -> str:
    lagged = f" once the client's own {fmt_seconds(found.lag_s)} lag is set aside" if found.lag_s else ""
    return f"direct: {fmt_seconds(found.outside_s)} ({fmt_pct(found.share)}) of TTFT is outside the server{lagged}"


def _summary(found: Found) -> str:
    summary = (f"direct: client TTFT mean {fmt_seconds(found.client_s)} (n={found.client_n}) vs server "
               f"{fmt_seconds(found.server_s)}: {fmt_seconds(found.outside_s)} ({fmt_pct(found.share)}) between "
               "client and engine")
    if found.connect_s is not None:
        summary += f"; new connections take {fmt_seconds(found.connect_s)} (n={found.connects})"
    return summary


def _evidence(found: Found) -> list[EvidenceValue]:
    lag_s = found.lag_s
    evidence = [
        EvidenceValue("direct client TTFT mean", found.client_s, "s", f"stream: direct TTFT mean, n={found.client_n}"),
        EvidenceValue("server TTFT mean", found.server_s, "s",
                      f"metrics: {found.server_metric} delta, n={found.server_n:.0f}"),
    ]
    if lag_s:
        evidence.append(EvidenceValue("client event-loop lag + send time, p99", lag_s, "s", "stream: client self-check"))
    evidence.append(EvidenceValue("client - server" + (" - client lag" if lag_s else ""), found.outside_s, "s",
                                  "difference of the two means" + (", less the client's own lag" if lag_s else "")))
    if found.connect_s is not None:
        evidence.append(EvidenceValue("new-connection connect time mean", found.connect_s, "s",
                                      f"stream: direct t_connected - t_sent, n={found.connects}"))
    return evidence


def _keepalive_in_use(found: Found) -> str | None:
    """Whether the direct requests reused connections, as the probe recorded it: "off" when none did."""
    if not found.known:
        return None
    if found.new_connections == found.known:
        return "off"
    return f"{found.new_connections} of {found.known} direct requests on new connections"


def _remediation(found: Found) -> Remediation:
    if found.connect_s is not None and found.connect_s >= found.outside_s / 2:
        return Remediation(
            setting="http_keepalive",
            suggested="reuse connections (a connection pool with HTTP keep-alive on the caller)",
            why=f"opening a connection (TCP and TLS) takes {fmt_seconds(found.connect_s)}, most of the time outside the server",
            verify=rerun("the client - server TTFT difference to shrink to about one round trip"),
            current=_keepalive_in_use(found),
            where="the calling service's HTTP client",
        )
    return Remediation(
        setting="region_placement",
        suggested="run the caller (or its gateway) in the engine's region / zone",
        why=f"{fmt_seconds(found.outside_s)} of every first token is spent between the client and the engine, not in it",
        verify=rerun("the client - server TTFT difference to shrink to a LAN round trip"),
        where="deployment topology",
    )
