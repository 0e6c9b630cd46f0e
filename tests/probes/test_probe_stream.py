"""The stream probe against a server on a known schedule: what it stamps, counts and schedules.

Assertions compare the probe's own stamps with each other and with the server's schedule
(orders and ratios), never with an absolute time limit.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import statistics
import time

import pytest

from doctor.collection.collector import CollectConfig
from doctor.derive.stream_stats import request_stats
from doctor.evidence import RequestTrace, TokenEvent
from doctor.evidence.stream import send_lag
from doctor.foundation.clock import Clock
from doctor.probes.selfcheck import SelfCheck
from doctor.probes.stream import run_stream_probe
from tests.support.sse_server import MODEL, SseServer


@pytest.fixture(scope="module")
def server():
    with SseServer() as srv:
        yield srv


def run(**kw) -> tuple[list[RequestTrace], object]:
    kw.setdefault("requests", 2)
    kw.setdefault("warmup", 0)
    evidence, errors = run_stream_probe(CollectConfig(**kw), Clock(), lambda _msg: None)
    assert evidence is not None
    return evidence.requests, (evidence, errors)


@pytest.mark.parametrize("route, opts", [
    ("chat", {}),  # the role-only chunk comes at once
    ("responses", {}),  # created / in_progress / *.added come at once
    ("responses", {"noevent": "1"}),  # a proxy dropped the event: lines
    ("completions", {"ping": "1"}),  # a keep-alive comment comes at once
])
def test_preamble_role_chunk_and_keepalive_do_not_start_ttft(server, route, opts):
    ttft = 0.2
    traces, _ = run(engine=server.base(ttft=ttft, itl=0.005, n=4, **opts), route=route, requests=1)
    (t,) = traces
    assert t.ok, t.error
    assert len(t.tokens) == 4
    assert t.t_headers <= t.t_first_byte <= t.t_first_token
    # the first token is the scheduled one: most of ttft after the headers, not with them
    assert t.t_first_token - t.t_headers > 0.5 * ttft
    if route != "completions":
        assert t.t_first_event < t.t_first_token  # the preamble was seen, and not counted


def test_first_byte_is_the_first_body_byte_not_the_headers(server):
    """Headers at once, the body (its first token) ttft later: the first byte comes with the token."""
    ttft = 0.2
    traces, _ = run(engine=server.base(ttft=ttft, itl=0.005, n=3), route="completions", requests=1)
    (t,) = traces
    assert t.ok, t.error
    assert t.t_first_byte == t.t_first_token
    assert t.t_first_byte - t.t_headers > 0.5 * ttft


@pytest.mark.parametrize("framing", ["chunked", "close"])
def test_one_event_per_read_and_gaps_follow_the_schedule(server, framing):
    itl = 0.02
    traces, _ = run(engine=server.base(ttft=0.05, itl=itl, n=12, framing=framing), route="chat")
    for t in traces:
        assert t.ok, t.error
        rs = request_stats(t)
        assert rs.tokens == 12
        assert statistics.median(r.events for r in t.reads if r.events) == 1  # a read per event
        assert 0.5 < rs.median_gap / itl < 2
        assert t.completion_tokens == 12 and t.prompt_tokens == 38
        assert t.t_sent <= t.t_request_written
        assert t.t_sent <= t.t_request_left <= t.t_headers  # it left before its answer came, on the kernel's clock
    reused = [t.connection_reused for t in traces]
    assert reused == ([False, True] if framing == "chunked" else [False, False])


def test_usage_trailer_does_not_extend_e2e(server):
    tail = 0.3
    traces, _ = run(engine=server.base(ttft=0.05, itl=0.005, n=5, tail=tail), route="completions", requests=1)
    (t,) = traces
    rs = request_stats(t)
    assert t.ok and t.completion_tokens == 5
    assert t.t_end - t.t_last_token > 0.5 * tail  # the trailer came late...
    assert rs.e2e == pytest.approx(t.t_last_token - t.t_scheduled - send_lag(t, False))  # ...and E2E ends at the last token


def test_continuous_usage_counts_several_tokens_per_event(server):
    traces, _ = run(engine=server.base(itl=0.005, n=9, per=3), route="chat", requests=1, max_tokens=9)
    (t,) = traces
    assert [e.tokens for e in t.tokens] == [3, 3, 3]
    assert t.completion_tokens == 9


def test_tpot_is_per_token_when_each_event_carries_several(server):
    """vLLM's --stream-interval 4: 12 tokens in 3 events; TPOT divides by the 11 tokens after the
    first, while the per-event gaps (ITL) stay what the client saw."""
    traces, _ = run(engine=server.base(ttft=0.05, itl=0.02, n=12, per=4), route="chat", requests=1, max_tokens=12)
    (t,) = traces
    rs = request_stats(t)
    assert t.ok and (rs.tokens, rs.events, len(rs.gaps)) == (12, 3, 2)
    assert rs.tpot == pytest.approx((rs.e2e - rs.ttft) / 11)
    assert rs.tpot < 0.5 * rs.median_gap  # about a quarter of the gap between events


def _trace(times: list[float], per_event: int = 1, completion: int | None = None) -> RequestTrace:
    return RequestTrace(index=0, path="direct", t_scheduled=0.0, completion_tokens=completion,
                        tokens=[TokenEvent(t=t, tokens=per_event) for t in times])


@pytest.mark.parametrize("per_event, completion, tokens", [
    (1, 9, 9),  # the usage trailer's count wins over the events
    (3, None, 9),  # no trailer: the per-event counts
    (1, None, 3),  # neither: one token per event
    (1, 2, 3),  # a trailer below the events: each event carried at least one token
])
def test_tpot_token_count_sources(per_event, completion, tokens):
    rs = request_stats(_trace([0.1, 0.2, 0.3], per_event, completion))
    assert rs.tokens == tokens and rs.events == 3
    assert rs.tpot == pytest.approx(0.2 / (tokens - 1))


def test_a_stall_inside_the_stream_is_counted(server):
    traces, _ = run(engine=server.base(itl=0.005, n=20, stall="10:0.3"), route="chat", requests=1)
    rs = request_stats(traces[0])
    assert rs.stalls == 1 and rs.max_gap > 5 * rs.median_gap


def test_a_stall_is_counted_when_bursts_make_the_median_gap_zero(server):
    """A buffering proxy delivers events 4 to a read: most gaps are 0, and so is their median;
    the stall is measured against the gaps between bursts instead."""
    traces, _ = run(engine=server.base(itl=0.01, n=24, burst=4, stall="12:0.3"), route="chat", requests=1)
    rs = request_stats(traces[0])
    assert traces[0].ok and rs.median_gap == 0  # the buffered case
    assert rs.stalls == 1 and rs.max_gap == max(rs.gaps)


@pytest.mark.parametrize("route", ["chat", "responses"])
def test_the_final_event_ends_the_request_when_the_server_holds_the_connection(server, route):
    """[DONE] / response.completed is the end: a server that keeps the body open after it must not
    delay the next closed-loop request, nor stretch the request's end."""
    hold = 2.0
    traces, _ = run(engine=server.base(itl=0.005, n=4, hold=hold), route=route, requests=2)
    first, second = sorted(traces, key=lambda t: t.t_sent)
    assert first.ok and second.ok, (first.error, second.error)
    assert first.t_end - first.t_last_token < 0.5 * hold
    assert second.t_sent - first.t_end < 0.5 * hold
    assert second.connection_reused is False  # the held connection was closed, not waited for


@pytest.mark.parametrize("route", ["chat", "completions"])
def test_a_body_left_unended_after_the_final_event_is_a_complete_answer(server, route):
    """A server or proxy that closes after [DONE] without the last chunk has still answered."""
    traces, (_, errors) = run(engine=server.base(itl=0.005, n=4, unended=1), route=route, requests=2)
    assert errors == [] and all(t.ok and len(t.tokens) == 4 for t in traces), [t.error for t in traces]


def test_a_kept_alive_connection_closed_as_the_next_request_left_is_retried_on_a_new_one(server):
    """llama-server closes its connection after every stream without ``Connection: close``; a
    request sent into that connection before the close arrived is sent again, not a failure."""
    traces, (_, errors) = run(engine=server.base(itl=0.005, n=4, oneshot=1), route="chat", requests=4)
    assert errors == [] and all(t.ok and len(t.tokens) == 4 for t in traces), [t.error for t in traces]
    assert [t.connection_reused for t in traces] == [False] * len(traces)  # each answer came on a new connection


def test_pairs_are_interleaved_counterbalanced_and_never_over_concurrency(server):
    concurrency, requests, warmup = 2, 6, 2
    traces, (evidence, errors) = run(engine=server.base(itl=0.01, n=5), gateway=server.base(itl=0.01, n=5, framing="close"),
                                     route="chat", concurrency=concurrency, requests=requests, warmup=warmup)
    assert errors == [] and all(t.ok for t in traces)
    for path in ("direct", "gateway"):
        mine = [t for t in traces if t.path == path]
        assert len(mine) == requests + warmup and sum(t.warmup for t in mine) == warmup
        edges = sorted([(t.t_sent, 1) for t in mine] + [(t.t_end, -1) for t in mine])
        in_flight = peak = 0
        for _, step in edges:
            in_flight += step
            peak = max(peak, in_flight)
        assert peak <= concurrency
    warm_end = max(t.t_end for t in traces if t.warmup)
    assert all(t.t_sent >= warm_end for t in traces if not t.warmup)
    by_send = sorted(traces, key=lambda t: t.t_sent)
    firsts = [[t.path for t in by_send if t.index == k] for k in range(warmup + requests)]
    assert firsts[0] == ["direct", "gateway"] and firsts[1] == ["gateway", "direct"], firsts  # A B, B A
    assert evidence.shape.model == MODEL and evidence.shape.paths["gateway"].endswith("framing=close")


def test_poisson_latency_counts_from_the_schedule_and_queueing_is_separate(server):
    # arrivals every ~20 ms on average, requests of ~100 ms, one slot: later requests queue
    traces, (evidence, _) = run(engine=server.base(ttft=0.05, itl=0.01, n=5), route="completions",
                                rate=50.0, requests=8, concurrency=1)
    stats = [request_stats(t) for t in sorted(traces, key=lambda t: t.index)]
    scheduled = [t.t_scheduled for t in sorted(traces, key=lambda t: t.index)]
    assert scheduled == sorted(scheduled)
    assert stats[-1].client_queue > stats[0].client_queue
    for t, rs in zip(sorted(traces, key=lambda t: t.index), stats, strict=True):
        # open loop: the wait for a slot stays in TTFT, only the client's own write is taken out
        assert rs.ttft == pytest.approx(t.t_first_token - t.t_scheduled - send_lag(t, False))
        assert rs.ttft >= rs.client_queue
    assert evidence.shape.rate == 50.0


def test_payload_file_is_sent_with_stream_forced(server, tmp_path):
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "stream": False}
    traces, (evidence, _) = run(engine=server.base(itl=0.001), route="chat", payload=body, payload_source="app.json",
                                requests=1)
    assert traces[0].ok and len(traces[0].tokens) == 3
    assert evidence.shape.payload["stream"] is True and evidence.shape.payload_source == "app.json"


def test_a_server_rejecting_vllm_extensions_costs_only_the_warmup(server):
    traces, (evidence, _errors) = run(engine=server.base(itl=0.001, n=3, strict="1"), route="chat", warmup=1, requests=2)
    outcomes = [(t.warmup, t.outcome) for t in sorted(traces, key=lambda t: t.index)]
    assert outcomes == [(True, "http-status"), (False, "ok"), (False, "ok")]
    assert "ignore_eos" not in json.dumps(evidence.shape.payload)


def test_the_self_check_flags_a_blocked_event_loop():
    clock = Clock()

    async def blocked() -> tuple[SelfCheck, float, float]:
        check = SelfCheck(clock)
        task = asyncio.ensure_future(check.sample())
        await asyncio.sleep(0.05)
        start = clock.now()
        time.sleep(0.2)  # what a saturated client does to every stamp
        end = clock.now()
        await asyncio.sleep(0.05)
        task.cancel()
        return check, start, end

    check, start, end = asyncio.run(blocked())
    health = check.health("test")
    assert health.suspect and health.loop_lag_max_ms > 100
    assert any("lag" in r for r in health.reasons)
    # the freeze is kept as an interval on the run's clock, covering most of the blocking call
    assert check.frozen_within(start, end) > 0.5 * (end - start)
    assert any(a <= start + 0.05 and b >= end - 0.05 for a, b in health.freezes), health.freezes


def test_a_client_frozen_mid_stream_is_not_blamed_on_the_server(server, monkeypatch):
    """Two streams of two tokens 1.5 s apart, under a 1 s stall timeout. The client's loop blocks for
    0.8 s in the second stream's first read (as a starved client does, beside a busy CPU engine),
    while the first waits for its next token. When the first times out, the client had been awake
    for only 0.2 s of its wait: no failure of the target, and not counted against it (without the
    freeze it would be a "stall", which is right: the server was silent for the whole timeout).
    The gap the freeze sits in is counted without it (a lower bound)."""
    from doctor.derive.stream_stats import derive_stream_stats
    from doctor.evidence import Bundle
    from doctor.probes.framing import StreamDecoder

    real_feed = StreamDecoder.feed
    decoders: list[object] = []

    def feed(self, data, t):
        if self not in decoders:
            decoders.append(self)
            if len(decoders) == 2:
                time.sleep(0.8)
        return real_feed(self, data, t)

    monkeypatch.setattr(StreamDecoder, "feed", feed)
    traces, (evidence, errors) = run(engine=server.base(ttft=0.02, itl=1.5, n=2), route="completions",
                                     requests=2, concurrency=2, stall_timeout_s=1.0)
    assert sorted(t.outcome for t in traces) == ["client-stall", "ok"], [(t.outcome, t.error) for t in traces]
    (stalled,) = [t for t in traces if t.outcome == "client-stall"]
    assert "froze" in stalled.error
    assert any(b - a > 0.7 for a, b in evidence.client.freezes), evidence.client.freezes
    assert [e.kind for e in errors if e.source == "stream"] == ["client"]
    ps = derive_stream_stats(Bundle(stream=evidence)).paths["direct"]
    assert (ps.n_ok, ps.n_failed, ps.n_void) == (1, 0, 1)
    (ok,) = [rs for rs in ps.requests if rs.outcome == "ok"]
    (answered,) = [t for t in traces if t.ok]
    raw = [b.t - a.t for a, b in itertools.pairwise(answered.tokens)]
    if answered.stamp_clock == "kernel":  # the kernel stamped the tokens as they came: the freeze is in no stamp
        assert ok.client_frozen == 0 and max(ok.gaps) == max(raw) and max(raw) > 0.9 * 1.5
    else:
        assert ok.client_frozen > 0.7 and max(ok.gaps) < max(raw) - 0.7


def test_a_cpu_window_too_short_to_mean_anything_is_not_read():
    """A probe that ends at once (every connection refused) must not report the last busy
    millisecond as a saturated client."""
    check = SelfCheck(Clock())
    deadline = time.perf_counter() + 0.02
    while time.perf_counter() < deadline:  # burn CPU for a window far shorter than the interval
        pass
    health = check.health("test")
    assert health.cpu_percent_max is None
    assert not any("CPU" in r for r in health.reasons)


def test_the_self_check_flags_requests_that_left_the_client_late():
    """TTFT runs from the send: a client slow to write its requests inflates it unseen by the server.
    Only reused connections count, since a new one's connect and TLS time are the network's."""
    def sent(i: int, write_s: float, reused: bool) -> RequestTrace:
        return RequestTrace(path="direct", index=i, t_scheduled=i, t_sent=i, t_request_written=i + write_s,
                            connection_reused=reused)

    quick = [sent(i, 0.0004, True) for i in range(8)] + [sent(8, 0.3, False)]  # a TLS handshake: not the client
    health = SelfCheck(Clock()).health("test", quick)
    assert health.send_p99_ms is not None and health.send_p99_ms < 1 and not health.suspect
    slow = [sent(i, 0.0004 if i % 2 else 0.04, True) for i in range(8)]
    health = SelfCheck(Clock()).health("test", slow)
    assert health.suspect and any("on the wire" in r for r in health.reasons)


def _blocked_check() -> SelfCheck:
    """A self-check whose sampler saw the loop blocked 0.2 s: what a saturated client shows."""
    async def blocked() -> SelfCheck:
        check = SelfCheck(Clock())
        task = asyncio.ensure_future(check.sample())
        await asyncio.sleep(0.05)
        time.sleep(0.2)
        await asyncio.sleep(0.05)
        task.cancel()
        return check

    return asyncio.run(blocked())


def test_under_kernel_stamps_a_saturated_client_stays_suspect_while_its_arrivals_were_late():
    """Open loop (``--rate``), kernel stamps: the loop's lag is in no read's stamp, so alone it is a
    note. But the wait from arrival to send counts in TTFT there (``send_lag`` is only the write), so
    with arrivals sent late it is the client's lag users are said to feel: it stays a reason."""
    def arrival(i: int, sent_after_s: float) -> RequestTrace:
        return RequestTrace(path="direct", index=i, t_scheduled=float(i), t_sent=i + sent_after_s,
                            t_request_left=i + sent_after_s + 0.0002, connection_reused=True, stamp_clock="kernel")

    on_time = [arrival(i, 0.0005) for i in range(8)]
    health = _blocked_check().health("test", on_time, closed_loop=False)
    assert not health.suspect and any("lag" in n for n in health.notes), (health.reasons, health.notes)

    late = [arrival(i, 0.0005 if i % 2 else 0.15) for i in range(8)]
    health = _blocked_check().health("test", late, closed_loop=False)
    assert health.suspect and any("lag" in r for r in health.reasons), (health.reasons, health.notes)
    assert any("4 of 8 arrivals left more than 10 ms after they were due" in r for r in health.reasons)
    # in a closed loop the wait is the client's send lag already (a reason of its own): no double count
    health = _blocked_check().health("test", on_time, closed_loop=True)
    assert not any("arrivals" in r for r in health.reasons)


def test_the_reader_later_than_a_token_gap_is_the_reason_not_the_loop():
    """Kernel stamps are exact only when the socket is read before the next token's segment merges
    into the unread one: with the drain thread, ITS gap against the run's token pace decides, and a
    loop far behind it (the batches it takes) is no reason when the thread kept up."""
    def streamed(i: int) -> RequestTrace:
        req = RequestTrace(path="direct", index=i, t_scheduled=i, t_sent=i, stamp_clock="kernel")
        req.tokens = [TokenEvent(t=i + 0.1 + 0.02 * k) for k in range(10)]  # a token every 20 ms
        return req

    requests = [streamed(i) for i in range(4)]
    kept_up = SelfCheck(Clock())
    kept_up.note_gaps([0.05] * 100, [0.0003] * 100)  # the loop 50 ms late, the reader 0.3 ms
    health = kept_up.health("test", requests)
    assert health.kernel_gap_p99_ms == pytest.approx(50) and health.read_gap_p99_ms == pytest.approx(0.3)
    assert not any("after the kernel" in r for r in health.reasons)
    behind = SelfCheck(Clock())
    behind.note_gaps([0.05] * 100, [0.03] * 100)  # the reader itself 30 ms late: tokens merged
    assert any(r.startswith("the reader read 30.0 ms after the kernel") for r in behind.health("test", requests).reasons)
    loop_only = SelfCheck(Clock())
    loop_only.note_gaps([0.05] * 100)  # no drain thread: the loop read the sockets
    assert any(r.startswith("the loop read 50.0 ms after the kernel") for r in loop_only.health("test", requests).reasons)
