"""Stream evidence: what the client felt, per request, from client timestamps.

All times are seconds on one monotonic clock (``time.perf_counter_ns``), relative to the
probe's start ``t0``; ``t0_wall`` anchors them to the wall clock so metric scrapes and log
lines can be placed on the same axis. A field is ``None`` when the moment never happened
(no headers, no token): that absence is itself evidence.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from doctor.foundation.strenum import StrEnum


class ProbePath(StrEnum):
    """The two ways the probe reaches the model, whose difference is what the gateway adds.

    Each request's ``path``; the key of ``ProbeShape.paths`` and of the per-path statistics.
    """

    DIRECT = "direct"  # --engine: vLLM itself
    GATEWAY = "gateway"  # --gateway: what the application calls


@dataclass
class ReadRecord:
    """One read from the socket: when it arrived, how many bytes, how many SSE events it completed."""

    t: float
    nbytes: int
    events: int


@dataclass
class TokenEvent:
    """A token-bearing SSE event, stamped when its FIRST byte arrived."""

    t: float
    tokens: int = 1  # tokens carried, when the server says (continuous usage) else 1
    chars: int = 0


#: Stream framings the reader recognises (``RequestTrace.framing``) -> how the report names them.
FRAMINGS: dict[str, str] = {
    "openai-sse": "OpenAI SSE (JSON chunks, [DONE])",
    "sse-text": "SSE whose data is plain text",
    "sse-events": "SSE with named events",
    "ndjson": "NDJSON (one JSON object per line)",
    "raw": "raw text chunks (no per-token framing)",
}

#: The outcome of a request in flight when the user stopped the probe (Ctrl-C): neither a failure
#: of the target nor a measurement.
CANCELLED = "cancelled"
#: The outcome of a request whose read timed out because the client itself froze past the stall
#: timeout (``ClientHealth.freezes``): the server may well have answered; no failure of the target.
CLIENT_STALL = "client-stall"
#: The outcome of a request still streaming when the user's own ``--deadline`` ended the probe:
#: censored at that time (what came is kept, a wait with no token is a lower bound of TTFT), and
#: no failure of the target: the deadline cut it, not the server.
DEADLINE = "deadline"
#: The outcome of a request whose response head did not complete within its deadline
#: (``RequestTrace.head_deadline_s``): a head dripped byte by byte, or a gateway silent past the
#: bound its direct path sets (``doctor.probes.deadlines``).
HEAD_TIMEOUT = "head-timeout"
#: ``RequestTrace.head_deadline_basis``: ``--stall-timeout`` for the whole head, the bound a
#: gateway is held to once its direct path answers within budget, or the short bound of a target
#: that already answered the endpoints probe's GET nothing in its whole ``--timeout`` (hung).
STALL_BASIS = "stall-timeout"
DIRECT_BASIS = "direct-path"
SILENT_BASIS = "silent-target"
#: The outcome of a request the wedge watchdog stopped (``WedgeStop``): still without a first token
#: while the engine's counters stood still. Its wait is a lower bound of its TTFT, like a deadline's.
WEDGED = "wedged"
#: ``Endpoint.deadline_basis`` besides ``DIRECT_BASIS``: the GET's own ``--timeout``, or what was
#: left of the run's ``--deadline`` when that was less.
TIMEOUT_BASIS = "timeout"
RUN_BASIS = "run-deadline"
#: Outcomes that were no failure of the target: nothing measured (Ctrl-C, a frozen client) or a
#: measurement censored by the user's own deadline.
NOT_THE_TARGETS = (CANCELLED, CLIENT_STALL, DEADLINE)


@dataclass
class RequestTrace:
    """One streamed request on one path."""

    index: int
    path: ProbePath
    warmup: bool = False
    t_scheduled: float = 0.0
    t_sent: float | None = None
    t_connected: float | None = None
    # When httpx finished writing the request body to the socket (its trace extension): from
    # ``t_sent`` to here is the client's own send work, not the server's latency.
    t_request_written: float | None = None
    connection_reused: bool | None = None
    t_headers: float | None = None
    t_first_byte: float | None = None
    t_first_event: float | None = None
    t_first_token: float | None = None
    t_last_token: float | None = None
    t_end: float | None = None
    # When the probe saw the request fail (for a stream cut mid-answer: the connection's close,
    # which no read records), so a proxy's idle timeout can be measured.
    t_failed: float | None = None
    tokens: list[TokenEvent] = field(default_factory=list)
    reads: list[ReadRecord] = field(default_factory=list)
    status: int | None = None
    http_version: str | None = None
    headers: dict[str, str] = field(default_factory=dict)  # response headers, redacted
    outcome: str = "ok"  # ok | connect | dns | tls | timeout | stall | head-timeout | http-status | not-a-stream | stream-error | cut | no-token | invalid-utf8 | deadline | wedged | cancelled
    error: str | None = None
    body_excerpt: str | None = None  # first bytes of an error body, redacted
    prompt_tokens: int | None = None  # from the usage trailer
    completion_tokens: int | None = None
    finish_reason: str | None = None
    text_excerpt: str | None = None  # first characters of the generated text
    # The stream framing the reader detected or was told (``doctor.probes.framing.FRAMINGS``):
    # "openai-sse", "sse-text", "sse-events", "ndjson" or "raw"; None when no body was read.
    framing: str | None = None
    tokens_estimated: bool = False  # token counts estimated from text length (no per-token framing)
    # Why the reader stopped keeping this stream (its event or read cap), when it did: what was
    # kept is evidence, the rest was not stored.
    truncated: str | None = None
    # Which client worker process measured it (``ClientHealth.shards``) when the probe's streams
    # were sharded over processes; None: the one process of ``ClientHealth`` itself (and every
    # bundle from before sharding).
    shard: int | None = None
    # When the response head's deadline ended the wait (``head-timeout``, or a ``stall`` before the
    # head): the bound in seconds from ``t_sent`` and what it came from, ``"stall-timeout"`` or
    # ``"direct-path"`` (a gateway held to the bound its direct path's answers set), so a report
    # can say why the probe stopped waiting.
    head_deadline_s: float | None = None
    head_deadline_basis: str | None = None
    # When a gateway's head came but its first token did not within the bound its direct path sets
    # (``stall``): that bound in seconds from ``t_sent``; its basis is always "direct-path".
    first_token_deadline_s: float | None = None
    # The scheme the target's port really speaks, when the URL's was wrong ("http": https:// to a
    # plain-HTTP port; "https": http:// to a TLS port): the one line the report gives for it.
    scheme_mismatch: str | None = None
    # Whose clock stamped the reads (``reads[].t``, so every token and ``t_headers``): "kernel"
    # (the time the kernel received the bytes, plain HTTP on Linux), "loop" (when the event loop
    # read them: TLS, other platforms, every bundle from before) or "mixed"; None: no read.
    stamp_clock: str | None = None
    # When the request's last byte left this host: the kernel's transmit stamp ("kernel" in
    # ``send_clock``), else when the write that completed it returned ("loop"). From the due time
    # to here, less the connection's setup, is the client's own send lag (``send_lag``), which no
    # latency counts. None in bundles from before: latencies then count from ``t_scheduled``.
    t_request_left: float | None = None
    send_clock: str | None = None
    # The W3C trace context the request carried (``traceparent``: one trace per request, this span
    # the client's request), so every hop that traces records its span in the same trace and the
    # join (``doctor.derive.request_hops``) finds it; None when sent without (``--no-trace-context``)
    # and in bundles from before. Lower-case hex, as the header spells them.
    trace_id: str | None = None
    span_id: str | None = None

    @property
    def ok(self) -> bool:
        return self.outcome == "ok"


#: An open-loop arrival sent this much after its scheduled time is late: the self-check's event-loop lag
#: limit, beyond which the client, not the server, decided when the request left.
LATE_AFTER_S = 0.010


def late_arrival(req: RequestTrace) -> bool:
    """Whether an open-loop (``--rate``) arrival left more than ``LATE_AFTER_S`` after it was due."""
    return req.t_sent is not None and req.t_sent - req.t_scheduled > LATE_AFTER_S


def send_lag(req: RequestTrace, closed_loop: bool) -> float | None:
    """Seconds the client itself took to put ``req`` on the wire once it was due; None when unrecorded.

    Two parts, both the client's: the write, from the send (``t_sent``; on a new connection from
    when it was established, ``t_connected``) to when the last byte left
    (``t_request_left``); and, in a closed loop, where the slot is the schedule, the wait from the
    slot to the send (``t_sent - t_scheduled``: the loop busy sending the others of a burst).
    Connecting and the TLS handshake are not in it: a user pays those too. In an open loop
    (``--rate``) the wait from arrival to send may be a wait for a slot, which a user would feel,
    so only the write counts there.
    """
    if req.t_request_left is None or req.t_sent is None:
        return None
    new = not req.connection_reused and req.t_connected is not None and req.t_connected >= req.t_sent
    began = req.t_connected if new and req.t_connected is not None else req.t_sent
    lag = max(0.0, req.t_request_left - began)
    return lag + max(0.0, req.t_sent - req.t_scheduled) if closed_loop else lag


@dataclass
class ClientHealth:
    """The client's self-check: could the client itself have distorted the timings?"""

    loop_lag_p99_ms: float | None = None
    loop_lag_max_ms: float | None = None
    cpu_percent_max: float | None = None
    cpu_count: int | None = None
    # From send to request written, on reused connections only (no connect or TLS inside):
    # the client's own time to put a request on the wire, which TTFT includes.
    send_p99_ms: float | None = None
    suspect: bool = False
    reasons: list[str] = field(default_factory=list)
    transport: str = ""  # the HTTP stack used, e.g. "httpx+h11"
    # [start, end] on the run's clock of each time the client's event loop woke up late by more
    # than 50 ms, in time order: it could not read then, so a token that arrived meanwhile is
    # stamped at the end. A sharded client keeps every worker's freezes here (for a reader that
    # does not know ``shards``: taken out of every request, each latency stays a lower bound).
    freezes: list[list[float]] = field(default_factory=list)
    # The self-check of each worker process, by ``RequestTrace.shard``, when the probe's streams
    # were sharded over processes (``doctor.probes.shard``); empty for one process. Each worker
    # froze on its own: its freezes concern the requests it read, not another worker's.
    shards: list[ClientHealth] = field(default_factory=list)
    # Whose clock stamped the run's reads, over its requests (``RequestTrace.stamp_clock``):
    # "kernel", "loop" or "mixed"; None in bundles from before (the loop's).
    stamp_clock: str | None = None
    # Over the kernel-stamped reads, how much later the event loop read them than the kernel
    # received them: the distortion the loop's clock would have put in every stamp.
    kernel_gap_p99_ms: float | None = None
    kernel_gap_max_ms: float | None = None
    # Over the reads the probe's drain thread took (``doctor.probes.drainer``), how much later it
    # read them than the kernel received them: a reader later than a token gap reads two tokens
    # together, and the first takes the second's stamp. None without one (bundles from before).
    read_gap_p99_ms: float | None = None
    read_gap_max_ms: float | None = None
    # CLOCK_REALTIME - CLOCK_MONOTONIC (ns), sampled once per run (per worker process): how the
    # kernel's stamps were put on the run's clock (``doctor.foundation.clock``).
    realtime_offset_ns: int | None = None
    # Whose clock stamped when requests left (``RequestTrace.send_clock``), over the run's requests.
    send_clock: str | None = None
    # What made the client busy without distorting its stamps: the event loop's lag, its CPU, a
    # collection, when every read was stamped by the kernel (they are reasons otherwise).
    notes: list[str] = field(default_factory=list)

    def freezes_of(self, shard: int | None) -> list[list[float]]:
        """The freezes of the process that read the requests of ``shard``: that worker's own, or
        all of them when the bundle does not say which worker (one process, an unknown shard)."""
        if shard is not None and 0 <= shard < len(self.shards):
            return self.shards[shard].freezes
        return self.freezes


def awake_span(freezes: Sequence[Sequence[float]], start: float, end: float) -> float:
    """``end - start`` less the client's ``freezes`` within it: a wait or gap as a lower bound of
    the server's share (``doctor.derive.stream_stats`` and the adaptive sampler count alike)."""
    return end - start - frozen_overlap(freezes, start, end) if freezes else end - start


def frozen_overlap(freezes: Sequence[Sequence[float]], start: float, end: float) -> float:
    """Seconds of ``[start, end]`` covered by ``freezes``: disjoint ``(start, end)`` intervals in time order.

    Bisected, since a derivation asks once per gap and a stream may have thousands of both.
    """
    total = 0.0
    i = bisect.bisect_right(freezes, start, key=lambda f: f[1])  # the first freeze that ends after start
    while i < len(freezes) and freezes[i][0] < end:
        total += min(end, freezes[i][1]) - max(start, freezes[i][0])
        i += 1
    return total


@dataclass
class ProbeShape:
    """What the probe was asked to send: recorded so offline analysis knows the load shape."""

    route: str = "chat"
    model: str | None = None
    prompt_tokens: int | None = None
    max_tokens: int | None = None
    concurrency: int = 1
    requests: int = 8
    warmup: int = 1
    rate: float | None = None  # Poisson arrivals per second; None = closed loop
    stall_timeout_s: float | None = None
    deadline_s: float | None = None
    # Adaptive sampling (no --requests): the time budget of the measured phase, and why sending
    # stopped ("conclusive after N per path", "the 30 s duration ran out", ...); None for a fixed count.
    duration_s: float | None = None
    stopped: str | None = None
    payload: dict[str, Any] = field(default_factory=dict)  # the body sent (redacted)
    payload_source: str | None = None  # --payload FILE, or "default"
    # How the body constrains decoding (``doctor.probes.payload.constraints``): e.g.
    # "response_format:json_schema", "tools"; empty for free text (and every default body).
    constraints: list[str] = field(default_factory=list)
    paths: dict[str, str] = field(default_factory=dict)  # ProbePath value -> URL (redacted)
    # The application's own route on the gateway path (``--gateway-route``), e.g.
    # "POST /chat?prompt={prompt}", and its body template file; None: the engine's route.
    gateway_route: str | None = None
    gateway_payload_source: str | None = None
    framing: str | None = None  # --framing: the framing forced on every path; None: detected
    text_field: str | None = None  # --text-field: where NDJSON / named-event JSON keeps its text
    gateway_kind: str | None = None  # --gateway-kind: what the user says the gateway is (fastapi, nginx, ...)
    scenario: str | None = None  # llm-doctor load / sweep: single | server | offline (MLPerf's terms)
    lengths: str | None = None  # per-request lengths when they vary (``doctor.probes.lengths.Lengths.describe``)


@dataclass
class WedgeStop:
    """Why the probe's watchdog (``doctor.probes.watchdog``) stopped sending early: requests in
    flight without a first token while the engine's progress counters stood still in /metrics.

    Times are the probe's client clock; the check reads it to say how fast the wedge was seen.
    """

    t_detected: float  # when the watchdog stopped the probe
    t_first_waiting: float  # the send of the oldest request then in flight without a token
    still_since: float  # the first scrape of the run whose counters stood still
    still_until: float  # its last scrape
    scrapes: int  # scrapes in that run
    counters: int  # engine counter series compared (tokens, finished requests, histogram counts)
    bound_s: float  # how long counters and requests must stand still together before it stops
    in_flight: int  # requests it stopped (outcome ``wedged``)
    sent: int  # requests sent in all, warm-up included
    running: float | None = None  # the engine's running gauge at the last scrape; None: not exposed
    waiting: float | None = None


@dataclass
class StreamEvidence:
    """Everything the stream probe measured, raw enough to re-derive every statistic."""

    shape: ProbeShape = field(default_factory=ProbeShape)
    t0_wall: float = 0.0  # unix time of t0
    duration_s: float = 0.0
    requests: list[RequestTrace] = field(default_factory=list)
    client: ClientHealth = field(default_factory=ClientHealth)
    wedge: WedgeStop | None = None  # the watchdog stopped the probe: the engine stood still
    # With a constrained --payload (``ProbeShape.constraints``): its unconstrained twins, the same
    # prompt without the schema or tools, sent one at a time before the warm-up on the first path
    # that carries the payload. The first warms the prompt's prefix; the rest are the control that
    # the constrained requests' first token and gaps compare with. Kept apart from ``requests``, so
    # no statistic of what users felt counts them.
    controls: list[RequestTrace] = field(default_factory=list)
