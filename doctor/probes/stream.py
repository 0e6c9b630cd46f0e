"""The streaming probe: what the application's own request feels like, direct and through the gateway.

Each request is timed on the run's one monotonic clock, from its scheduled send (not its
actual send: a client that fell behind must not hide the wait) through connection, response
headers, first body byte, first event, every token-bearing event (stamped at the read that
carried its first byte, see ``sse``) to the stream's final event; every socket read is kept
with its size and the events it completed (see ``transport``). Failures are evidence: each
request records an ``outcome``, and each kind of failure on a path becomes one
``EvidenceError``. The probe never raises for a failure; it returns what it measured. Ctrl-C is
the one exception it lets through, as ``StreamInterrupted``, which carries what was measured
until then.

Around the requests: every phase has its own deadline (``deadlines``: the head, the first token,
each next token, the run's ``--deadline``), and a gateway request is held to the bound its direct
path sets once that path answers within budget (``_within_direct_bound``); a constrained
``--payload`` first sends its unconstrained twins (``_send_controls``, kept in
``StreamEvidence.controls``); and the wedge watchdog (``watchdog``) stops the run when requests wait
without a token while the engine's counters stand still.
"""

from __future__ import annotations

import asyncio
import json
import math
import socket
import ssl
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable, Sequence
from typing import Any

import anyio
import httpx

from doctor import wire
from doctor.clock import Clock
from doctor.evidence import (
    ClientHealth,
    EvidenceError,
    ProbePath,
    ProbeShape,
    RequestTrace,
    Scrape,
    StreamEvidence,
    TokenEvent,
)
from doctor.evidence.stream import CANCELLED, CLIENT_STALL, DEADLINE, HEAD_TIMEOUT, NOT_THE_TARGETS, WEDGED
from doctor.probes import payload as payloads
from doctor.probes.deadlines import HeadBound, gateway_head_bound, stall_head_bound
from doctor.probes.framing import StreamDecoder
from doctor.probes.http import join_url
from doctor.probes.plan import CollectConfig
from doctor.probes.sampling import FAIL_FAST, conclusive, decisive, failing_fast
from doctor.probes.schedule import Job, Send, dispatch, plan
from doctor.probes.selfcheck import SelfCheck, merge
from doctor.probes.shard import Link, ShardError, ShardLost, ShardPool, choose_workers, worker_signals
from doctor.probes.sse import Chunk, InvalidUtf8, TooLong
from doctor.probes.transport import (
    ReadLog,
    make_client,
    skip_missing_sniffio_imports,
    speaks_plain_http,
    speaks_tls,
    ssl_context,
)
from doctor.probes.watchdog import Watchdog
from doctor.units import fmt_seconds

#: How long the probe reads on after a stream's final event ([DONE], ``response.completed``)
#: for the end of the HTTP body, which lets the connection serve the next request. The end
#: normally follows at once; a server that holds the connection open longer gets it closed.
END_GRACE_S = 0.25

EXCERPT_BYTES = 2048
EXCERPT_CHARS = 500
TEXT_EXCERPT_CHARS = 200

#: Per request, the events and socket reads the reader keeps before it stops (``truncated``): a
#: real answer has at most a few thousand of each, and a flood of tiny events (a million a
#: second) must not be kept until the run runs out of memory.
MAX_EVENTS = 100_000
MAX_READS = 100_000
#: Over the whole probe, the events and reads kept (every request's together) before it stops
#: reading and sending: a flood on many concurrent requests, each under its own caps, must end
#: bounded too (about 100 bytes each, in memory and in the bundle).
MAX_PROBE_EVENTS = 1_000_000
#: Unconstrained twins of a constrained ``--payload`` sent before the warm-up
#: (``StreamEvidence.controls``): the first warms the prompt's prefix, the second is the control.
CONTROL_TWINS = 2

#: RequestTrace.outcome -> EvidenceError.kind
_ERROR_KIND = {
    "connect": "connect", "dns": "dns", "tls": "tls", "timeout": "timeout", "stall": "timeout",
    HEAD_TIMEOUT: "timeout", "http-status": "http-status", "cut": "cut", "not-a-stream": "malformed",
    "stream-error": "malformed", "no-token": "malformed", "invalid-utf8": "malformed", WEDGED: "timeout",
}


class _BoundPassed(Exception):
    """A gateway's response head, or its first token after the head, did not come within the
    ``bound`` its direct path sets (``doctor.probes.deadlines.gateway_head_bound``)."""

    def __init__(self, bound: HeadBound) -> None:
        super().__init__(bound.why)
        self.bound = bound


class StreamInterrupted(KeyboardInterrupt):
    """Ctrl-C during the probe, with the (evidence, errors) measured until then in ``result``.

    A ``KeyboardInterrupt``, so every caller still stops; the collector keeps ``result``.
    """

    def __init__(self, result: tuple[StreamEvidence, list[EvidenceError]]) -> None:
        super().__init__("interrupted during the stream probe")
        self.result = result


def run_stream_probe(
    config: CollectConfig, clock: Clock, progress: Callable[[str], None], *, discover_model: bool = True,
    scrapes: Callable[[], Sequence[Scrape]] | None = None,
    deadline_s: float | None = None,
) -> tuple[StreamEvidence | None, list[EvidenceError]]:
    """Probe every target of ``config``: (evidence, one error per kind of failure per path).

    Synchronous (it runs its own event loop) so the collector stays plain code. ``None`` evidence
    only when nothing could be sent (no target, unusable CA bundle). ``discover_model``: ask
    ``/v1/models`` for a model when ``config`` names none; the collector turns it off when the
    endpoints probe already asked, so a silent target does not cost its deadline twice.
    ``deadline_s``: how long it may run, when less than ``--deadline`` (what the collector has left
    of the run's deadline: ``doctor.probes.deadlines.RunDeadline``).
    Raises ``StreamInterrupted`` on Ctrl-C, with the requests so far (those in flight ``cancelled``).
    ``scrapes``: the /metrics scrapes taken beside the probe so far, which the wedge watchdog reads
    (``doctor.probes.watchdog``); None: not watched.
    """
    targets = config.probed()
    if not targets:
        return None, []
    try:
        context = _tls_context(config)
    except (OSError, ssl.SSLError) as exc:
        return None, [EvidenceError("stream", str(config.http.verify), "load the CA bundle", "tls",
                                    f"cannot use --ca-cert {config.http.verify}: {exc}", fatal=True)]
    skip_missing_sniffio_imports()
    probe = _Probe(config, clock, progress, context, discover_model, deadline_s)
    if scrapes is not None and config.wedge_bound_s > 0 and probe.workers == 1:
        probe.watchdog = Watchdog(scrapes, clock, config.wedge_bound_s)
    try:
        evidence = run_loop(probe.run())
    except (KeyboardInterrupt, asyncio.CancelledError):
        raise StreamInterrupted((probe.finish(), probe.errors)) from None
    return evidence, probe.errors


def _uvloop() -> Any:
    """uvloop when it is installed (an optional dependency), else None."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop if hasattr(uvloop, "run") else None  # uvloop.run: 0.18 and later


def run_loop(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run on uvloop when it is installed (it cuts the client's CPU per chunk by a third), else asyncio."""
    uvloop = _uvloop()
    return uvloop.run(coro) if uvloop is not None else asyncio.run(coro)


def loop_name() -> str:
    """The event loop the probe runs on, for ``ClientHealth`` (it bounds the client's overhead)."""
    return "uvloop" if _uvloop() is not None else "asyncio"


def _transport() -> str:
    """The client stack, for ``ClientHealth.transport``."""
    return f"httpx {httpx.__version__} + h11, reads stamped in data_received, {loop_name()}"


def shard_workers(config: CollectConfig) -> int:
    """Worker processes to read ``config``'s streams (``doctor.probes.shard``): ``--client-workers``,
    else by the streams that may be in flight at once. Only a load run's one path is sharded: the
    paired paths of a diagnosis and its adaptive stop read every request in one process."""
    if len(config.probed()) != 1 or config.adaptive:
        return 1
    streams = min(config.concurrency, config.warmup + (config.requests or config.request_cap))
    if config.rate:  # open loop: --max-concurrency is a safety cap, not what flies
        streams = min(streams, poisson_streams(config))
    return choose_workers(streams, config.client_workers)


def poisson_streams(config: CollectConfig) -> int:
    """Streams in flight under Poisson arrivals when each request just meets its budgets (Little's
    law: arrival rate x end-to-end time, E2E = TTFT budget + (max_tokens - 1) x TPOT budget). A server
    slower than its budgets has more in flight, but then the run is over budget either way, and
    ``--client-workers`` says otherwise; sharding on the safety cap alone would split 8 requests/s
    over processes, where a small machine loses more to the split than it gains."""
    e2e = config.budgets.ttft_s + max(config.max_tokens - 1, 0) * config.budgets.tpot_s
    return max(1, math.ceil((config.rate or 0.0) * e2e))


def _tls_context(config: CollectConfig) -> ssl.SSLContext:
    """The probe's TLS context: loading the trust store costs tens of ms of CPU, so only when a target needs TLS."""
    https = any(url.lower().startswith("https:") for url in config.probed().values())
    return ssl_context(config.http.verify if https else False)


def _serve_shard(sock: socket.socket, shard: int, workers: int, config: CollectConfig, t0_ns: int, t0_wall: float) -> None:
    """A client worker process's entry point (``doctor.probes.shard.ShardPool``): the parent's clock, its own loop."""
    worker_signals()
    skip_missing_sniffio_imports()
    probe = _Probe(config, Clock(t0_ns=t0_ns, t0_wall=t0_wall), lambda _msg: None, _tls_context(config),
                   discover_model=False)
    probe.event_cap = MAX_PROBE_EVENTS // workers
    run_loop(probe.serve(sock, shard, workers))


def request_id(clock: Clock, path: ProbePath, index: int | str) -> str:
    """The ``x-request-id`` of a probe request: unique per run, so server logs can be joined."""
    return f"llm-doctor-{clock.t0_ns:x}-{path}-{index}"


class _Probe:
    def __init__(self, config: CollectConfig, clock: Clock, progress: Callable[[str], None], context: ssl.SSLContext,
                 discover_model: bool = True, deadline_s: float | None = None) -> None:
        self.config = config
        #: how long the probe may run: ``--deadline``, or what the run has left of it
        self.deadline_s = config.deadline_s if deadline_s is None else min(config.deadline_s, deadline_s)
        self.clock = clock
        self.progress = progress
        self.context = context
        self.discover_model = discover_model
        self.start = clock.now()
        self.check = SelfCheck(clock)
        self.evidence: StreamEvidence | None = None
        route = config.gateway_route
        #: path -> the URL its requests go to (for a templated gateway route: the template, as the user wrote it)
        self.urls = {path: join_url(base, payloads.ROUTES[config.route]) if path != ProbePath.GATEWAY or route is None
                     else route.url(base, "{prompt}", config.max_tokens).replace("%7Bprompt%7D", "{prompt}")
                     for path, base in config.probed().items()}
        self.headers = {**config.http.request_headers(), "accept": "text/event-stream"}
        self.traces: list[RequestTrace] = []
        self.controls: list[RequestTrace] = []  # the payload's unconstrained twins (``_send_controls``)
        self.errors: list[EvidenceError] = []
        self.model = config.model
        self.drop_extensions = False
        self.finished: Counter[tuple[ProbePath, bool]] = Counter()  # (path, warm-up) -> requests done
        self.stopped: str | None = None  # why adaptive sampling stopped
        self.kept = 0  # events and reads kept over every request (``MAX_PROBE_EVENTS``)
        self.event_cap = MAX_PROBE_EVENTS  # of this process: a worker's share of it when sharded
        #: worker processes reading the streams (``doctor.probes.shard``); 1: this process alone
        self.workers = shard_workers(config)
        self.pool: ShardPool | None = None
        self.shard_health: list[ClientHealth | None] = []  # each worker's self-check, once they stopped
        #: set, then replaced, each time a direct request answers: a gateway request waiting for its
        #: head re-reads the bound its direct path sets (``_within_direct_bound``)
        self.direct_news = asyncio.Event()
        #: path -> the scheme its port really speaks when the URL's was wrong, once asked (``_check_scheme``)
        self.schemes: dict[ProbePath, str | None] = {}
        self.watchdog: Watchdog | None = None  # stops the run when the engine stands still

    # -- the run ---------------------------------------------------------------------------

    async def run(self) -> StreamEvidence:
        """Send every planned request under the deadline; the evidence of all of them."""
        config, clock = self.config, self.clock
        # httpcore's pool locks load anyio's backend on first use: load it now, so that import
        # is not counted in the first request's latency
        await anyio.sleep(0)
        warm, measured = plan(list(self.urls), config.requests or config.request_cap, config.warmup, config.rate)
        send, close = await (self._sharded() if self.workers > 1 else self._local())
        self.start = clock.now()
        timed_out = False
        try:
            phases = self._phases(send, warm, measured)
            await asyncio.wait_for(phases if self.watchdog is None else self.watchdog.guard(phases, lambda: [*self.controls, *self.traces]),
                                   timeout=self.deadline_s)
        except asyncio.TimeoutError:
            timed_out = True
        finally:
            await close()  # also on Ctrl-C: a sharded client's workers hand back what they measured
        if self.watchdog is not None and self.watchdog.stop is not None:
            self.stopped = self.watchdog.censor([*self.controls, *self.traces])
            self.progress(self.stopped or "")
        elif timed_out:
            self._at_deadline((config.warmup + (config.requests or config.request_cap)) * len(self.urls))
        return self.finish()

    async def _local(self) -> tuple[Send, Callable[[], Awaitable[None]]]:
        """(send, close) of the streams read in this process, with its self-check sampling."""
        sampler = asyncio.ensure_future(self.check.sample())
        # one single-connection pool per slot: httpcore's pool scans all its connections on every
        # request and every response close, which costs more than the streams themselves at 256
        clients = {path: [self._client() for _ in range(self.config.concurrency)] for path in self.urls}

        async def send(job: Job, scheduled: float, slot: int) -> None:
            if not self._given_up(job):
                await self._send(clients[job.path][slot], job, scheduled)

        async def close() -> None:
            sampler.cancel()
            for client in (c for slots in clients.values() for c in slots):
                await client.aclose()

        return send, close

    async def _sharded(self) -> tuple[Send, Callable[[], Awaitable[None]]]:
        """(send, close) of the streams read by ``self.workers`` worker processes (``doctor.probes.shard``),
        or of this process alone when they cannot start (said in the evidence errors)."""
        config = self.config
        kept: dict[int | None, int] = {}

        def take(payload: tuple[RequestTrace, int]) -> None:
            trace, worker_kept = payload
            kept[trace.shard] = worker_kept
            self.kept = sum(kept.values())
            self.traces.append(trace)
            self._record(trace)

        pool = ShardPool(self.workers, _serve_shard, (config, self.clock.t0_ns, self.clock.t0_wall), take)
        try:
            await pool.start()
        except ShardError as exc:
            self.errors.append(EvidenceError("stream", ", ".join(self.urls.values()), "start the client workers", "client",
                                             f"{exc}: the streams were read by one process", fatal=False))
            self.workers = 1
            return await self._local()
        self.pool = pool

        async def send(job: Job, scheduled: float, slot: int) -> None:
            if self._given_up(job):
                return
            try:
                await pool.run(slot, (job.path, job.index, job.warmup),
                               ("job", job, scheduled, slot, self.model, self.drop_extensions))
            except ShardLost as exc:  # not the target's failure: the request went unmeasured
                trace = RequestTrace(index=job.index, path=job.path, warmup=job.warmup, t_scheduled=scheduled,
                                     outcome=CANCELLED, error=str(exc), shard=slot % self.workers)
                self.traces.append(trace)
                self._done(trace)

        async def close() -> None:
            finals = await pool.stop()
            self.shard_health = [final[0] if final is not None else None for final in finals]
            for shard, final in enumerate(finals):
                if final is not None:
                    self.traces.extend(final[1])  # cancelled in flight: the deadline or Ctrl-C
                    kept[shard] = final[2]
            self.kept = sum(kept.values())
            self.traces.sort(key=lambda t: (t.t_scheduled, t.path, t.index))
            if pool.lost is not None:
                self.errors.append(EvidenceError("stream", ", ".join(self.urls.values()), "read the streams", "client",
                                                 f"{pool.lost}: its requests in flight were not measured", fatal=False))

        return send, close

    def _client(self) -> httpx.AsyncClient:
        return make_client(self.context, self.config.http.timeout_s, self.config.stall_timeout_s)

    # -- a client worker process (``doctor.probes.shard``) ---------------------------------

    async def serve(self, sock: socket.socket, shard: int, workers: int) -> None:
        """Run the parent's jobs on this process's own loop, self-check and slots (``shard``, ``shard +
        workers``, ...) until told to stop; then hand back the requests still in flight, cancelled."""
        await anyio.sleep(0)  # anyio's backend loaded before the first request, as in the parent
        link = await Link.open(sock)
        sampler = asyncio.ensure_future(self.check.sample())
        clients = {slot: self._client() for slot in range(shard, self.config.concurrency, workers)}
        running: dict[asyncio.Future[None], RequestTrace] = {}
        mine: list[RequestTrace] = []

        async def one(job: Job, slot: int, trace: RequestTrace) -> None:
            await self._measure(clients[slot], job, trace)
            link.send(("done", (job.path, job.index, job.warmup), (trace, self.kept)))

        def forget(task: asyncio.Future[None]) -> None:
            running.pop(task, None)

        link.send(("ready",))
        try:
            while (message := await link.receive()) is not None and message[0] == "job":
                _, job, scheduled, slot, self.model, self.drop_extensions = message
                trace = RequestTrace(index=job.index, path=job.path, warmup=job.warmup, t_scheduled=scheduled, shard=shard)
                mine.append(trace)
                task = asyncio.ensure_future(one(job, slot, trace))
                running[task] = trace
                task.add_done_callback(forget)
        finally:
            unfinished = {job_task: trace for job_task, trace in running.items() if not job_task.done()}  # done ones said so
            for job_task in unfinished:
                job_task.cancel()
            await asyncio.gather(*unfinished, return_exceptions=True)
            sampler.cancel()
            link.send(("final", (self.check.health(_transport(), mine), list(unfinished.values()), self.kept)))
            await link.close()
            for client in clients.values():
                await client.aclose()

    def finish(self) -> StreamEvidence:
        """The evidence of the requests so far, and their errors (once: a second call returns the same)."""
        if self.evidence is None:
            self.evidence = StreamEvidence(
                shape=self._shape(),
                t0_wall=self.clock.t0_wall,
                duration_s=self.clock.now() - self.start,
                requests=self.traces,
                controls=self.controls,
                client=self.check.health(_transport(), self.traces) if self.workers == 1
                else merge(self.shard_health or [None] * self.workers, _transport()),
                wedge=self.watchdog.stop if self.watchdog is not None else None,
            )
            calibrate_estimates(self.traces)
            self._summarise_failures()
        return self.evidence

    async def _phases(self, send: Send, warm: list[Job], measured: Iterable[Job]) -> None:
        if self.discover_model and self.model is None and not (self.config.payload or {}).get("model"):
            self.model = await self._discover_model()
        await self._send_controls()
        if warm:
            self.progress(f"warm-up: {len(warm)} request(s)")
            await dispatch(warm, self.config.concurrency, send, self.clock)
        await dispatch(measured, self.config.concurrency, send, self.clock, stop=self._enough)

    def _enough(self) -> bool:
        """Stop sending when a path fails fast (``sampling.failing_fast``); without ``--requests``,
        also once every path is decided or the duration ran out. ``stopped`` says which."""
        config = self.config
        if self.kept > MAX_PROBE_EVENTS:
            self.stopped = f"the probe's cap of {MAX_PROBE_EVENTS:,} events and reads over all requests: stopped sending"
            return True
        if self.pool is not None and self.pool.lost is not None:
            self.stopped = f"{self.pool.lost}: stopped sending"
            return True
        for path in self.urls:
            outcome = failing_fast(self.traces, path)
            if outcome is not None:
                once = any(decisive(t) for t in self.traces
                           if t.path == path and not t.warmup and t.outcome == outcome)
                said = (f"no request succeeded and {outcome} is not one to retry" if once
                        else f"the first {FAIL_FAST} or more requests all failed ({outcome})")
                self.stopped = f"{path}: {said}: stopped sending rather than repeat it"
                return True
        if config.requests is not None:
            return False
        measured = [t for t in self.traces if not t.warmup]
        if measured and self.clock.now() - min(t.t_scheduled for t in measured) >= config.duration_s:
            self.stopped = f"the {config.duration_s:g} s duration ran out"
            return True
        if config.adaptive and conclusive(self.traces, self.urls, config.budgets.ttft_s, config.budgets.tpot_s, freezes=self.check.freezes):
            done = min(sum(1 for t in measured if t.path == p) for p in self.urls)
            self.stopped = f"conclusive after {done} request(s) per path (doctor.probes.sampling)"
            return True
        return False

    async def _send_controls(self) -> None:
        """The unconstrained twins of a constrained ``--payload``, one at a time, before the warm-up:
        ``CONTROL_TWINS`` requests more, only when the application's body constrains decoding."""
        path = self._control_path()
        if path is None:
            return
        self.progress(f"control: {CONTROL_TWINS} unconstrained twin(s) of the payload")
        client = self._client()
        try:
            for k in range(CONTROL_TWINS):
                trace = RequestTrace(index=k, path=path, t_scheduled=self.clock.now())
                self.controls.append(trace)
                await self._measure(client, Job(k, path, False, control=True), trace)
        finally:
            await client.aclose()

    def _control_path(self) -> ProbePath | None:
        """The first path whose requests carry a constrained ``--payload``; None when there is none."""
        payload = self.config.payload
        if payload is None or not payloads.constraints(payload):
            return None
        return next((p for p in self.urls if p != ProbePath.GATEWAY or self.config.gateway_route is None), None)

    async def _discover_model(self) -> str | None:
        """The first id of ``/v1/models`` (engine first); None sends the request without a model.

        Each GET is bounded by the per-call timeout and by what is left of the probe's deadline.
        Failures are not recorded here: a target that fails this GET fails the streamed requests
        too, and those record why.
        """
        end = self.start + self.deadline_s
        headers = self.config.http.request_headers()
        client = make_client(self.context, self.config.http.timeout_s, self.config.http.timeout_s)
        try:
            for base in self.config.targets().values():
                timeout = min(self.config.http.timeout_s, end - self.clock.now())
                if timeout <= 0:
                    break
                try:
                    response = await asyncio.wait_for(client.get(join_url(base, "/v1/models"), headers=headers), timeout)
                    return str(wire.loads(response.content)["data"][0]["id"])
                except (httpx.HTTPError, asyncio.TimeoutError, ValueError, LookupError, TypeError):
                    continue
        finally:
            await client.aclose()
        return None

    def _body(self, job: Job) -> dict[str, Any]:
        config = self.config
        if config.payload is not None:
            body = payloads.user_body(config.payload, config.route, self.model)
            return payloads.unconstrained(body) if job.control else body
        prompt_tokens, max_tokens = config.request_lengths().for_index(job.index)
        body = payloads.default_body(config.route, self.model, prompt_tokens, max_tokens, self._nonce(job))
        return payloads.without_extensions(body) if self.drop_extensions else body

    def _request(self, job: Job) -> tuple[str, str, bytes | None, str | None]:
        """(method, URL, body, content type) of one request: the engine's route, or the application's on the gateway."""
        config, route = self.config, self.config.gateway_route
        if job.path != ProbePath.GATEWAY or route is None:
            return "POST", self.urls[job.path], json.dumps(self._body(job)).encode(), "application/json"
        # the same prompt and length the direct path's request of this index carries
        prompt_tokens, max_tokens = config.request_lengths().for_index(job.index)
        prompt = payloads.prompt_text(prompt_tokens, self._nonce(job))
        base = config.targets()[job.path]
        content, content_type = route.content(prompt, max_tokens)
        return route.method, route.url(base, prompt, max_tokens), content, content_type

    def _nonce(self, job: Job) -> int:
        """A per-request number at the head of each prompt: no prefix cache serves one path's prompt to the other."""
        return job.index * len(self.urls) + list(self.urls).index(job.path)

    def _shape(self) -> ProbeShape:
        config = self.config
        return ProbeShape(
            route=config.route, model=self.model, prompt_tokens=None if config.payload is not None else config.prompt_tokens,
            max_tokens=config.max_tokens if config.payload is None else payloads.max_tokens(config.payload),
            concurrency=config.concurrency, warmup=config.warmup, rate=config.rate,
            requests=config.requests if config.requests is not None else max(
                (sum(1 for t in self.traces if t.path == p and not t.warmup) for p in self.urls), default=0),
            duration_s=config.duration_s if config.requests is None else None, stopped=self.stopped,
            stall_timeout_s=config.stall_timeout_s, deadline_s=config.deadline_s,
            payload=self._body(Job(0, next(iter(self.urls)), False)),
            payload_source=config.payload_source or "default",
            constraints=payloads.constraints(config.payload) if config.payload is not None else [],
            paths={path.value: url for path, url in config.probed().items()}, scenario=config.scenario,
            lengths=config.lengths.describe() if config.lengths is not None and config.payload is None else None,
            gateway_route=config.gateway_route.spec if config.gateway_route else None,
            gateway_payload_source=config.gateway_payload_source,
            framing=config.framing, text_field=config.text_field, gateway_kind=config.gateway_kind,
        )

    def _given_up(self, job: Job) -> bool:
        """Whether ``job`` is not sent because its path is failing fast (``sampling.failing_fast``): the
        second request of a pair must not wait out a hung gateway again once the first said it."""
        return not job.warmup and failing_fast(self.traces, job.path) is not None

    def _at_deadline(self, planned: int) -> None:
        """Requests cut by the deadline are ``deadline`` (censored then, no failure of the target);
        a job never sent was not run, which is no failure of the target either: ``stopped`` counts
        them instead of a trace each."""
        for trace in self.traces:
            if trace.outcome == CANCELLED:
                trace.outcome = DEADLINE
                trace.error = f"cut by the {self.config.deadline_s:g} s --deadline while still streaming"
        unsent = planned - len({(t.path, t.index) for t in self.traces})
        if unsent and self.config.requests is not None:
            self.stopped = f"the {self.config.deadline_s:g} s deadline: {unsent} planned request(s) never sent"
        elif self.stopped is None:
            self.stopped = f"the {self.config.deadline_s:g} s deadline"

    def _route_spec(self, path: ProbePath) -> str:
        """``POST /v1/chat/completions``, or the gateway's own route as given."""
        route = self.config.gateway_route
        return route.spec if path == ProbePath.GATEWAY and route is not None else f"POST {payloads.ROUTES[self.config.route]}"

    def _summarise_failures(self) -> None:
        for path, url in self.urls.items():
            reqs = [t for t in self.traces if t.path == path]
            failed: dict[str, list[RequestTrace]] = {}
            for t in reqs:
                if not t.ok and t.outcome not in NOT_THE_TARGETS:  # Ctrl-C (``Bundle.interrupted``), a frozen client
                    failed.setdefault(t.outcome, []).append(t)
            no_success = not any(t.ok for t in reqs)
            frozen = [t for t in reqs if t.outcome == CLIENT_STALL]
            if frozen:  # not the target's failure, but the run measured less than it meant to: say so
                self.errors.append(EvidenceError(
                    "stream", url, f"{self._route_spec(path)} ({path})", "client",
                    f"{len(frozen)} of {len(reqs)} request(s) not measured: {frozen[0].error}", fatal=False,
                ))
            cut = [t for t in reqs if t.outcome == DEADLINE]
            if cut:  # the user's own deadline, not the target: said, never as the target's failure
                self.errors.append(EvidenceError(
                    "stream", url, f"{self._route_spec(path)} ({path})", "timeout",
                    f"{len(cut)} of {len(reqs)} request(s) {cut[0].error}: censored at that time, "
                    "not failed by the server (a longer --deadline measures them)", fatal=False,
                ))
            for outcome, group in failed.items():
                first = group[0]
                detail = first.error or outcome
                if first.body_excerpt:
                    detail += f": {first.body_excerpt[:200]}"
                self.errors.append(EvidenceError(
                    "stream", url, f"{self._route_spec(path)} ({path})", _ERROR_KIND.get(outcome, "internal"),
                    f"{len(group)} of {len(reqs)} request(s) {outcome}: {detail}", fatal=no_success,
                ))
            cut_short = [t for t in reqs if t.ok and t.truncated]
            if cut_short:  # kept as measured, but the rest of each stream was not: say so
                self.errors.append(EvidenceError(
                    "stream", url, f"{self._route_spec(path)} ({path})", "malformed",
                    f"{len(cut_short)} of {len(reqs)} request(s) truncated: {cut_short[0].truncated}", fatal=False,
                ))
        if self.kept > MAX_PROBE_EVENTS:  # the requests cut by it may be of any path: said once
            self.errors.append(EvidenceError(
                "stream", ", ".join(self.urls.values()), "read the streams", "malformed",
                f"truncated: the probe kept {MAX_PROBE_EVENTS:,} events and reads over all requests (its cap), "
                f"then stopped reading and sending; {len(self.traces)} request(s) sent", fatal=False,
            ))

    # -- one request -----------------------------------------------------------------------

    async def _send(self, client: httpx.AsyncClient, job: Job, scheduled: float) -> None:
        trace = RequestTrace(index=job.index, path=job.path, warmup=job.warmup, t_scheduled=scheduled)
        self.traces.append(trace)
        await self._measure(client, job, trace)
        self._record(trace)

    async def _measure(self, client: httpx.AsyncClient, job: Job, trace: RequestTrace) -> None:
        """Send ``job`` and read its answer into ``trace``; every failure becomes its outcome."""
        log = ReadLog(self.clock)
        log.bind()  # this task's reads only: the task runs in its own copy of the context
        released = asyncio.Event()  # the direct path's bound no longer applies (``_within_direct_bound``)
        try:
            if job.path == ProbePath.GATEWAY and ProbePath.DIRECT in self.urls:
                await self._within_direct_bound(self._stream(client, job, trace, log, released), trace, released)
            else:
                await self._stream(client, job, trace, log, released)
        except (asyncio.CancelledError, KeyboardInterrupt):
            # the deadline (``_at_deadline`` relabels it) or Ctrl-C: what came so far is kept below
            trace.outcome = CANCELLED
            trace.error = "still streaming when the probe was stopped"
            raise
        except Exception as exc:  # noqa: BLE001 - every failure is a recorded outcome, never a crash
            trace.outcome, trace.error = self._failure(exc, trace, log)
            await self._check_scheme(job.path, trace)
        finally:
            if not trace.ok and trace.t_failed is None:
                trace.t_failed = self.clock.now()  # e.g. when a cut connection closed: no read records that
            trace.reads = log.reads
            if trace.tokens:  # also for a failed stream: what came before the failure is evidence
                trace.t_first_token, trace.t_last_token = trace.tokens[0].t, trace.tokens[-1].t
            if trace.t_end is None:
                trace.t_end = self.clock.now()

    def _record(self, trace: RequestTrace) -> None:
        """A finished request, in the process that schedules: what later requests change, and progress."""
        if (trace.outcome == "http-status" and trace.status == 400 and self.config.payload is None
                and not self.drop_extensions and payloads.mentions_extension(trace.body_excerpt or "")):
            self.drop_extensions = True  # the server rejects vLLM's extensions: later requests go without
        self._done(trace)

    def _done(self, trace: RequestTrace) -> None:
        if trace.path == ProbePath.DIRECT and trace.ok:
            self.direct_news.set()
            self.direct_news = asyncio.Event()
        self._progress_line(trace)

    def _progress_line(self, trace: RequestTrace) -> None:
        """One progress line per finished request, e.g. ``gateway 2/8 http-status 502``.

        A probe can run for minutes; the line shows it is moving and which path fails, long
        before the report. It holds no target text (no reason phrase, no body), only our own
        words and numbers. One short line per request costs the event loop far less than the
        request's own events do, and the client self-check measures the loop either way.
        """
        key = (trace.path, trace.warmup)
        self.finished[key] += 1
        total = self.config.warmup if trace.warmup else self.config.requests  # None: adaptive, no total
        if trace.ok and trace.t_first_token is not None:
            tokens = sum(ev.tokens for ev in trace.tokens)
            result = f"ok, TTFT {fmt_seconds(trace.t_first_token - trace.t_scheduled)}, {tokens} token(s)"
        else:
            result = trace.outcome + (f" {trace.status}" if trace.outcome == "http-status" else "")
        phase = " warm-up" if trace.warmup else ""
        count = f"{self.finished[key]}/{total}" if total is not None else str(self.finished[key])
        self.progress(f"{trace.path}{phase} {count} {result}")

    async def _stream(self, client: httpx.AsyncClient, job: Job, trace: RequestTrace, log: ReadLog,
                      released: asyncio.Event) -> None:
        """Send ``job`` and read its answer; ``released`` is set at the first token, or at an answer
        that is no stream (an error status, a JSON body: its own outcome, however slow its body)."""
        clock = self.clock

        async def on_trace(name: str, info: dict[str, Any]) -> None:
            if name in ("connection.connect_tcp.complete", "connection.start_tls.complete"):
                trace.t_connected, trace.connection_reused = clock.now(), False
            elif name == "http11.send_request_headers.started" and trace.connection_reused is None:
                trace.t_connected, trace.connection_reused = clock.now(), True
            elif name == "http11.send_request_body.complete":
                trace.t_request_written = clock.now()
            elif name == "http11.receive_response_headers.complete":
                t = log.mark_headers()
                trace.t_headers = t if t is not None else clock.now()

        headers = {**self.headers, "x-request-id": request_id(self.clock, job.path, f"control{job.index}" if job.control else job.index)}
        method, url, content, content_type = self._request(job)
        if content_type:
            headers["content-type"] = content_type
        trace.t_sent = clock.now()
        log.phase(trace.t_sent + self.config.stall_timeout_s)  # the response head's (doctor.probes.deadlines)

        async def opening() -> httpx.Response:
            request = client.build_request(method, url, content=content, headers=headers, extensions={"trace": on_trace})
            try:
                return await client.send(request, stream=True)
            except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError):
                if not trace.connection_reused or trace.t_headers is not None:
                    raise
            # The kept-alive connection was closed as this request went into it, before any answer:
            # llama.cpp's llama-server closes after every stream without saying so, and its close can
            # reach us just after the next request left. Sent once more on a new connection, as HTTP
            # clients do (RFC 9112, 9.3.1); the lost attempt stays in this request's time from t_sent.
            trace.connection_reused = trace.t_connected = trace.t_request_written = None
            request = client.build_request(method, url, content=content, headers=headers, extensions={"trace": on_trace})
            return await client.send(request, stream=True)

        response = await opening()
        log.phase((trace.t_headers or clock.now()) + self.config.stall_timeout_s)  # the first token's
        try:
            trace.status = response.status_code
            trace.http_version = response.http_version
            trace.headers = dict(response.headers)
            content_type = response.headers.get("content-type", "")
            if response.status_code >= 400:
                released.set()
                trace.outcome, trace.error = "http-status", f"HTTP {response.status_code} {response.reason_phrase}".strip()
                trace.body_excerpt = await _excerpt(response, trace, log)
            elif response.status_code != 200 or (_json_document(content_type) and self.config.framing != "ndjson"):
                released.set()
                trace.outcome = "not-a-stream"
                trace.error = f"asked for a stream, got HTTP {response.status_code} {content_type or 'without a content type'}"
                trace.body_excerpt = await _excerpt(response, trace, log)
            else:
                await self._read_events(response, trace, log, released)
        finally:
            await response.aclose()
            if trace.t_end is None:  # a stream's final event sets it: what came after is not the answer
                trace.t_end = log.last_t if log.last_t is not None else clock.now()

    async def _read_events(self, response: httpx.Response, trace: RequestTrace, log: ReadLog,
                           released: asyncio.Event) -> None:
        decoder = StreamDecoder(response.headers.get("content-type", ""), self.config.framing, self.config.text_field)
        ended = False
        counted = 0  # completion tokens already attributed (continuous usage stats)
        events = 0
        text: list[str] = []
        # aiter_raw skips httpx's decoder chain when there is nothing to decode (most streams)
        body = response.aiter_bytes() if response.headers.get("content-encoding") else response.aiter_raw()

        def take(items: list[tuple[float, Chunk]]) -> bool:
            """Record one read's items; True at the stream's final event or its first error."""
            nonlocal counted, ended
            # a read without per-token framing is credited with the tokens it is estimated to
            # carry, so events per read still shows a buffering edge's bursts
            log.add_events(sum(c.tokens if decoder.estimated and c.kind == "token" else 1 for _, c in items))
            for t, chunk in items:
                if trace.t_first_event is None:
                    trace.t_first_event = t
                if chunk.kind == "error":
                    trace.outcome, trace.error = "stream-error", f"error inside the stream: {chunk.error}"
                    return True
                if chunk.prompt_tokens is not None:
                    trace.prompt_tokens = chunk.prompt_tokens
                if chunk.finish_reason:
                    trace.finish_reason = chunk.finish_reason
                tokens = chunk.tokens
                if chunk.completion_tokens is not None:
                    trace.completion_tokens = chunk.completion_tokens
                    if chunk.kind == "token" and chunk.completion_tokens > counted:
                        tokens, counted = chunk.completion_tokens - counted, chunk.completion_tokens
                if chunk.kind == "token":
                    released.set()
                    log.phase(t + self.config.stall_timeout_s)  # the next token's
                    trace.tokens.append(TokenEvent(t=t, tokens=tokens, chars=len(chunk.text)))
                    if len(text) < TEXT_EXCERPT_CHARS:  # one character or more per token
                        text.append(chunk.text)
                elif chunk.kind == "end":
                    ended = True
                    trace.t_end = log.last_t  # the read that completed the final event
                    return True
            return False

        try:
            async for data in body:
                if trace.t_first_byte is None:
                    trace.t_first_byte = log.first_body_t()
                items = decoder.feed(data, log.last_t if log.last_t is not None else self.clock.now())
                events += len(items)
                self.kept += len(items) + 1
                if items and take(items):
                    break
                if events > MAX_EVENTS or len(log.reads) > MAX_READS:
                    trace.truncated = (f"stopped reading after {events} events in {len(log.reads)} reads "
                                       f"(caps: {MAX_EVENTS} events, {MAX_READS} reads per request)")
                    break
                if self.kept > self.event_cap:
                    trace.truncated = (f"stopped reading after {events} events in {len(log.reads)} reads: the probe "
                                       f"kept {MAX_PROBE_EVENTS:,} events and reads over all requests (its cap)")
                    break
            else:  # the body ended cleanly: the end of a framing without a terminator
                if not ended and trace.outcome == "ok":
                    take(decoder.close())
        finally:
            trace.framing = decoder.framing if decoder.framing != "sse" else "sse-text"
            trace.tokens_estimated = decoder.estimated
            if text:
                trace.text_excerpt = "".join(text)[:TEXT_EXCERPT_CHARS]
        if ended and trace.outcome == "ok":
            await _finish_body(body)
        if trace.outcome != "ok":
            return
        if trace.truncated is None and decoder.needs_terminator and (decoder.pending or not ended):
            trace.outcome = "cut"
            trace.error = "the stream ended before its last event ([DONE] or response.completed)"
        elif not trace.tokens:
            trace.outcome = "no-token"
            usage = " (usage only)" if trace.completion_tokens is not None else ""
            trace.error = f"the stream carried no token{usage}"

    async def _within_direct_bound(self, work: Coroutine[Any, Any, None], trace: RequestTrace,
                                   released: asyncio.Event) -> None:
        """Run ``work``, a gateway request, unless neither its response head nor (after a head) its first
        token comes within the bound its direct path sets, from the send
        (``doctor.probes.deadlines.gateway_head_bound``): then ``_BoundPassed``. Unbounded once
        ``released`` (the first token, or an answer that is no stream). The bound is read again whenever
        a direct request answers, since the gateway's first request is sent beside the direct path's first.

        ``work`` runs in this very task and a watcher beside it cancels the task when the bound passes:
        a task of its own would start only after the direct request scheduled behind it had been sent,
        and the pair would lose its counterbalanced order (A B, B A)."""
        sent = self.clock.now()
        current = asyncio.current_task()
        assert current is not None  # a coroutine of the probe's event loop
        passed: list[HeadBound] = []

        async def watch() -> None:
            while not released.is_set():
                news = self.direct_news
                bound = gateway_head_bound(self.traces, self.config.budgets.ttft_s)
                start = trace.t_sent if trace.t_sent is not None else sent
                left = None if bound is None else start + bound.seconds - self.clock.now()
                if bound is not None and left is not None and left <= 0:
                    passed.append(bound)
                    current.cancel()
                    return
                waiters = {asyncio.ensure_future(news.wait()), asyncio.ensure_future(released.wait())}
                try:
                    await asyncio.wait(waiters, timeout=left, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    for waiter in waiters:
                        waiter.cancel()

        watcher = asyncio.ensure_future(watch())
        try:
            await work
        except asyncio.CancelledError:
            # the watcher's own cancellation becomes the bound; any other (the deadline, Ctrl-C) goes on
            uncancel = getattr(current, "uncancel", None)  # Python 3.11+: counts the task's cancel requests
            if passed and (uncancel is None or uncancel() == 0):
                raise _BoundPassed(passed[0]) from None
            raise
        finally:
            watcher.cancel()

    async def _check_scheme(self, path: ProbePath, trace: RequestTrace) -> None:
        """Once per path: when an https:// URL's handshake failed or timed out, whether its port
        speaks plain HTTP; when an http:// URL's connection closed before any answer, whether it
        speaks TLS. Either makes the failure the one line that says so (``scheme_mismatch``)."""
        url = httpx.URL(self.config.targets()[path])
        handshake = trace.outcome == "tls" or (trace.outcome == "timeout" and "TLS" in (trace.error or ""))
        wrong = {"https": handshake, "http": trace.outcome == "cut" and trace.status is None}.get(url.scheme, False)
        if not wrong or url.host is None:
            return
        if path not in self.schemes:
            port = url.port or (443 if url.scheme == "https" else 80)
            timeout = min(self.config.http.timeout_s, 2.0)
            other = "http" if url.scheme == "https" else "https"
            asked = speaks_plain_http if other == "http" else speaks_tls
            self.schemes[path] = other if await asked(url.host, port, timeout) else None
        other_scheme = self.schemes[path]
        if other_scheme is None:
            return
        where = f"{url.scheme}://{url.netloc.decode('ascii', 'replace')}"
        trace.outcome, trace.scheme_mismatch = "tls", other_scheme
        trace.error = (f"TLS handshake failed: {where} speaks plain HTTP; use http://" if other_scheme == "http"
                       else f"no HTTP answer: {where} speaks TLS; use https://")

    def _failure(self, exc: Exception, trace: RequestTrace, log: ReadLog) -> tuple[str, str]:
        """(outcome, sentence) for an exception raised while sending or reading."""
        config = self.config
        if isinstance(exc, _BoundPassed):
            came = sum(r.nbytes for r in log.reads)
            if trace.status is not None:  # the head came: it is the first token that did not
                trace.first_token_deadline_s = exc.bound.seconds
                return "stall", (f"no first token in {fmt_seconds(exc.bound.seconds)} of the send {exc.bound.why}; "
                                 f"the response head came ({came} byte(s) in all)")
            trace.head_deadline_s, trace.head_deadline_basis = exc.bound.seconds, exc.bound.basis
            return HEAD_TIMEOUT, (f"no response head in {fmt_seconds(exc.bound.seconds)} {exc.bound.why}"
                                  + (f"; {came} byte(s) of it came" if came else "; not a byte came"))
        if isinstance(exc, InvalidUtf8):
            return "invalid-utf8", str(exc)
        if isinstance(exc, TooLong):
            trace.truncated = str(exc)
            return "stream-error", str(exc)
        if isinstance(exc, httpx.ConnectTimeout):
            what = "TLS handshake" if "TLS" in str(exc) else "connection"  # the transport's words
            return "timeout", f"no {what} within {config.http.timeout_s:g} s"
        if isinstance(exc, httpx.ReadTimeout):
            return self._read_timeout(trace, log)
        if isinstance(exc, httpx.ConnectError):
            for cause in _causes(exc):
                if isinstance(cause, socket.gaierror):
                    return "dns", f"cannot resolve the host: {cause.strerror or cause}"
                if isinstance(cause, ssl.SSLError):
                    return "tls", f"TLS handshake failed: {getattr(cause, 'verify_message', None) or cause.reason or cause}"
            return "connect", f"cannot connect: {exc}"
        if isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)):
            where = "before the response headers" if trace.status is None else "mid-stream"
            return "cut", f"the connection was closed {where}: {exc}"
        if isinstance(exc, httpx.TimeoutException):
            return "timeout", f"{type(exc).__name__}: {exc}"
        if isinstance(exc, httpx.DecodingError):
            return "stream-error", f"cannot decode the body: {exc}"
        if isinstance(exc, (httpx.UnsupportedProtocol, httpx.InvalidURL)):
            return "connect", f"bad URL: {exc}"
        return "stream-error", f"{type(exc).__name__}: {exc}"


    def _read_timeout(self, trace: RequestTrace, log: ReadLog) -> tuple[str, str]:
        """(outcome, sentence) of a read that waited out its phase's deadline (``doctor.probes.deadlines``)."""
        stall = self.config.stall_timeout_s
        head = trace.status is None
        where = "for the response headers" if head else "inside the stream"
        # A read timeout measures the client's wait, not the server's silence: a client that
        # froze past the stall timeout wakes up to a timeout even with the answer in its
        # socket buffer (the timer and the data are handled in the same loop turn).
        last = trace.tokens[-1].t if trace.tokens else trace.t_headers or trace.t_sent or trace.t_scheduled
        now = self.clock.now()
        frozen = self.check.frozen_within(last, now)
        if now - last - frozen < stall:
            return CLIENT_STALL, (f"the client itself froze for {frozen:.1f} s of the {now - last:.1f} s it waited "
                                  f"{where}: the server may well have answered (not counted as the server's)")
        since = sum(r.nbytes for r in log.reads if r.t > last)
        if head:
            bound = stall_head_bound(stall)
            trace.head_deadline_s, trace.head_deadline_basis = bound.seconds, bound.basis
            if since:  # bytes came, the head never completed: a server dripping its head
                return HEAD_TIMEOUT, (f"no complete response head in {fmt_seconds(stall)} ({bound.why}); "
                                      f"{since} byte(s) of it came")
        elif since:  # bytes kept coming, no token among them
            what = "first token" if not trace.tokens else "token"
            return "stall", f"no {what} for {stall:g} s inside the stream, though {since} byte(s) came"
        return "stall", f"no byte for {stall:g} s {where}"


def calibrate_estimates(traces: list[RequestTrace]) -> None:
    """Re-estimate the token counts of streams without per-token framing at the run's own characters per token.

    ``framing.estimate_tokens`` assumes English's ~4 characters per token while reading; a path
    with per-token framing in the same run (the engine's own) measures the real ratio for the
    same prompt and model, so the estimate becomes that path's count for the same text. The
    reads are credited again with the new counts, so events per read stays true to the bursts.
    """
    measured = [ev for t in traces if t.ok and not t.tokens_estimated for ev in t.tokens]
    chars, tokens = sum(ev.chars for ev in measured), sum(ev.tokens for ev in measured)
    if not chars or not tokens:
        return
    per_token = chars / tokens
    for trace in traces:
        if not trace.tokens_estimated:
            continue
        change: dict[float, int] = {}
        for ev in trace.tokens:
            new = max(1, round(ev.chars / per_token))
            change[ev.t] = change.get(ev.t, 0) + new - ev.tokens
            ev.tokens = new
        for read in trace.reads:
            if read.t in change:
                read.events = max(0, read.events + change.pop(read.t))


def _json_document(content_type: str) -> bool:
    """A JSON content type that is one document (``application/json``), not a stream of them (NDJSON)."""
    ctype = content_type.lower()
    return "json" in ctype and not any(s in ctype for s in ("ndjson", "jsonl", "json-seq", "stream"))


def _causes(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and len(out) < 10:
        out.append(seen)
        seen = seen.__cause__ or seen.__context__
    return out


async def _finish_body(body: AsyncIterator[bytes]) -> None:
    """Read the rest of a body after its final event, for at most ``END_GRACE_S``.

    The stream is over at its final event, so a server that holds the connection open after it
    must not hold the probe's slot (closed loop: the next request would wait for it). Reading
    the end of the body when it follows at once keeps the connection for the next request;
    past the grace, ``_stream`` closes the unfinished response and httpcore the connection.
    """
    with anyio.move_on_after(END_GRACE_S):
        try:
            async for _ in body:
                pass
        except httpx.ReadTimeout:
            pass  # a stall timeout shorter than the grace: the same held-open connection
        except (httpx.RemoteProtocolError, httpx.ReadError):
            pass  # closed or reset after the final event, without the last chunk: the answer is complete


async def _excerpt(response: httpx.Response, trace: RequestTrace, log: ReadLog) -> str:
    """The first bytes of an error body (the collector redacts the bundle before it is stored)."""
    body = b""
    async for data in response.aiter_bytes():
        if trace.t_first_byte is None:
            trace.t_first_byte = log.first_body_t()
        body += data
        if len(body) >= EXCERPT_BYTES:
            break
    return body[:EXCERPT_BYTES].decode("utf-8", errors="replace")[:EXCERPT_CHARS]
