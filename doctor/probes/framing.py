"""Stream framings: what the bytes of a streamed answer are, and what each piece means for latency.

vLLM speaks OpenAI SSE, but the application's own edge often does not: the vLLM playbook's
FastAPI wrapper writes the raw text deltas one write per token (no ``data:``, no JSON, no
``[DONE]``), others send SSE whose ``data:`` is plain text, SSE with named events
(``event: token``), or NDJSON (one JSON object per line, Ollama- or TGI-like). The probe must
time all of them the same way, so ``StreamDecoder`` detects the framing from the content type
and the first bytes (or takes the one ``--framing`` forces) and turns each read into
``sse.Chunk`` items stamped at the arrival of their first byte.

Without per-token framing (``raw``), a read's new text is one event: TTFT, gaps and bursts still
come from the reads, and the tokens it carried are estimated from its length
(``estimate_tokens``), which the report labels "estimated". A framing without a terminator is
complete when the body ends cleanly; only OpenAI SSE, whose server always ends with ``[DONE]``
or ``response.completed``, is cut without one.
"""

from __future__ import annotations

import codecs
import json
from typing import Any

from doctor.evidence.stream import FRAMINGS
from doctor.probes.sse import MAX_LINE_BYTES, Chunk, InvalidUtf8, SseEvent, SseParser, TooLong, choices_chunk, classify, decode_utf8

#: Framings whose token counts are estimated from text length, not counted per event.
ESTIMATED = frozenset({"raw"})

#: English BPE text averages about four characters per token; a read of one short word is one.
CHARS_PER_TOKEN = 4

#: Where NDJSON and named-event JSON objects keep their text, tried in order (dotted paths).
TEXT_FIELDS = ("token.text", "message.content", "delta.content", "delta.text", "text", "content", "delta", "token",
               "response", "output_text", "output")

#: Event names (SSE ``event:``) that end the stream, and those that report a failure.
END_EVENTS = frozenset({"done", "end", "complete", "completed", "stop", "finish", "finished", "close"})
ERROR_EVENTS = frozenset({"error", "failed", "failure"})
#: Event names whose data is generated text; other names (``ping``, ``metadata``) are not tokens.
TOKEN_EVENTS = frozenset({"token", "tokens", "delta", "text", "content", "chunk", "message", "completion", "output"})

_SSE_PREFIXES = (b"data:", b"event:", b"id:", b"retry:", b":")
#: Bytes looked at before the framing is decided even without a complete SSE field name.
_DETECT_BYTES = 16


def estimate_tokens(text: str) -> int:
    """Tokens a piece of text holds, estimated from its length (at least one)."""
    return max(1, len(text) // CHARS_PER_TOKEN)


def detect(content_type: str, head: bytes, final: bool = False) -> str | None:
    """The framing the first bytes ``head`` show, or None while more bytes are needed.

    SSE for an event-stream field at the start; NDJSON for an ``ndjson``/``jsonl`` content type,
    or a JSON object that is not sent as ``text/event-stream``; raw text otherwise (the
    playbook's edge sends raw text as ``text/event-stream``). Which SSE (OpenAI JSON, plain text,
    named events) is decided at the first event.
    """
    ctype = content_type.lower()
    if "ndjson" in ctype or "jsonl" in ctype or "json-seq" in ctype:
        return "ndjson"
    start = head.lstrip(b"\r\n")
    if not start:
        return "raw" if final else None
    for prefix in _SSE_PREFIXES:
        if start.startswith(prefix):
            return "sse"
        if prefix.startswith(start) and not final and len(head) < _DETECT_BYTES:
            return None  # "da" may still become "data:"
    if start.lstrip()[:1] == b"{" and "event-stream" not in ctype:
        return "ndjson"
    return "raw"


def text_at(obj: Any, path: str) -> str | None:
    """The string at a dotted ``path`` in ``obj`` (list indices allowed: ``choices.0.text``), or None."""
    for key in path.split("."):
        if isinstance(obj, dict):
            obj = obj.get(key)
        elif isinstance(obj, list) and key.isdigit() and int(key) < len(obj):
            obj = obj[int(key)]
        else:
            return None
    return obj if isinstance(obj, str) else None


def _json_object(data: str) -> dict[str, Any] | None:
    try:
        obj = json.loads(data)
    except (ValueError, RecursionError):
        return None
    return obj if isinstance(obj, dict) else None


def _openai_shaped(obj: dict[str, Any], event: str | None) -> bool:
    kind = obj.get("type") or event
    return ("choices" in obj or "object" in obj or "error" in obj
            or (isinstance(kind, str) and (kind.startswith("response.") or kind == "error")))


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


class StreamDecoder:
    """Turns the reads of one response body into ``(time, Chunk)`` items; the framing is detected on the way.

    ``framing`` is None until the first bytes decide it (``sse`` until the first event says
    which SSE). ``forced``: a name of ``FRAMINGS`` (``--framing``); ``text_field``: the dotted
    path of the text in NDJSON or named-event JSON (``--text-field``), else ``TEXT_FIELDS`` are
    tried. Bounded like ``SseParser``: a line over ``max_line_bytes`` raises ``TooLong``.
    """

    def __init__(self, content_type: str = "", forced: str | None = None, text_field: str | None = None,
                 max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self.content_type = content_type
        self.framing: str | None = forced
        self.forced = forced is not None
        self.text_field = text_field
        self.max_line_bytes = max_line_bytes
        self._head = bytearray()
        self._head_t = 0.0
        self._sse: SseParser | None = None
        self._lines: SseParser | None = None  # NDJSON lines reuse the SSE parser's linear line splitter
        self._utf8 = codecs.getincrementaldecoder("utf-8")()
        self._utf8_seen = 0
        if forced is not None:
            self._start(forced)

    @property
    def estimated(self) -> bool:
        """True when token counts are estimated from text length (no per-token framing)."""
        return self.framing in ESTIMATED

    @property
    def needs_terminator(self) -> bool:
        """Only OpenAI SSE always ends with a final event; other framings end with the body."""
        return self.framing in ("openai-sse", "sse", None)

    @property
    def pending(self) -> bool:
        """Bytes of an unfinished event are held (a cut inside it, for a framing with a terminator)."""
        return self._sse is not None and self._sse.pending

    def feed(self, data: bytes, t: float) -> list[tuple[float, Chunk]]:
        """The items one read completed, each stamped with its first byte's arrival."""
        if not data:
            return []
        if self.framing is None:
            if not self._head:
                self._head_t = t
            self._head += data
            framing = detect(self.content_type, bytes(self._head))
            if framing is None:
                return []
            self._start(framing)
            data, t = bytes(self._head), self._head_t
            self._head.clear()
        return self._decode(data, t)

    def close(self) -> list[tuple[float, Chunk]]:
        """At the clean end of the body: what the last bytes held (an event without its blank line, a last line)."""
        items: list[tuple[float, Chunk]] = []
        if self.framing is None and self._head:
            self._start(detect(self.content_type, bytes(self._head), final=True) or "raw")
            items = self._decode(bytes(self._head), self._head_t)
            self._head.clear()
        if self._sse is not None and self.framing != "openai-sse":  # OpenAI SSE cut inside an event stays cut
            items += [(ev.t, c) for ev in self._sse.flush() for c in self._sse_chunks(ev)]
        elif self._lines is not None:
            items += [(ev.t, c) for ev in self._lines.flush() for c in self._line_chunks(ev.data)]
        elif self.framing == "raw":
            try:
                tail = self._utf8.decode(b"", final=True)
            except UnicodeDecodeError:
                raise InvalidUtf8("invalid UTF-8 at the end of the text stream") from None
            if tail:
                items.append((self._head_t, Chunk("token", text=tail, tokens=estimate_tokens(tail))))
        return items

    # -- per framing -----------------------------------------------------------------------

    def _start(self, framing: str) -> None:
        self.framing = framing
        if framing in ("sse", "openai-sse", "sse-text", "sse-events"):
            self._sse = SseParser(self.max_line_bytes)
        elif framing == "ndjson":
            self._lines = _LineSplitter(self.max_line_bytes)

    def _decode(self, data: bytes, t: float) -> list[tuple[float, Chunk]]:
        if self._sse is not None:
            if self.framing == "openai-sse":  # once decided, the common case: one chunk per event
                return [(ev.t, classify(ev)) for ev in self._sse.feed(data, t)]
            return [(ev.t, c) for ev in self._sse.feed(data, t) for c in self._sse_chunks(ev)]
        if self._lines is not None:
            return [(ev.t, c) for ev in self._lines.feed(data, t) for c in self._line_chunks(ev.data)]
        try:
            text = self._utf8.decode(data)
        except UnicodeDecodeError as exc:
            raise InvalidUtf8(f"invalid UTF-8 in the text stream at byte {self._utf8_seen + exc.start}") from None
        self._utf8_seen += len(data)
        self._head_t = t
        return [(t, Chunk("token", text=text, tokens=estimate_tokens(text)))] if text else []

    def _sse_chunks(self, ev: SseEvent) -> list[Chunk]:
        if ev.data.strip() == "[DONE]":
            return [Chunk("end")]
        if self.framing == "openai-sse":
            return [classify(ev)]
        obj = _json_object(ev.data)
        if self.framing == "sse":
            if obj is not None and _openai_shaped(obj, ev.event):
                self.framing = "openai-sse"
                return [classify(ev)]
            self.framing = "sse-events" if ev.event and ev.event != "message" else "sse-text"
        return self._generic(ev.event, ev.data, obj)

    def _line_chunks(self, line: str) -> list[Chunk]:
        line = line.strip()
        if not line:
            return []
        if line == "[DONE]":
            return [Chunk("end")]
        if line.startswith("data:"):  # an SSE-ish "data: {...}" line inside an NDJSON stream
            line = line[5:].strip()
        obj = _json_object(line)
        if obj is None:
            return [Chunk("error", error=f"a line that is not a JSON object: {line[:120]!r}")]
        if "choices" in obj:
            return [choices_chunk(obj)]
        return self._generic(None, line, obj)

    def _generic(self, event: str | None, data: str, obj: dict[str, Any] | None) -> list[Chunk]:
        """A piece of a framing that is not OpenAI's: text, an end marker, an error, usage, or nothing."""
        name = (event or "").lower()
        if name in ERROR_EVENTS:
            return [Chunk("error", error=f"an {name!r} event: {data[:120]!r}")]
        if obj is None:
            if name in END_EVENTS:
                return [Chunk("end")]
            if name and name not in TOKEN_EVENTS and not name.endswith(("delta", "token")):
                return [Chunk("other")]
            return [Chunk("token", text=data)] if data else [Chunk("other")]
        error = obj.get("error")
        if error:
            return [Chunk("error", error=str(error.get("message") if isinstance(error, dict) else error)[:200])]
        text = None
        for path in (self.text_field,) if self.text_field else TEXT_FIELDS:
            text = text_at(obj, path)
            if text is not None:
                break
        chunk = Chunk("token" if text else "other", text=text or "")
        found = obj.get("usage")
        usage: dict[str, Any] = found if isinstance(found, dict) else obj
        chunk.prompt_tokens = _count(usage.get("prompt_tokens", usage.get("prompt_eval_count")))
        chunk.completion_tokens = _count(usage.get("completion_tokens", usage.get("eval_count")))
        finish = obj.get("finish_reason") or obj.get("done_reason")
        chunk.finish_reason = finish if isinstance(finish, str) else None
        if obj.get("done") is True or name in END_EVENTS:
            return [chunk, Chunk("end")] if text else [Chunk("end", prompt_tokens=chunk.prompt_tokens,
                                                                  completion_tokens=chunk.completion_tokens,
                                                                  finish_reason=chunk.finish_reason)]
        return [chunk]


class _LineSplitter(SseParser):
    """NDJSON lines, split by the SSE parser's linear, bounded line buffer: each line is one event."""

    def _line(self, raw: bytes, t: float, events: list[SseEvent]) -> None:
        line = decode_utf8(raw)
        if line.strip():
            events.append(SseEvent(t=t, data=line))


__all__ = ["ESTIMATED", "FRAMINGS", "StreamDecoder", "TooLong", "detect", "estimate_tokens", "text_at"]
