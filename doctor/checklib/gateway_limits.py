"""What a gateway's own limits and retries leave in the evidence: the shared reading of LD309, LD310 and LD501.

Four facts several checks need alike, each read once here:

- ``gateway_refusal``: a failed gateway request that the gateway answered itself (a connection cap,
  a circuit breaker, a parallel-request limit) rather than passing on the engine's error. An engine
  answers errors in JSON; the gateway's own answer is its error page, Envoy's
  ``x-envoy-overloaded: true``, LiteLLM's parallel-request message.
- ``engine_intake``: how many requests the engine took in over the metrics window (finished by
  any reason, plus the rise of those running or waiting), to hold against what the probe sent.
- ``probe_sent``: what the probe sent on each path over the same window.
- ``gateway_wait``: the staircase of a gateway that lets fewer streams through than were sent
  (a serialising edge, LD303; a connection cap that queues, LD309).
- ``stream_cap``: how many streams the gateway let run at once against the direct path, from the
  probe's own timings: a cap of two or more is a connection limit (LD309) even where no header
  names the gateway and no /metrics shows the engine's queue; one at a time is LD303's.

Public through ``doctor.checklib``.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.checklib.paths import PathPair, ttft_wait
from doctor.derive.gateway import header
from doctor.derive.metrics_window import GaugeWindow, MetricsWindow
from doctor.evidence import ProbePath, RequestTrace

#: HTTP statuses a gateway answers with when its own limit refuses a request: 429 (LiteLLM's and
#: Traefik's in-flight limits, nginx's limit_req_status), 502 (open-source nginx when every upstream
#: server is at `max_conns`: "no live upstreams"), 503 (HAProxy's queue timeout, Envoy's circuit
#: breakers, nginx's limit_conn).
REFUSAL_STATUSES = (429, 502, 503)

#: Outcomes of a request that never reached the gateway or the engine (nothing to count there).
UNSENT = ("connect", "dns", "tls")


def gateway_refusal(req: RequestTrace) -> str | None:
    """The tell that the gateway itself refused this gateway-path request, or ``None``."""
    if req.path != ProbePath.GATEWAY or req.outcome != "http-status" or req.status not in REFUSAL_STATUSES:
        return None
    if (header(req.headers, "x-envoy-overloaded") or "").strip().lower() == "true":
        return "x-envoy-overloaded: true (an Envoy circuit breaker)"
    body = (req.body_excerpt or "").lower()
    if "reset reason: overflow" in body:
        return "Envoy's 'reset reason: overflow' (a circuit breaker)"
    if "parallel request" in body or "max_parallel_requests" in body:
        return "LiteLLM's parallel request limit in the body"
    ctype = (header(req.headers, "content-type") or "").lower()
    if "html" in ctype or body.lstrip().startswith(("<html", "<!doctype html")):
        server = header(req.headers, "server")
        return f"the gateway's own HTML error page{f' (server: {server})' if server else ''}, where an engine answers JSON"
    return None


@dataclass(frozen=True)
class EngineIntake:
    """Requests the engine took in over the metrics window."""

    requests: float  # finished (every reason) + the rise of running and waiting
    aborted: float
    in_flight_rise: float  # running + waiting at the last scrape less at the first
    idle_at_start: bool  # nothing running or waiting at the first scrape: no other client's request in flight
    prompt_tokens: float | None  # the prompt-token counter's delta (vllm:prompt_tokens_total)


def _rise(g: GaugeWindow | None) -> float:
    return g.samples[-1][1] - g.samples[0][1] if g is not None and len(g.samples) >= 2 else 0.0


def _first(g: GaugeWindow | None) -> float:
    return g.samples[0][1] if g is not None and g.samples else 0.0


def engine_intake(mw: MetricsWindow) -> EngineIntake | None:
    """What the engine's counters say it took in, or ``None`` when it exports no finished-request counter
    or the window is Prometheus history (its range does not bracket the probe's requests as the
    scrapes taken right before and after it do)."""
    if mw.source != "scrape" or (not mw.finished_by_reason and "finished_by_reason" in mw.missing):
        return None
    finished = sum(mw.finished_by_reason.values())
    rise = _rise(mw.running) + _rise(mw.waiting)
    return EngineIntake(
        requests=finished + rise, aborted=mw.finished_by_reason.get("abort", 0.0),
        in_flight_rise=rise, idle_at_start=_first(mw.running) + _first(mw.waiting) == 0,
        prompt_tokens=mw.prompt_tokens,
    )


def probe_sent(requests: list[RequestTrace]) -> dict[ProbePath, list[RequestTrace]]:
    """The probe's requests that left the client, warm-up included (the metrics window covers it), by path."""
    sent: dict[ProbePath, list[RequestTrace]] = {p: [] for p in ProbePath}
    for r in requests:
        if r.t_sent is not None and r.outcome not in UNSENT:
            sent[ProbePath(r.path)].append(r)
    return sent


@dataclass(frozen=True)
class GatewayWait:
    """How long the gateway's requests waited beyond their fastest, against the direct path's, in answers
    (``ttft_wait``): the staircase of an edge that lets fewer streams through than were sent."""

    answer_s: float  # one answer: the direct end-to-end p50
    gateway: float  # the gateway's p90 request's wait, in answers
    direct: float
    ttft_ratio: float  # gateway TTFT p90 / direct TTFT p90

    def queued(self, wait_answers: float, spread_factor: float, ttft_factor: float) -> bool:
        """The gateway's p90 request waited at least ``wait_answers`` answers, ``spread_factor`` times the
        direct wait, with a TTFT p90 ``ttft_factor`` times the direct one."""
        return (self.gateway >= wait_answers and self.gateway >= spread_factor * self.direct
                and self.ttft_ratio >= ttft_factor)


def gateway_wait(pair: PathPair) -> GatewayWait | None:
    """The waits of both paths, or ``None`` with fewer than two gateway TTFTs or no direct answer time."""
    d, g = pair.direct, pair.gateway
    answer = d.e2e.p50
    if g.ttft.n < 2 or not answer:
        return None
    ratio = (g.ttft.p90 or 0.0) / d.ttft.p90 if d.ttft.p90 else float("inf")
    return GatewayWait(answer, ttft_wait(g, answer), ttft_wait(d, answer), ratio)


def streams_at_once(requests: list[RequestTrace], path: ProbePath) -> int:
    """The most of ``path``'s successful requests (warm-ups too: they ran beside) that streamed at
    once, each from its first token to its last: a stream that starts as another ends is not beside it."""
    edges: list[tuple[float, int]] = []
    for r in requests:
        if r.path == path and r.ok and r.t_first_token is not None and r.t_last_token is not None:
            edges += [(r.t_first_token, 1), (r.t_last_token, -1)]
    most = now = 0
    for _, step in sorted(edges):  # at one instant an end (-1) sorts before a start (+1)
        now += step
        most = max(most, now)
    return most


@dataclass(frozen=True)
class StreamCap:
    """The most streams that ran at once through the gateway and directly, at the probe's concurrency."""

    gateway: int
    direct: int
    concurrency: int


def stream_cap(requests: list[RequestTrace], concurrency: int) -> StreamCap | None:
    """A ``StreamCap`` when the gateway let at most k >= 2 streams run at once while the direct path ran
    more at the same concurrency (above k): the gateway's own limit on streams to the engine, each later
    stream starting as one ends. None otherwise: one at a time is a serialising edge's (LD303), and a
    direct path that never ran more than the gateway says the engine, not the gateway, is the bound."""
    gateway, direct = (streams_at_once(requests, p) for p in (ProbePath.GATEWAY, ProbePath.DIRECT))
    if 2 <= gateway < concurrency and direct > gateway:
        return StreamCap(gateway, direct, concurrency)
    return None
