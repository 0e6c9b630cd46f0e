"""Deterministic stand-ins for a tokenizer and a model's output, so lab runs are reproducible.

The tokenizer counts a word or a punctuation mark as one token (close to what BPE gives on
plain English) and maps it to a stable id, so a shared prompt prefix gives shared block
hashes (prefix caching works on real content). The "model" emits words from a fixed list.
"""

from __future__ import annotations

import re
import zlib
from typing import Any

_TOKEN_RE = re.compile(r"\w+|[^\w\s]")

WORDS = (
    " the",
    " latency",
    " of",
    " a",
    " stream",
    " is",
    " decided",
    " by",
    " the",
    " scheduler",
    ",",
    " the",
    " cache",
    " and",
    " every",
    " hop",
    " between",
    " engine",
    " and",
    " user",
    ".",
    " Tokens",
    " arrive",
    " one",
    " chunk",
    " at",
    " a",
    " time",
    " when",
    " nothing",
    " holds",
    " them",
    " back",
    ".",
)


def tokenize(text: str) -> list[int]:
    return [zlib.crc32(piece.encode()) & 0x7FFFFFFF for piece in _TOKEN_RE.findall(text)]


def chat_prompt(messages: Any) -> str:
    """A minimal chat template: role markers around each message's text content."""
    parts: list[str] = []
    for message in messages if isinstance(messages, list) else []:
        if not isinstance(message, dict):
            continue
        content = message.get("content", "")
        if isinstance(content, list):  # [{"type": "text", "text": ...}, ...]
            content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        parts.append(f"<|{message.get('role', 'user')}|> {content} <|end|>")
    return " ".join(parts) + " <|assistant|>"


def responses_prompt(body: dict[str, Any]) -> str:
    """The prompt of a Responses API request: ``instructions`` plus ``input`` (text or messages)."""
    given = body.get("input", "")
    text = chat_prompt(given) if isinstance(given, list) else str(given)
    instructions = body.get("instructions")
    return f"{instructions} {text}" if instructions else text


def output_word(seed: int, index: int) -> str:
    return WORDS[(seed + index) % len(WORDS)]
