"""The SSE parser and classifier on real vLLM streams and on the framings that trap clients."""

from __future__ import annotations

from pathlib import Path

import pytest

from doctor.probes.sse import InvalidUtf8, SseParser, classify

SSE = Path(__file__).resolve().parents[2] / "fixtures" / "sse"


def parse(data: bytes, sizes: list[int] | None = None) -> list:
    """Feed ``data`` in reads of ``sizes`` (the rest in one read), read k at time k."""
    parser, events, pos = SseParser(), [], 0
    for k, size in enumerate(sizes or []):
        events += parser.feed(data[pos:pos + size], float(k))
        pos += size
    events += parser.feed(data[pos:], float(len(sizes or [])))
    return events


def kinds(data: bytes) -> list[str]:
    return [classify(e).kind for e in parse(data)]


def test_chat_role_chunk_and_usage_trailer_are_not_tokens():
    raw = (SSE / "chat.sse").read_bytes()
    chunks = [classify(e) for e in parse(raw)]
    assert chunks[0].kind == "other"  # {"role": "assistant", "content": ""}
    assert chunks[1].kind == "token" and chunks[1].text == " useful"
    assert [c.kind for c in chunks[-2:]] == ["usage", "end"]
    assert chunks[-2].completion_tokens == 24
    assert sum(c.kind == "token" for c in chunks) == 24  # matches the trailer's completion_tokens


def test_completions_stream_counts_every_text_chunk():
    chunks = [classify(e) for e in parse((SSE / "completions.sse").read_bytes())]
    assert sum(c.kind == "token" for c in chunks) == 24
    assert chunks[-2].kind == "usage" and chunks[-2].prompt_tokens == 16
    assert any(c.finish_reason == "length" for c in chunks)


def test_responses_preamble_is_not_a_token_and_deltas_are():
    chunks = [classify(e) for e in parse((SSE / "responses.sse").read_bytes())]
    assert [c.kind for c in chunks[:4]] == ["other"] * 4  # created, in_progress, *.added
    assert chunks[4].kind == "token"
    assert chunks[5].text == " useful useful useful useful"  # one event can carry several tokens


def test_responses_without_event_lines_parse_from_the_json_type():
    raw = (SSE / "responses.sse").read_bytes()
    stripped = b"\n".join(line for line in raw.split(b"\n") if not line.startswith(b"event:"))
    assert kinds(stripped) == kinds(raw)


def test_responses_done_events_and_completed():
    raw = (
        b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","delta":"a"}\n\n'
        b'event: response.output_text.done\ndata: {"type":"response.output_text.done","text":"a"}\n\n'
        b'data: {"type":"response.completed","response":{"status":"completed","usage":{"input_tokens":3,"output_tokens":1}}}\n\n'
    )
    chunks = [classify(e) for e in parse(raw)]
    assert [c.kind for c in chunks] == ["token", "other", "end"]
    assert chunks[2].completion_tokens == 1 and chunks[2].prompt_tokens == 3


@pytest.mark.parametrize("data", [
    b'data: {"error": {"object": "error", "message": "too long", "type": "BadRequestError", "code": 400}}\n\n',
    b'data: {"object": "error", "message": "too long"}\n\n',
    b'event: error\ndata: {"type": "error", "message": "boom"}\n\n',
    b'data: {"type": "response.failed", "response": {"error": {"message": "boom"}}}\n\n',
    b"data: not json\n\n",
    b'data:{"choices":6}\n\n',  # issue 22 item 11: a TypeError, recorded as a crash type, not a malformed event
    b'data:{"choices":true}\n\n',
])
def test_errors_inside_a_200_stream(data):
    assert kinds(data) == ["error"]


def test_choices_that_are_not_a_list_say_so_and_a_count_past_any_real_one_is_none():
    [event] = parse(b'data:{"choices":6}\n\n')
    assert classify(event).error == "an event whose choices are int, not a list"
    [event] = parse(b'data: {"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":1' + b"0" * 400 + b"}}\n\n")
    chunk = classify(event)
    assert (chunk.kind, chunk.prompt_tokens, chunk.completion_tokens) == ("usage", 7, None)


def test_reasoning_and_tool_call_deltas_are_tokens_and_empty_deltas_are_not():
    raw = (
        b'data: {"choices":[{"delta":{"reasoning_content":"hm"}}]}\n\n'
        b'data: {"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{"}}]}}]}\n\n'
        b'data: {"choices":[{"delta":{}}]}\n\n'
        b'data: {"choices":[{"delta":{"content":""},"finish_reason":"stop"}]}\n\n'
    )
    assert kinds(raw) == ["token", "token", "other", "other"]


def test_event_is_stamped_at_the_read_carrying_its_first_byte():
    one = b'data: {"choices":[{"text":"a"}]}\n\n'
    # read 0 holds the first 5 bytes of event 1; read 1 completes it and holds all of event 2;
    # read 2 holds the first byte of event 3, read 3 the rest
    data = one * 3
    events = parse(data, [5, len(one) * 2 - 5, 1])
    assert [e.t for e in events] == [0.0, 1.0, 2.0]


def test_many_events_in_one_read_share_its_time():
    events = parse((SSE / "completions.sse").read_bytes())
    assert len(events) == 26 and {e.t for e in events} == {0.0}


def test_keepalive_comments_crlf_and_multiline_data():
    parser = SseParser()
    events = parser.feed(b": ping\r\n\r\ndata: {\"choices\":\r\ndata: [{\"text\":\"x\"}]}\r\n\r\n", 0.0)
    assert parser.comments == 1 and len(events) == 1
    assert classify(events[0]).text == "x"


def test_invalid_utf8_raises_and_a_cut_event_is_pending():
    with pytest.raises(InvalidUtf8):
        SseParser().feed(b'data: {"choices":[{"text":"\xff"}]}\n\n', 0.0)
    parser = SseParser()
    parser.feed(b'data: {"choices":[{"te', 0.0)
    assert parser.pending
