"""The stream probe's run loop: its phases, its deadline, when it stops, and the evidence it returns.

``Run`` sends the planned requests (``doctor.probes.schedule``) in three phases (the unconstrained
twins of a constrained ``--payload``, the warm-up, the measured requests) under the run's
``--deadline``, stops sending once every path is decided or one fails fast
(``doctor.probes.sampling``), or when the wedge watchdog (``doctor.probes.watchdog``) sees the
engine stand still, and reads the streams in this process or in client workers
(``doctor.probes.stream.shards``). What one request does is ``request.Requester``'s; what the
failures say is ``failures``'.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable

import anyio
import httpx

from doctor.evidence import ClientHealth, EvidenceError, ProbePath, ProbeShape, RequestTrace, StreamEvidence
from doctor.evidence.stream import CANCELLED, DEADLINE
from doctor.foundation import wire
from doctor.foundation.clock import Clock
from doctor.foundation.units import fmt_seconds
from doctor.probes import payload as payloads
from doctor.probes.client_stack import transport_name
from doctor.probes.deadlines import gateway_head_bound
from doctor.probes.http import join_url
from doctor.probes.plan import CollectConfig
from doctor.probes.sampling import FAIL_FAST, conclusive, decisive, failing_fast
from doctor.probes.schedule import Job, Send, dispatch, plan
from doctor.probes.selfcheck import SelfCheck, merge
from doctor.probes.shard import ShardError, ShardLost, ShardPool
from doctor.probes.stream.failures import summarise
from doctor.probes.stream.request import Requester
from doctor.probes.stream.shards import JobKey, key_of, serve_shard, shard_workers, stand_in
from doctor.probes.transport import make_client
from doctor.probes.watchdog import Watchdog

#: Unconstrained twins of a constrained ``--payload`` sent before the warm-up
#: (``StreamEvidence.controls``): the first warms the prompt's prefix, the second is the control.
CONTROL_TWINS = 2


class Run:
    """One probe run over every target of ``config``: its requests, errors and why it stopped."""

    def __init__(self, config: CollectConfig, clock: Clock, progress: Callable[[str], None], context: ssl.SSLContext,
                 discover_model: bool = True, deadline_s: float | None = None) -> None:
        self.config = config
        #: how long the probe may run: ``--deadline``, or what the run has left of it
        self.deadline_s = config.deadline_s if deadline_s is None else min(config.deadline_s, deadline_s)
        self.clock = clock
        self.progress = progress
        self.discover_model = discover_model
        self.start = clock.now()
        self.check = SelfCheck(clock)
        self.evidence: StreamEvidence | None = None
        self.traces: list[RequestTrace] = []
        self.controls: list[RequestTrace] = []  # the payload's unconstrained twins (``_send_controls``)
        self.errors: list[EvidenceError] = []
        self.requests = Requester(config, clock, context, self.check, self.traces)
        self.urls = self.requests.urls
        self.finished: Counter[tuple[ProbePath, bool]] = Counter()  # (path, warm-up) -> requests done
        self.stopped: str | None = None  # why adaptive sampling stopped
        #: worker processes reading the streams (``doctor.probes.shard``); 1: this process alone
        self.workers = shard_workers(config)
        self.pool: ShardPool | None = None
        self.shard_health: list[ClientHealth | None] = []  # each worker's self-check, once they stopped
        #: each worker's freezes so far, sent with its answers: the adaptive stop takes each out of its requests only
        self.shard_freezes: dict[int | None, list[tuple[float, float]]] = {}
        #: each worker's requests in flight at its last pulse, for the watchdog (``shards.stand_in``)
        self.in_flight: dict[int, dict[JobKey, RequestTrace]] = {}
        self.watchdog: Watchdog | None = None  # stops the run when the engine stands still

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
            await asyncio.wait_for(phases if self.watchdog is None else self.watchdog.guard(phases, self._sent),
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
        clients = {path: [self.requests.client() for _ in range(self.config.concurrency)] for path in self.urls}

        async def send(job: Job, scheduled: float, slot: int) -> None:
            if not self._given_up(job):
                trace = RequestTrace(index=job.index, path=job.path, warmup=job.warmup, t_scheduled=scheduled)
                self.traces.append(trace)
                await self.requests.measure(clients[job.path][slot], job, trace)
                self._record(trace)

        async def close() -> None:
            sampler.cancel()
            for client in (c for slots in clients.values() for c in slots):
                await client.aclose()

        return send, close

    async def _sharded(self) -> tuple[Send, Callable[[], Awaitable[None]]]:
        """(send, close) of the streams read by ``self.workers`` worker processes (``doctor.probes.shard``,
        ``shards.serve_shard``), or of this process alone when they cannot start (said in the evidence errors)."""
        config, requests = self.config, self.requests
        kept: dict[int | None, int] = {}
        paired = ProbePath.DIRECT in self.urls and ProbePath.GATEWAY in self.urls

        def take(payload: tuple[RequestTrace, int, list[tuple[float, float]]]) -> None:
            trace, worker_kept, freezes = payload
            kept[trace.shard] = worker_kept
            requests.kept = sum(kept.values())
            self.shard_freezes.setdefault(trace.shard, []).extend(freezes)
            if trace.shard is not None:  # answered: no longer in flight, whatever its worker's last pulse said
                self.in_flight.get(trace.shard, {}).pop(key_of(trace), None)
            self.traces.append(trace)
            self._record(trace)
            if paired and trace.path == ProbePath.DIRECT and trace.ok:  # the gateway's bound moved: every worker hears it
                pool.broadcast(("bound", gateway_head_bound(self.traces, config.budgets.ttft_s)))

        def note(shard: int, message: tuple[str, list[tuple[JobKey, float, float, float | None]]]) -> None:
            if message[0] == "pulse":
                self.in_flight[shard] = {key: stand_in(key, scheduled, sent, last) for key, scheduled, sent, last in message[1]}

        pool = ShardPool(self.workers, serve_shard, (config, self.clock.t0_ns, self.clock.t0_wall, self.watchdog is not None),
                         take, note)
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
                               ("job", job, scheduled, slot, requests.model, requests.drop_extensions))
            except ShardLost as exc:  # not the target's failure: the request went unmeasured
                trace = RequestTrace(index=job.index, path=job.path, warmup=job.warmup, t_scheduled=scheduled,
                                     outcome=CANCELLED, error=str(exc), shard=slot % self.workers)
                self.traces.append(trace)
                self._record(trace)

        async def close() -> None:
            self.in_flight.clear()
            finals = await pool.stop()
            self.shard_health = [final[0] if final is not None else None for final in finals]
            for shard, final in enumerate(finals):
                if final is not None:
                    self.traces.extend(final[1])  # cancelled in flight: the deadline or Ctrl-C
                    kept[shard] = final[2]
            requests.kept = sum(kept.values())
            self.traces.sort(key=lambda t: (t.t_scheduled, t.path, t.index))
            if pool.lost is not None:
                self.errors.append(EvidenceError("stream", ", ".join(self.urls.values()), "read the streams", "client",
                                                f"{pool.lost}: its requests in flight were not measured", fatal=False))

        return send, close

    def _sent(self) -> list[RequestTrace]:
        """Every request sent so far, as the watchdog reads them: the payload's twins, the finished ones,
        and those in flight (in a worker: as its last pulse said)."""
        return [*self.controls, *self.traces, *(t for shard in self.in_flight.values() for t in shard.values())]

    def finish(self) -> StreamEvidence:
        """The evidence of the requests so far, and their errors (once: a second call returns the same)."""
        if self.evidence is None:
            self.evidence = StreamEvidence(
                shape=self._shape(),
                t0_wall=self.clock.t0_wall,
                duration_s=self.clock.now() - self.start,
                requests=self.traces,
                controls=self.controls,
                client=self.check.health(transport_name(), self.traces, self.config.rate is None) if self.workers == 1
                else merge(self.shard_health or [None] * self.workers, transport_name()),
                wedge=self.watchdog.stop if self.watchdog is not None else None,
            )
            calibrate_estimates(self.traces)
            self.errors.extend(summarise(self.traces, self.urls, self.config, self.requests.kept, self.requests.cap))
        return self.evidence

    async def _phases(self, send: Send, warm: list[Job], measured: Iterable[Job]) -> None:
        if self.discover_model and self.requests.model is None and not (self.config.payload or {}).get("model"):
            self.requests.model = await self._discover_model()
        # each phase is a measured window: the collector runs between phases, never inside one
        with self.check.measuring():
            await self._send_controls()
        if warm:
            self.progress(f"warm-up: {len(warm)} request(s)")
            with self.check.measuring():
                await dispatch(warm, self.config.concurrency, send, self.clock)
        with self.check.measuring():
            await dispatch(measured, self.config.concurrency, send, self.clock, stop=self._enough)
    def _enough(self) -> bool:
        """Stop sending when a path fails fast (``sampling.failing_fast``); without ``--requests``,
        also once every path is decided or the duration ran out. ``stopped`` says which."""
        config = self.config
        if self.requests.kept > self.requests.cap:
            self.stopped = f"the probe's cap of {self.requests.cap:,} events and reads over all requests: stopped sending"
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
        if config.adaptive and conclusive(self.traces, self.urls, config.budgets.ttft_s, config.budgets.tpot_s,
                                         freezes=self.check.freezes if self.pool is None else self.shard_freezes):
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
        client = self.requests.client()
        try:
            for k in range(CONTROL_TWINS):
                trace = RequestTrace(index=k, path=path, t_scheduled=self.clock.now())
                self.controls.append(trace)
                await self.requests.measure(client, Job(k, path, False, control=True), trace)
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
        client = make_client(self.requests.context, self.config.http.timeout_s, self.config.http.timeout_s)
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

    def _shape(self) -> ProbeShape:
        config = self.config
        return ProbeShape(
            route=config.route, model=self.requests.model, prompt_tokens=None if config.payload is not None else config.prompt_tokens,
            max_tokens=config.max_tokens if config.payload is None else payloads.max_tokens(config.payload),
            concurrency=config.concurrency, warmup=config.warmup, rate=config.rate,
            requests=config.requests if config.requests is not None else max(
                (sum(1 for t in self.traces if t.path == p and not t.warmup) for p in self.urls), default=0),
            duration_s=config.duration_s if config.requests is None else None, stopped=self.stopped,
            stall_timeout_s=config.stall_timeout_s, deadline_s=config.deadline_s,
            payload=self.requests.body(Job(0, next(iter(self.urls)), False)),
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

    def _record(self, trace: RequestTrace) -> None:
        """A finished request, in the process that schedules: what later requests change, and progress."""
        self.requests.learn(trace)
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


