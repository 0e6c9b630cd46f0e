"""The stream reader's framings, the gateway route template, and the reader's bounds.

Framings are fed as reads the way the probe feeds them (bytes and an arrival time); the bounds
are driven by a real server that floods events or never sends a newline.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from doctor.foundation.clock import Clock
from doctor.lab.loop_server import LoopServer
from doctor.probes import stream as stream_probe
from doctor.probes.framing import StreamDecoder, detect, estimate_tokens
from doctor.probes.gateway_route import parse_route
from doctor.probes.plan import CollectConfig
from doctor.probes.sse import SseParser, TooLong
from doctor.probes.stream import request as stream_request
from tests.support.sse_server import _Events


def decode(content_type: str, reads: list[bytes], **kw) -> tuple[str | None, list[tuple[float, str, str]]]:
    """Feed ``reads`` (read k at time k), then end the body: (framing, [(t, kind, text)])."""
    decoder = StreamDecoder(content_type, **kw)
    items = []
    for k, data in enumerate(reads):
        items += decoder.feed(data, float(k))
    items += decoder.close()
    return decoder.framing, [(t, c.kind, c.text) for t, c in items]


def test_raw_text_chunks_are_one_event_per_read_with_estimated_tokens():
    framing, items = decode("text/event-stream", [b" useful", b" useful thing", b"!"])
    assert framing == "raw"
    assert items == [(0.0, "token", " useful"), (1.0, "token", " useful thing"), (2.0, "token", "!")]
    assert [estimate_tokens(text) for _, _, text in items] == [1, 3, 1]


def test_a_raw_read_that_starts_like_a_field_name_waits_for_the_next_read_and_keeps_its_time():
    framing, items = decode("text/event-stream", [b"da", b"ta points"])
    assert framing == "raw" and items == [(0.0, "token", "data points")]


def test_raw_text_split_inside_a_multibyte_character():
    euro = "€".encode()
    framing, items = decode("text/plain", [b"x" + euro[:1], euro[1:] + b"y"])
    assert framing == "raw" and "".join(text for _, _, text in items) == "x€y"


@pytest.mark.parametrize("reads, framing, texts", [
    ([b"data: hi\n\n", b"data: there\n\n"], "sse-text", ["hi", "there"]),
    ([b"event: token\ndata: hi\n\n", b"event: token\ndata: {\"text\": \"yo\"}\n\nevent: done\ndata: \n\n"], "sse-events", ["hi", "yo"]),
    ([b'data: {"choices":[{"delta":{"content":"x"}}]}\n\n', b"data: [DONE]\n\n"], "openai-sse", ["x"]),
])
def test_sse_flavours_are_told_apart_at_the_first_event(reads, framing, texts):
    got, items = decode("text/event-stream", reads)
    assert got == framing
    assert [text for _, kind, text in items if kind == "token"] == texts


def test_named_events_that_are_not_text_are_not_tokens():
    _, items = decode("text/event-stream", [b"event: token\ndata: a\n\nevent: ping\ndata: 1\n\nevent: error\ndata: boom\n\n"])
    assert [kind for _, kind, _ in items] == ["token", "other", "error"]


def test_sse_text_without_a_blank_line_at_the_clean_end_is_kept():
    _, items = decode("text/event-stream", [b"data: a\n\ndata: b"])
    assert [text for _, _, text in items] == ["a", "b"]


def test_ndjson_finds_the_text_field_and_the_end():
    reads = [b'{"response":"a","done":false}\n{"resp', b'onse":"b","done":true,"eval_count":2}\n']
    framing, items = decode("application/x-ndjson", reads)
    assert framing == "ndjson"
    assert items == [(0.0, "token", "a"), (0.0, "token", "b"), (0.0, "end", "")]  # "b" began in read 0


def test_text_field_names_a_nested_field():
    framing, items = decode("application/x-ndjson", [b'{"out": {"piece": "p"}, "text": "not this"}\n'], text_field="out.piece")
    assert framing == "ndjson" and items == [(0.0, "token", "p")]


def test_framing_can_be_forced():
    framing, items = decode("text/event-stream", [b"data: x\n\n"], forced="raw")
    assert framing == "raw" and items == [(0.0, "token", "data: x\n\n")]


def test_detection_reads_the_content_type_and_the_first_bytes():
    assert detect("application/x-ndjson", b"") == "ndjson"
    assert detect("application/octet-stream", b'{"a": 1}') == "ndjson"
    assert detect("text/event-stream", b'{"a": 1}') == "raw"  # the playbook's edge labels raw text as SSE
    assert detect("text/event-stream", b": ping\n\n") == "sse"
    assert detect("text/event-stream", b"d") is None and detect("text/event-stream", b"d", final=True) == "raw"


def test_gateway_route_fills_the_placeholders_where_they_stand():
    route = parse_route("POST /chat?prompt={prompt}&n={max_tokens}")
    url = route.url("http://edge:8000/app", 'a b&c "d"', 16)
    parts = urlsplit(url)
    assert parts.path == "/app/chat" and parse_qs(parts.query) == {"prompt": ['a b&c "d"'], "n": ["16"]}
    assert route.content("x", 1) == (None, None)
    body_route = parse_route("PUT /gen", '{"input": "{prompt}", "max_new_tokens": {max_tokens}}')
    body, ctype = body_route.content('say "hi"\n', 8)
    assert ctype == "application/json" and json.loads(body) == {"input": 'say "hi"\n', "max_new_tokens": 8}
    raw, ctype = parse_route("/gen", "{prompt}").content("plain text", 8)
    assert (raw, ctype, parse_route("/gen", "{prompt}").method) == (b"plain text", "text/plain; charset=utf-8", "POST")


@pytest.mark.parametrize("spec, body, message", [
    ("FETCH /x?p={prompt}", None, "method"),
    ("POST chat", None, "starting with '/'"),
    ("POST /chat", None, "{prompt}"),
    ("GET /chat?p={prompt}", "{prompt}", "GET"),
    ("POST /chat", '{"p": {prompt}}', "not once its placeholders"),
])
def test_a_bad_gateway_route_says_what_is_wrong(spec, body, message):
    with pytest.raises(ValueError, match="gateway") as info:
        parse_route(spec, body)
    assert message in str(info.value)


def test_a_line_without_newline_is_capped_and_kept_in_one_growing_buffer():
    parser = SseParser(max_line_bytes=1 << 20)
    for _ in range(15):
        parser.feed(b"x" * 65536, 0.0)
    assert parser.pending and parser._scan == 15 * 65536  # searched once: each read scans only its new bytes
    with pytest.raises(TooLong, match="without a newline"):
        parser.feed(b"x" * 65536 * 2, 0.0)
    with pytest.raises(TooLong, match="an event of more than"):
        SseParser(max_line_bytes=1000).feed(b"data: x\n" * 200, 0.0)


class _Hostile(LoopServer):
    """An HTTP server on 127.0.0.1 that answers every request with 200 and ``chunks`` ``repeat`` times, chunked."""

    def __init__(self, chunks: list[bytes], repeat: int) -> None:
        super().__init__(name="framing-flood")
        self.chunks, self.repeat = chunks, repeat

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")), 0)
        await reader.readexactly(length)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
        for _ in range(self.repeat):
            for chunk in self.chunks:
                writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()


def probe(url: str) -> tuple[list, list]:
    config = CollectConfig(engine=url, model="m", requests=1, warmup=0, deadline_s=60)
    evidence, errors = stream_probe.run_stream_probe(config, Clock(), lambda _msg: None, discover_model=False)
    return evidence.requests, errors


def test_an_event_flood_is_cut_at_the_cap_and_says_so(monkeypatch):
    monkeypatch.setattr(stream_request, "MAX_EVENTS", 2000)
    event = b'data: {"choices":[{"delta":{"content":"x"}}]}\n\n'
    with _Hostile([event * 64], repeat=200) as server:  # 12,800 events
        (trace,), errors = probe(server.url)
    assert trace.ok and trace.truncated and "2000 events" in trace.truncated
    assert 2000 <= len(trace.tokens) < 12_800
    assert any("truncated" in e.message for e in errors)


def test_a_flood_over_many_concurrent_requests_ends_at_the_probe_wide_cap(monkeypatch):
    """Each request stays under its own cap, yet together they would keep 20 x 2,000 events: the
    probe stops reading and sending at its own cap, and says so."""
    monkeypatch.setattr(stream_request, "MAX_EVENTS", 2000)
    monkeypatch.setattr(stream_request, "MAX_PROBE_EVENTS", 5000)
    event = b'data: {"choices":[{"delta":{"content":"x"}}]}\n\n'
    with _Hostile([event * 64], repeat=200) as server:  # 12,800 events per request
        config = CollectConfig(engine=server.url, model="m", requests=20, warmup=0, concurrency=4, deadline_s=60)
        evidence, errors = stream_probe.run_stream_probe(config, Clock(), lambda _msg: None, discover_model=False)
    kept = sum(len(t.tokens) + len(t.reads) for t in evidence.requests)
    assert kept < 5000 + 4 * 2 * 64 * 200 // 10  # the cap, and at most one read more per request in flight
    assert len(evidence.requests) < 20
    assert "over all requests" in (evidence.shape.stopped or "")
    assert any("truncated" in e.message and "over all requests" in e.message for e in errors)


def test_a_stream_without_newline_fails_at_the_line_cap(monkeypatch):
    with _Hostile([b"data: " + b"x" * 65536], repeat=40) as server:  # 2.5 MiB, no newline
        (trace,), errors = probe(server.url)
    assert trace.outcome == "stream-error" and "without a newline" in trace.error
    assert sum(r.nbytes for r in trace.reads) < 40 * 65536  # it stopped reading at the cap
    assert errors and errors[0].kind == "malformed"


def test_estimated_token_counts_take_the_runs_own_characters_per_token():
    from doctor.evidence import ReadRecord, RequestTrace, TokenEvent

    direct = RequestTrace(index=0, path="direct", tokens=[TokenEvent(t=1.0, tokens=1, chars=7)] * 8)
    raw = RequestTrace(index=0, path="gateway", tokens_estimated=True,
                       tokens=[TokenEvent(t=2.0, tokens=estimate_tokens("x" * 56), chars=56)],
                       reads=[ReadRecord(t=2.0, nbytes=56, events=estimate_tokens("x" * 56))])
    stream_probe.calibrate_estimates([direct, raw])
    assert raw.tokens[0].tokens == raw.reads[0].events == 8  # 56 characters at the direct path's 7 per token


def _recorded_streams() -> dict[str, bytes]:
    """The real vLLM streams of ``fixtures/sse`` and the bench server's chat stream with vLLM's
    continuous usage stats (every chunk carries the running counts, as the probe asks for)."""
    streams = {p.stem: p.read_bytes() for p in sorted((Path(__file__).resolve().parents[2] / "fixtures" / "sse").glob("*.sse"))}
    events = _Events("chat", 20, noevent=False, usage=True, continuous=True)
    streams["continuous-usage"] = b"".join([b for _, b in events.before()] + [events.token(k, k == 19, k + 1, 1) for k in range(20)]
                                           + events.after())
    return streams


@pytest.mark.parametrize("name", sorted(_recorded_streams()))
def test_one_event_per_read_decodes_as_any_other_split_of_the_same_bytes(name):
    """A read that is exactly one event takes the parser's and the decoder's short ways (issue 25:
    the common read at one token per write); byte-sized reads and the whole stream in one read take
    the buffered way. Every chunk, count and stamp must come out the same."""
    raw = _recorded_streams()[name]
    per_event = [e + b"\n\n" for e in raw.split(b"\n\n") if e]
    assert b"".join(per_event) == raw
    starts = [sum(map(len, per_event[:k])) for k in range(len(per_event))]

    def chunks(reads: list[bytes]) -> tuple[str | None, list[tuple[float, object]]]:
        decoder = StreamDecoder("text/event-stream")
        items = [item for k, data in enumerate(reads) for item in decoder.feed(data, float(k))]
        return decoder.framing, items + decoder.close()

    framing, by_event = chunks(per_event)
    assert framing == "openai-sse" and len(by_event) == len(per_event)  # one chunk per event
    size = 7
    _, by_bytes = chunks([raw[i:i + size] for i in range(0, len(raw), size)])
    _, whole = chunks([raw])
    assert [c for _, c in by_event] == [c for _, c in by_bytes] == [c for _, c in whole]
    # stamps: each event at its own read; at the read carrying its first byte; all at the one read
    assert [t for t, _ in by_event] == [float(k) for k in range(len(per_event))]
    assert [t for t, _ in by_bytes] == [float(start // size) for start in starts]
    assert {t for t, _ in whole} == {0.0}
