"""vLLM 0.32's OpenAI-compatible wire shapes for the three streaming routes, byte for byte.

Copied from real answers (fixtures/sse/*.sse): compact JSON, ``data: ...\\n\\n`` framing,
chat's role-only first chunk (sent once the first prefill chunk is done, before any token),
``null`` keys vLLM always writes, the ``stream_options.include_usage`` trailer with
``choices: []``, ``continuous_usage_stats`` on every chunk, ``data: [DONE]``; and for the
Responses API the ``event:`` lines, ``sequence_number`` and the ``*.done`` / ``response.completed``
closing events.
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

VLLM_VERSION = "0.32.0"
SYSTEM_FINGERPRINT = f"vllm-{VLLM_VERSION}-1ab0c0de"
DONE = b"data: [DONE]\n\n"


def _json(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def sse(obj: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {_json(obj)}\n\n".encode()


def usage(prompt: int, completion: int) -> dict[str, int]:
    return {"prompt_tokens": prompt, "total_tokens": prompt + completion, "completion_tokens": completion}


@dataclass
class StreamOptions:
    """The request's ``stream_options`` as vLLM reads them: the usage trailer at the end
    (``include_usage``) and usage on every chunk (``continuous_usage_stats``).
    """

    include_usage: bool = False
    continuous_usage: bool = False

    @classmethod
    def from_body(cls, body: dict[str, Any]) -> StreamOptions:
        asked = body.get("stream_options") or {}
        if not isinstance(asked, dict):
            asked = {}
        return cls(bool(asked.get("include_usage")), bool(asked.get("continuous_usage_stats")))


@dataclass
class Formatter:
    """Builds the events of one answer; subclasses per route. ``prompt_tokens`` is known up front."""

    model: str
    prompt_tokens: int
    options: StreamOptions = field(default_factory=StreamOptions)
    created: int = field(default_factory=lambda: int(time.time()))
    completion_tokens: int = 0
    text: str = ""

    ID_PREFIX = ""

    def __post_init__(self) -> None:
        self.id = f"{self.ID_PREFIX}{secrets.token_hex(8)}"

    def preamble(self) -> list[bytes]:
        """Sent right after the response headers."""
        return []

    def started(self) -> list[bytes]:
        """Sent when the request's first prefill chunk is done."""
        return []

    def add(self, text: str, tokens: int) -> None:
        """Account for generated text (also used alone to build a non-streamed answer)."""
        self.completion_tokens += tokens
        self.text += text

    def delta(self, text: str, finish_reason: str | None, tokens: int) -> list[bytes]:
        raise NotImplementedError

    def closing(self, finish_reason: str) -> list[bytes]:
        raise NotImplementedError

    def full(self, finish_reason: str) -> dict[str, Any]:
        raise NotImplementedError

    def _usage(self) -> dict[str, int]:
        return usage(self.prompt_tokens, self.completion_tokens)


class ChoiceChunkFormatter(Formatter):
    """Completions and chat: one ``choices`` chunk per delta, then the usage trailer and ``[DONE]``."""

    def _head(self) -> dict[str, Any]:
        """The ``id``/``object``/``created``/``model`` fields each route's chunks start with."""
        raise NotImplementedError

    def _choice_chunk(self, choice: dict[str, Any], finish_reason: str | None) -> list[bytes]:
        chunk = {**self._head(), "choices": [choice]}
        if self.options.continuous_usage:
            chunk["usage"] = self._usage()
        if finish_reason and not self.options.include_usage:
            chunk["system_fingerprint"] = SYSTEM_FINGERPRINT
        return [sse(chunk)]

    def closing(self, finish_reason: str) -> list[bytes]:
        out = []
        if self.options.include_usage:
            out.append(
                sse({**self._head(), "choices": [], "usage": self._usage(), "system_fingerprint": SYSTEM_FINGERPRINT})
            )
        return [*out, DONE]


class CompletionsFormatter(ChoiceChunkFormatter):
    """``/v1/completions``: ``text_completion`` chunks whose choice carries ``text``."""

    ID_PREFIX = "cmpl-"

    def _head(self) -> dict[str, Any]:
        return {"id": self.id, "object": "text_completion", "created": self.created, "model": self.model}

    def delta(self, text: str, finish_reason: str | None, tokens: int) -> list[bytes]:
        self.add(text, tokens)
        choice = {
            "index": 0,
            "text": text,
            "logprobs": None,
            "finish_reason": finish_reason,
            "stop_reason": None,
            "prompt_token_ids": None,
            "token_ids": None,
        }
        return self._choice_chunk(choice, finish_reason)

    def full(self, finish_reason: str) -> dict[str, Any]:
        choice = {
            "index": 0,
            "text": self.text,
            "logprobs": None,
            "finish_reason": finish_reason,
            "stop_reason": None,
            "prompt_logprobs": None,
        }
        return {
            **self._head(),
            "choices": [choice],
            "usage": {**self._usage(), "prompt_tokens_details": None},
            "system_fingerprint": SYSTEM_FINGERPRINT,
        }


class ChatFormatter(ChoiceChunkFormatter):
    """``/v1/chat/completions``: ``chat.completion.chunk`` chunks with a ``delta``, opened by the role-only
    chunk vLLM sends once the first prefill chunk is done.
    """

    ID_PREFIX = "chatcmpl-"

    def _head(self) -> dict[str, Any]:
        return {"id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.model}

    def started(self) -> list[bytes]:
        choice = {"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}
        chunk = {**self._head(), "choices": [choice], "prompt_token_ids": None, "prompt_text": None}
        if self.options.continuous_usage:
            chunk["usage"] = self._usage()
        return [sse(chunk)]

    def delta(self, text: str, finish_reason: str | None, tokens: int) -> list[bytes]:
        self.add(text, tokens)
        choice: dict[str, Any] = {
            "index": 0,
            "delta": {"content": text},
            "logprobs": None,
            "finish_reason": finish_reason,
        }
        if finish_reason:
            choice["stop_reason"] = None
        choice["token_ids"] = None
        return self._choice_chunk(choice, finish_reason)

    def full(self, finish_reason: str) -> dict[str, Any]:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": self.text,
            "refusal": None,
            "annotations": None,
            "audio": None,
            "function_call": None,
            "tool_calls": [],
            "reasoning_content": None,
        }
        choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason, "stop_reason": None}
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [choice],
            "usage": {**self._usage(), "prompt_tokens_details": None},
            "prompt_logprobs": None,
            "system_fingerprint": SYSTEM_FINGERPRINT,
        }


class ResponsesFormatter(Formatter):
    """``/v1/responses``: every event carries ``event:`` and a ``sequence_number``."""

    ID_PREFIX = "resp_"
    max_output_tokens: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        self.item_id = f"msg_{secrets.token_hex(8)}"
        self._seq = 0

    def _event(self, kind: str, payload: dict[str, Any]) -> bytes:
        obj = {**payload, "sequence_number": self._seq, "type": kind}
        self._seq += 1
        return sse(obj, event=kind)

    def _response(self, status: str, output: list[dict[str, Any]], usage_obj: dict[str, Any] | None) -> dict[str, Any]:
        return {
            "id": self.id,
            "created_at": self.created,
            "incomplete_details": None,
            "instructions": None,
            "metadata": None,
            "model": self.model,
            "object": "response",
            "output": output,
            "parallel_tool_calls": True,
            "temperature": 0.0,
            "tool_choice": "none",
            "tools": [],
            "top_p": 1.0,
            "background": False,
            "max_output_tokens": self.max_output_tokens,
            "max_tool_calls": None,
            "previous_response_id": None,
            "prompt": None,
            "reasoning": None,
            "service_tier": "auto",
            "status": status,
            "text": None,
            "top_logprobs": None,
            "truncation": "disabled",
            "usage": usage_obj,
            "user": None,
            "presence_penalty": 0.0,
            "frequency_penalty": 0.0,
            "kv_transfer_params": None,
            "ec_transfer_params": None,
            "input_messages": None,
            "output_messages": None,
        }

    def _item(self, status: str, content: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "id": self.item_id,
            "content": content,
            "role": "assistant",
            "status": status,
            "type": "message",
            "phase": None,
        }

    def _part(self) -> dict[str, Any]:
        return {"annotations": [], "text": self.text, "type": "output_text", "logprobs": []}

    def _usage_obj(self) -> dict[str, Any]:
        return {
            "input_tokens": self.prompt_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": self.completion_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": self.prompt_tokens + self.completion_tokens,
        }

    def preamble(self) -> list[bytes]:
        response = self._response("in_progress", [], None)
        return [
            self._event("response.created", {"response": response}),
            self._event("response.in_progress", {"response": response}),
        ]

    def started(self) -> list[bytes]:
        return [
            self._event("response.output_item.added", {"item": self._item("in_progress", []), "output_index": 0}),
            self._event(
                "response.content_part.added",
                {"content_index": 0, "item_id": self.item_id, "output_index": 0, "part": self._part()},
            ),
        ]

    def delta(self, text: str, finish_reason: str | None, tokens: int) -> list[bytes]:
        self.add(text, tokens)
        return [
            self._event(
                "response.output_text.delta",
                {"content_index": 0, "delta": text, "item_id": self.item_id, "logprobs": [], "output_index": 0},
            )
        ]

    def closing(self, finish_reason: str) -> list[bytes]:
        item = self._item("completed", [self._part()])
        return [
            self._event(
                "response.output_text.done",
                {"content_index": 0, "item_id": self.item_id, "logprobs": [], "output_index": 0, "text": self.text},
            ),
            self._event(
                "response.content_part.done",
                {"content_index": 0, "item_id": self.item_id, "output_index": 0, "part": self._part()},
            ),
            self._event("response.output_item.done", {"item": item, "output_index": 0}),
            self._event("response.completed", {"response": self._response("completed", [item], self._usage_obj())}),
        ]

    def full(self, finish_reason: str) -> dict[str, Any]:
        return self._response("completed", [self._item("completed", [self._part()])], self._usage_obj())


FORMATTERS: dict[str, type[Formatter]] = {
    "/v1/completions": CompletionsFormatter,
    "/v1/chat/completions": ChatFormatter,
    "/v1/responses": ResponsesFormatter,
}


def error_body(message: str, status: int, kind: str = "BadRequestError") -> bytes:
    """vLLM's error object (also what it writes inside a 200 stream when a request fails)."""
    return _json({"error": {"message": message, "type": kind, "param": None, "code": status}}).encode()
