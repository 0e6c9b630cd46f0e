"""The per-request join: each probe request's client timings with the spans its hops exported.

Every probe request carried a ``traceparent`` (``RequestTrace.trace_id``); vLLM started with
``--otlp-traces-endpoint`` exports one ``llm_request`` span per request in that trace, whose
attributes say where the engine spent the request's time (vLLM's ``OutputProcessor.do_tracing``
sets them, named in ``vllm/tracing/utils.py``): ``gen_ai.latency.time_in_queue``,
``time_in_model_prefill``, ``time_to_first_token`` (all from the request's arrival), and the span
starts at that arrival. A gateway that traces adds its own span to the same trace.

The engine's span times are on the engine host's wall clock; the client's on its own run clock,
anchored by ``t0_wall``. The join aligns the two (``align``): every request the engine saw arrived
after the client sent it and ended before the client's last read, so the offset lies in the
intersection of those windows; 0 when the clocks already agree within it, else the nearest
bound, and the report says how far off the engine's clock was. Each request's time to its first
token then splits into hops that sum to it by construction, on the client's clock:

    to the engine (or: to the gateway, in the gateway)  the send to the engine's arrival
    engine front end   tokenizing and handing over (TTFT less queue and prefill)
    queue              waiting for a slot in the batch
    prefill            the prompt's forward passes up to the first token
    delivery           the engine's first token to the client's

A hop may come out slightly negative by the alignment's error: ``TOLERANCE_S`` is what the tests
hold it to. Spans of other users' requests in the window (trace ids the probe did not send) give
the server's own per-request distribution of queue, prefill and TTFT, and say whose prefills each
probe request's longest stall between two tokens sat behind (``request_stalls``).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from doctor.derive.engine_spans import (
    COMPLETION_TOKENS,
    DECODE,
    PREFILL,
    PROMPT_TOKENS,
    QUEUE,
    REQUEST_ID,
    TTFT,
    count,
    is_engine_span,
    seconds,
)
from doctor.derive.missing import Missing
from doctor.derive.request_stalls import STALL_COVERED, Stall, longest_stall, prefill_window
from doctor.derive.stream_stats import Dist, dist
from doctor.evidence import Bundle, RequestTrace, Span, StreamEvidence
from doctor.foundation.stats import quantile

#: How far below zero a hop may come out and still be a measurement: the clock alignment's error
#: (the engine stamps its arrival after parsing the request; the exporters round nothing) plus the
#: client's own read scheduling. The tests hold every hop of a real vLLM's requests to it.
TOLERANCE_S = 0.005
#: Requests at or above this quantile of the client's TTFT are "the slow requests".
SLOW_QUANTILE = 0.9
#: Reads kept per request for the waterfall's ticks: the first ones, which cover the first token.
MAX_TICKS = 64
#: The hop inside the gateway's own span: its entry to the engine's arrival.
IN_GATEWAY = "gateway"
#: How to turn tracing on, per hop, for the report's "did not trace" lines.
TURN_ON_ENGINE = ("start vLLM with --otlp-traces-endpoint http://HOST:PORT/v1/traces, HOST:PORT being llm-doctor's "
                  "--otlp-listen, and OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf")
TURN_ON_GATEWAY = ("enable the gateway's OpenTelemetry export to the same endpoint (nginx: the otel module's otel_exporter "
                   "and otel_trace on; otel_trace_context propagate; Envoy: its tracing provider opentelemetry)")


@dataclass
class Hop:
    """One part of a request's wait for its first token, on the client's clock from its send."""

    name: str
    start: float  # seconds after the client's send
    seconds: float


@dataclass
class RequestHops:
    """One probe request joined with its spans: where its time to the first token went."""

    index: int
    path: str
    trace_id: str
    ttft: float | None  # the client's: its send to its first token
    e2e: float | None  # the client's: its send to its last read
    engine_span: bool  # the engine's span arrived
    gateway_span: str | None = None  # the service whose span covered the engine's, when one did
    request_id: str | None = None  # the engine's own id (``cmpl-...``)
    queue: float | None = None
    prefill: float | None = None
    engine_ttft: float | None = None
    decode: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    hops: list[Hop] = field(default_factory=list)  # in order; they sum to ``ttft``
    slowest_hop: str | None = None
    slowest_hop_s: float | None = None
    ticks: list[float] = field(default_factory=list)  # the client's reads, seconds after its send
    stall: Stall | None = None  # its longest wait between two tokens, and the others' prefills it sat behind


@dataclass
class ClockAlignment:
    """How the engine's span times were put on the client's clock: seconds added to the engine's.

    ``low``/``high`` bound the offset the requests allow; ``consistent`` is False when no one offset
    fits them all (spans of another run, a clock stepped during it), and ``offset_s`` is then their middle.
    """

    offset_s: float
    low: float | None
    high: float | None
    consistent: bool
    requests: int


@dataclass
class RequestHopsView:
    """The join of the run: each probe request's hops, the slow ones, and the server's own distribution."""

    requests: list[RequestHops]
    alignment: ClockAlignment
    slow: list[int]  # indices into ``requests``: TTFT at or above the p90, slowest first
    slow_hop: str | None  # the hop that took the most of the slow requests' time
    slow_hop_share: float | None  # its share of their TTFT
    typical_hop: str | None  # the same over the requests below the median
    typical_hop_share: float | None
    hop_p90: dict[str, float] = field(default_factory=dict)  # each hop's p90 over the probe's requests
    others: int = 0  # engine spans of requests the probe did not send
    others_queue: Dist = field(default_factory=Dist)
    others_prefill: Dist = field(default_factory=Dist)
    others_ttft: Dist = field(default_factory=Dist)
    untraced: list[str] = field(default_factory=list)  # which hop sent no span, and how to turn it on
    stalled: list[int] = field(default_factory=list)  # indices: the longest stalls (at or above their p90), longest first
    stalled_behind: int = 0  # of ``stalled``, those other requests' prefills covered (``STALL_COVERED``)
    typical_stall_s: float | None = None  # the median of every request's longest stall
    typical_behind_share: float | None = None  # the share of the stalls below that median covered alike
    spans: int = 0
    dropped: int = 0
    malformed: int = 0


def align(pairs: list[tuple[RequestTrace, Span]], t0_wall: float) -> ClockAlignment:
    """The offset that puts the engine's span times inside each request's window on the client's clock."""
    lows = [t0_wall + r.t_sent - s.start_ns / 1e9 for r, s in pairs if r.t_sent is not None]
    highs = [t0_wall + r.t_end - s.end_ns / 1e9 for r, s in pairs if r.t_end is not None]
    low, high = (max(lows) if lows else None), (min(highs) if highs else None)
    if low is None or high is None:
        return ClockAlignment(0.0, low, high, True, len(pairs))
    if low > high:
        return ClockAlignment((low + high) / 2, low, high, False, len(pairs))
    return ClockAlignment(min(max(0.0, low), high), low, high, True, len(pairs))


def _hops(req: RequestTrace, engine: Span, gateway: Span | None, offset: float, t0_wall: float) -> RequestHops:
    attrs = engine.attributes
    out = RequestHops(index=req.index, path=str(req.path), trace_id=req.trace_id or "", ttft=None, e2e=None, engine_span=True,
                      request_id=str(attrs[REQUEST_ID]) if REQUEST_ID in attrs else None,
                      queue=seconds(attrs, QUEUE), prefill=seconds(attrs, PREFILL), engine_ttft=seconds(attrs, TTFT),
                      decode=seconds(attrs, DECODE), prompt_tokens=count(attrs, PROMPT_TOKENS),
                      completion_tokens=count(attrs, COMPLETION_TOKENS))
    sent = req.t_sent if req.t_sent is not None else req.t_scheduled
    _client(out, req, sent)

    def at(ns: int) -> float:  # a span time as seconds after the client's send
        return ns / 1e9 + offset - t0_wall - sent

    arrival = at(engine.start_ns)
    if gateway is not None:
        out.gateway_span = gateway.service or gateway.name
        entered = min(at(gateway.start_ns), arrival)
        out.hops += [Hop("to the gateway", 0.0, entered), Hop(IN_GATEWAY, entered, arrival - entered)]
    else:
        out.hops.append(Hop("to the engine", 0.0, arrival))
    if out.engine_ttft is not None and out.ttft is not None:
        queue, prefill = out.queue or 0.0, out.prefill or 0.0
        front = max(0.0, out.engine_ttft - queue - prefill)
        out.hops += [Hop("engine front end", arrival, front), Hop("queue", arrival + front, queue),
                     Hop("prefill", arrival + front + queue, out.engine_ttft - front - queue),
                     Hop("delivery", arrival + out.engine_ttft, out.ttft - arrival - out.engine_ttft)]
    slowest = max(out.hops, key=lambda h: h.seconds, default=None)
    if slowest is not None:
        out.slowest_hop, out.slowest_hop_s = slowest.name, slowest.seconds
    return out


def _client(out: RequestHops, req: RequestTrace, sent: float) -> None:
    """The client's own side of the join: its TTFT and E2E from its send, and its first reads."""
    if req.t_first_token is not None:
        out.ttft = req.t_first_token - sent
    if req.t_end is not None:
        out.e2e = req.t_end - sent
    out.ticks = [round(r.t - sent, 6) for r in req.reads[:MAX_TICKS]]


def hop_totals(rows: list[RequestHops]) -> dict[str, float]:
    """Each hop's seconds summed over ``rows`` (a hop below zero by the alignment's error counts 0),
    largest first: what the slow requests' split and the verdict's both read."""
    totals: dict[str, float] = defaultdict(float)
    for row in rows:
        for hop in row.hops:
            totals[hop.name] += max(0.0, hop.seconds)
    return dict(sorted(totals.items(), key=lambda kv: -kv[1]))


#: The hops before the engine saw the request: the send to its arrival, split at the gateway's span where one came.
BEFORE_ENGINE = ("to the engine", "to the gateway", IN_GATEWAY)


def hops_seconds(row: RequestHops, names: tuple[str, ...] = BEFORE_ENGINE) -> float:
    """Seconds of ``row``'s TTFT in the hops ``names`` (by default before the engine's arrival); a hop
    below zero by the alignment's error counts 0."""
    return sum(max(0.0, hop.seconds) for hop in row.hops if hop.name in names)


def _shares(rows: list[RequestHops]) -> tuple[str | None, float | None]:
    """The hop with the most of these requests' summed TTFT, and its share of it."""
    totals = hop_totals(rows)
    whole = sum(row.ttft or 0.0 for row in rows)
    if not totals or whole <= 0:
        return None, None
    name = next(iter(totals))
    return name, min(1.0, totals[name] / whole)


def _untraced(stream: StreamEvidence, joined: list[RequestHops], engine_traced: set[str]) -> list[str]:
    """Which hop sent no span for the probe's requests, and how to turn it on: evidence missing, not an error."""
    notes = []
    sent = [r for r in stream.requests if r.trace_id and r.t_first_byte is not None and not r.warmup]
    missing = [r for r in sent if r.trace_id not in engine_traced]
    if missing:
        notes.append(f"the engine sent no span for {len(missing)} of {len(sent)} request(s): {TURN_ON_ENGINE}")
    gateway = [row for row in joined if row.path == "gateway"]
    if gateway and not any(row.gateway_span for row in gateway):
        notes.append(f"the gateway sent no span for its {len(gateway)} request(s): {TURN_ON_GATEWAY}")
    return notes


def derive_request_hops(bundle: Bundle) -> RequestHopsView:
    """Join each probe request with its spans; ``Missing`` when there are no spans to join."""
    stream, traces = bundle.stream, bundle.traces
    if stream is None or not stream.requests:
        raise Missing("no probe requests to join with spans")
    if not any(r.trace_id for r in stream.requests):
        raise Missing("the probe's requests carried no traceparent (--no-trace-context, or a bundle from before): "
                      "no span can be joined with them")
    if traces is None:
        raise Missing(f"no spans were received: to see each request's hops, run with --otlp-listen 127.0.0.1:4318 and {TURN_ON_ENGINE} "
                      "(or, where the engine exports to Jaeger or Tempo, --traces URL of its query API)")
    ours = {r.trace_id: r for r in stream.requests if r.trace_id}
    by_trace: dict[str, list[Span]] = defaultdict(list)
    for span in traces.spans:
        by_trace[span.trace_id].append(span)
    pairs = [(ours[t], next(s for s in spans if is_engine_span(s)))
             for t, spans in by_trace.items() if t in ours and any(is_engine_span(s) for s in spans)]
    if not pairs:
        where = "the receiver" if traces.source == "otlp" else f"the trace store {traces.source}"
        raise Missing(f"{where} gave {len(traces.spans)} span(s), none of them an engine's span of a probe request: "
                      f"{TURN_ON_ENGINE}")
    alignment = align(pairs, stream.t0_wall)
    probe = set(ours)
    windows = [(s, w) for s in traces.spans if is_engine_span(s)
               and (w := prefill_window(s, alignment.offset_s, stream.t0_wall)) is not None]
    rows = []
    for req, engine in sorted(pairs, key=lambda p: (str(p[0].path), p[0].index)):
        others = [s for s in by_trace[engine.trace_id] if s is not engine and s.service != engine.service
                  and s.start_ns <= engine.start_ns]
        gateway = min(others, key=lambda s: s.start_ns, default=None)
        row = _hops(req, engine, gateway, alignment.offset_s, stream.t0_wall)
        if not req.warmup:  # a warm-up's stall is no user's
            row.stall = longest_stall(req, req.t_sent if req.t_sent is not None else req.t_scheduled, windows, engine, probe)
        rows.append(row)
    measured = [row for row in rows if row.ttft is not None and not ours[row.trace_id].warmup]
    ttfts = sorted(row.ttft for row in measured if row.ttft is not None)
    bar = quantile(ttfts, SLOW_QUANTILE) if ttfts else None
    median = quantile(ttfts, 0.5) if ttfts else None
    slow = sorted((i for i, row in enumerate(rows) if row in measured and bar is not None and (row.ttft or 0) >= bar),
                  key=lambda i: -(rows[i].ttft or 0.0))
    typical = [row for row in measured if median is not None and (row.ttft or 0) < median] or measured
    slow_hop, slow_share = _shares([rows[i] for i in slow])
    typical_hop, typical_share = _shares(typical)
    by_hop: dict[str, list[float]] = defaultdict(list)
    for row in measured:
        for hop in row.hops:
            by_hop[hop.name].append(hop.seconds)
    foreign = [s for s in traces.spans if is_engine_span(s) and s.trace_id not in ours]
    stalled, stalled_behind, typical_stall, typical_behind = _stalls(rows, measured)
    return RequestHopsView(
        requests=rows, alignment=alignment, slow=slow, slow_hop=slow_hop, slow_hop_share=slow_share,
        typical_hop=typical_hop, typical_hop_share=typical_share,
        hop_p90={name: quantile(sorted(v), 0.9) for name, v in by_hop.items()},
        others=len(foreign),
        others_queue=dist([v for s in foreign if (v := seconds(s.attributes, QUEUE)) is not None]),
        others_prefill=dist([v for s in foreign if (v := seconds(s.attributes, PREFILL)) is not None]),
        others_ttft=dist([v for s in foreign if (v := seconds(s.attributes, TTFT)) is not None]),
        untraced=_untraced(stream, rows, {r.trace_id for r, _ in pairs if r.trace_id}),
        spans=len(traces.spans), dropped=traces.dropped, malformed=traces.malformed,
        stalled=stalled, stalled_behind=stalled_behind, typical_stall_s=typical_stall, typical_behind_share=typical_behind)


def _stalls(rows: list[RequestHops], measured: list[RequestHops]) -> tuple[list[int], int, float | None, float | None]:
    """The longest stalls (indices into ``rows``, at or above the p90 of every measured request's
    longest stall, longest first), how many of them others' prefills covered, the median stall, and
    the share of the stalls below it covered alike: the slow ones against the rest."""
    timed = [(i, row.stall) for i, row in enumerate(rows) if row in measured and row.stall and row.stall.seconds > 0]
    if not timed:
        return [], 0, None, None
    lengths = sorted(stall.seconds for _, stall in timed)
    bar, median = quantile(lengths, SLOW_QUANTILE), quantile(lengths, 0.5)
    stalled = [i for i, stall in sorted(timed, key=lambda t: -t[1].seconds) if stall.seconds >= bar]
    by_index = dict(timed)
    behind = sum(1 for i in stalled if by_index[i].covered >= STALL_COVERED)
    rest = [stall for _, stall in timed if stall.seconds < median]
    share = sum(1 for stall in rest if stall.covered >= STALL_COVERED) / len(rest) if rest else None
    return stalled, behind, median, share
