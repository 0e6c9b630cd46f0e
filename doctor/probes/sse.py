"""Incremental Server-Sent Events parsing, stamped at the arrival of each event's first byte.

Why hand-written and not ``httpx-sse``: a timing probe needs the moment the FIRST byte of an
event arrived, not the moment its last byte was parsed. A proxy that buffers delivers fifteen
events in one read, and a parser that stamps each event when it completes would still show
fifteen distinct times for events that reached the client in the same instant, or the same time
for events whose first bytes arrived seconds apart. ``SseParser.feed`` therefore takes the read
time along with the bytes, and each event keeps the time of the read that carried its first
byte.

``classify`` then says what an event means for latency: a token, the usage trailer, the end of
the stream, an error, or nothing (preamble, role-only chunk, keep-alive). It decides by the
payload's shape, not by the route it was sent to, so a proxy that rewrites routes, or one that
drops the ``event:`` lines of the Responses API, does not change the verdict.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from doctor.foundation.wire import MAX_NUMBER, WireError, loads, number


class InvalidUtf8(ValueError):
    """A line of the stream is not UTF-8 (the event stream format requires it)."""


class TooLong(ValueError):
    """A line or an event of the stream exceeds the reader's cap (``MAX_LINE_BYTES``).

    A stream that never sends a newline would otherwise be held in memory whole: the cap keeps
    a hostile or broken server from costing the run its memory.
    """


#: The longest line (and the largest event) the reader holds while it waits for its end. A real
#: token event is a few hundred bytes; a tool-call delta or a usage trailer a few KiB.
MAX_LINE_BYTES = 1 << 20


@dataclass(slots=True)  # one per event: slots make it cheaper to build
class SseEvent:
    """One dispatched event: ``t`` is the arrival time of its first byte."""

    t: float
    data: str
    event: str | None = None


class SseParser:
    """Feed it reads as they arrive; it returns the events each read completed.

    Follows the WHATWG event-stream rules that matter here: ``\\n`` or ``\\r\\n`` line ends,
    ``:`` comment lines (keep-alives), ``event:`` and multi-line ``data:`` fields, a blank line
    dispatches, an event without data is dropped. A lone ``\\r`` line end (allowed by the spec,
    sent by no OpenAI-compatible server) is not supported.

    Linear in the bytes fed: the unfinished line is kept in one ``bytearray`` that grows in
    place, only the new bytes are searched for a newline, and the consumed prefix is dropped once
    per read (a copy of at most that read's tail). Bounded: a line or an event longer than
    ``max_line_bytes`` raises ``TooLong``.
    """

    def __init__(self, max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self.max_line_bytes = max_line_bytes
        self._buf = bytearray()
        self._scan = 0  # bytes of _buf already searched for a newline
        self._buf_t = 0.0  # arrival time of the first byte still in _buf
        self._event_t: float | None = None  # first byte of the event being assembled
        self._event: str | None = None
        self._data: list[str] = []
        self._event_bytes = 0
        self.comments = 0  # keep-alive / comment lines seen

    @property
    def pending(self) -> bool:
        """True when bytes of an unfinished event are held (the stream was cut inside one)."""
        return bool(self._buf.strip()) or self._event_t is not None

    def feed(self, data: bytes, t: float) -> list[SseEvent]:
        """The events completed by one read ``data`` that arrived at ``t``, each stamped with its first byte's arrival.

        Stamping at the first byte (not at the completing read) keeps an event that a buffering
        proxy split across reads at the time it started to arrive.
        """
        if not data:
            return []
        buf = self._buf
        old = len(buf)
        if (not old and self._event_t is None and data.startswith(b"data: ") and data.endswith(b"\n\n")
                and data.find(b"\n") == len(data) - 2 and data[-3] != 13):  # 13 = "\r"
            # the commonest read of all: exactly one one-line "data: ..." event and its blank line,
            # taken without the buffer (what the loop below would do with it, byte for byte)
            return [SseEvent(t, decode_utf8(data[6:-2]))]
        if not old:
            self._buf_t = t
        buf += data
        events: list[SseEvent] = []
        start = 0
        pos = self._scan
        while True:
            end = buf.find(b"\n", pos)
            if end < 0:
                break
            line_t = self._buf_t if start < old else t
            if (self._event_t is None and buf.startswith(b"data: ", start) and buf.startswith(b"\n", end + 1)
                    and buf[end - 1] != 13):  # 13 = "\r"
                # fast path, the common case: a one-line "data: ..." event and its blank line
                events.append(SseEvent(t=line_t, data=decode_utf8(buf[start + 6:end])))
                start = pos = end + 2
                continue
            self._line(bytes(buf[start:end]), line_t, events)
            start = pos = end + 1
        if start:
            del buf[:start]
            if buf and start >= old:
                self._buf_t = t
        self._scan = len(buf)
        if len(buf) > self.max_line_bytes:
            raise TooLong(f"a line of more than {self.max_line_bytes} bytes without a newline in the event stream")
        return events

    def flush(self) -> list[SseEvent]:
        """At a clean end of the body: the event still being assembled, as if a blank line had ended it.

        For framings without a terminator, whose last event may lack its blank line; an
        unfinished last line is kept as a field too.
        """
        events: list[SseEvent] = []
        if self._buf.strip():
            self._line(bytes(self._buf), self._buf_t, events)
        self._buf.clear()
        self._scan = 0
        self._line(b"", self._buf_t, events)
        return events

    def _line(self, raw: bytes, t: float, events: list[SseEvent]) -> None:
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        if not raw:
            if self._data:
                events.append(SseEvent(t=self._event_t if self._event_t is not None else t,
                                       data="\n".join(self._data), event=self._event))
            self._event_t, self._event, self._data, self._event_bytes = None, None, [], 0
            return
        line = decode_utf8(raw)
        if line.startswith(":"):
            self.comments += 1
            return
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if self._event_t is None:
            self._event_t = t
        if name == "data":
            self._event_bytes += len(raw)
            if self._event_bytes > self.max_line_bytes:
                raise TooLong(f"an event of more than {self.max_line_bytes} bytes in the event stream")
            self._data.append(value)
        elif name == "event":
            self._event = value
        # id: and retry: do not matter for timing


def decode_utf8(raw: bytes | bytearray) -> str:
    """``raw`` as UTF-8, or ``InvalidUtf8`` naming where it broke (the stream formats require UTF-8)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidUtf8(f"invalid UTF-8 in the event stream at byte {exc.start} of a line") from None


#: Responses API event types that carry no generated text even though they end in ".delta".
_NON_TOKEN_DELTAS = frozenset({"response.output_text.annotation.added"})


@dataclass(slots=True)  # one per event: slots make it cheaper to build
class Chunk:
    """What one event means for latency.

    ``kind``: ``token`` (carries generated text, reasoning or a tool-call delta), ``usage``
    (the usage trailer), ``end`` (``[DONE]`` or a terminal Responses event), ``error``, or
    ``other`` (preamble, role-only chunk, empty delta, ``*.done`` repeats).
    """

    kind: str
    text: str = ""
    tokens: int = 1
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None
    error: str | None = None


def classify(event: SseEvent) -> Chunk:
    """Decide what an event means; a payload that is not JSON is an ``error`` chunk."""
    if event.data.strip() == "[DONE]":
        return Chunk("end")
    try:
        obj = loads(event.data)
    except WireError as exc:
        return Chunk("error", error=f"an event whose data is {exc}: {event.data[:120]!r}")
    if not isinstance(obj, dict):
        return Chunk("error", error=f"an event whose data is not a JSON object: {event.data[:120]!r}")
    kind = obj.get("type") or event.event
    if isinstance(kind, str) and (kind.startswith("response.") or kind == "error"):
        return _responses_chunk(kind, obj)
    return choices_chunk(obj)


def _error_text(obj: dict[str, Any]) -> str | None:
    """vLLM reports a failure inside a 200 stream as ``{"error": {...}}`` or ``{"object": "error"}``."""
    err = obj.get("error")
    if isinstance(err, dict):
        return str(err.get("message") or err.get("type") or err)
    if err:
        return str(err)
    if obj.get("object") == "error":
        return str(obj.get("message") or obj)
    return None


def _count(value: Any) -> int | None:
    """A token count the server claims: a non-negative int (JSON ``true`` is a Python int, not a
    count), bounded like every number from outside (``10**400`` tokens is no count)."""
    if type(value) is int:  # what JSON gives: ``number``'s checks reduce to the range (issue 25: per event)
        return value if 0 <= value <= MAX_NUMBER else None
    count = number(value, int) if isinstance(value, int) else None
    return count if count is not None and count >= 0 else None


def _reason(value: Any) -> str | None:
    """A finish reason: only a non-empty string is one (a server may send a number or an object)."""
    return value if isinstance(value, str) and value else None


def _usage(chunk: Chunk, usage: Any, prompt_key: str, completion_key: str) -> None:
    if isinstance(usage, dict):
        chunk.prompt_tokens = _count(usage.get(prompt_key))
        chunk.completion_tokens = _count(usage.get(completion_key))


def choices_chunk(obj: dict[str, Any]) -> Chunk:
    """``/v1/completions`` (``choices[].text``) and ``/v1/chat/completions`` (``choices[].delta``)."""
    if "error" in obj or obj.get("object") == "error":  # looked at only where it may say one (per event)
        error = _error_text(obj)
        if error is not None:
            return Chunk("error", error=error)
    choices = obj.get("choices")
    if choices is not None and not isinstance(choices, list):
        return Chunk("error", error=f"an event whose choices are {type(choices).__name__}, not a list")
    texts: list[str] = []
    finish = None
    for choice in choices or ():
        if not isinstance(choice, dict):
            continue
        finish = _reason(choice.get("finish_reason")) or finish
        text = choice.get("text")
        if isinstance(text, str) and text:
            texts.append(text)
        delta = choice.get("delta")
        if isinstance(delta, dict):
            for key in ("content", "reasoning_content", "reasoning"):
                value = delta.get(key)
                if isinstance(value, str) and value:
                    texts.append(value)
            if delta.get("tool_calls"):
                texts.append(json.dumps(delta["tool_calls"])[:200])
    chunk = Chunk("token" if texts else "other", text="".join(texts), finish_reason=finish)
    if obj.get("usage"):
        _usage(chunk, obj["usage"], "prompt_tokens", "completion_tokens")
        if not texts and not obj.get("choices"):
            chunk.kind = "usage"
    return chunk


def _responses_chunk(kind: str, obj: dict[str, Any]) -> Chunk:
    """``/v1/responses``: only non-empty ``*.delta`` events are tokens; ``*.done`` repeats them."""
    found = obj.get("response")
    resp: dict[str, Any] = found if isinstance(found, dict) else {}
    if kind in ("error", "response.failed"):
        return Chunk("error", error=_error_text(resp) or str(obj.get("message") or _error_text(obj) or kind))
    if kind in ("response.completed", "response.incomplete"):
        chunk = Chunk("end", finish_reason=_reason(resp.get("status")) or kind.rsplit(".", 1)[1])
        _usage(chunk, resp.get("usage"), "input_tokens", "output_tokens")
        return chunk
    delta = obj.get("delta")
    if kind.endswith(".delta") and kind not in _NON_TOKEN_DELTAS and isinstance(delta, str) and delta:
        return Chunk("token", text=delta)
    return Chunk("other")
