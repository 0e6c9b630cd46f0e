"""What one answer is, read from an OpenAI-compatible response, and its structural checks.

The structural checks need no reference model and catch the catastrophic failures of a numerics
change in seconds (an fp8 cache answering "????////", an empty answer, a loop): an empty answer,
a self-repeating one, a cut by ``length``, JSON that does not parse, a tool call whose name or
arguments changed. Tool arguments compare canonically (parsed, keys sorted): the same call with
its keys in another order is the same call.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from doctor.foundation import wire

#: Tensward's rule for a self-repeating answer: more than half of its 24-character pieces were
#: seen earlier in the same answer. A model stuck in a loop repeats whole phrases; prose does not.
#: Every window is a piece here (Tensward steps by the piece's length), so that a loop whose period
#: is not a multiple of 24 characters is caught too; the first ``REPEAT_SCAN`` characters are read.
REPEAT_PIECE = 24
REPEAT_SHARE = 0.5
REPEAT_SCAN = 8000
#: How much more repetitive than the baseline's a looping candidate answer must be to be its own
#: loop: the same weights on two real vLLM servers answered one degenerate prompt at 0.48 and 0.52,
#: one batch apart (the engine's noise); a regression moves from prose (under 0.2) to a loop (0.9).
REPEAT_MARGIN = 0.25

_TOKEN = re.compile(r"\s*\S+")


@dataclass
class ToolCall:
    """One tool call of an answer: the function's name and its arguments as sent."""

    name: str
    arguments: str

    def canonical(self) -> str:
        """``name(arguments)`` with the arguments parsed and their keys sorted; the raw text when it is not JSON."""
        try:
            args = json.dumps(wire.loads(self.arguments), sort_keys=True, separators=(",", ":"))
        except ValueError:
            args = self.arguments
        return f"{self.name}({args})"


@dataclass
class Answer:
    """One answer of one endpoint to one prompt, or why there is none (``error``).

    ``model`` is the name the endpoint answered with; ``prompt_tokens`` its count of the prompt,
    which tells two tokenizers apart when the names do not.
    """

    prompt_id: str
    text: str = ""
    finish_reason: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    model: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def empty(self) -> bool:
        return self.ok and not self.text.strip() and not self.tool_calls

    @property
    def cut(self) -> bool:
        """Stopped by ``max_tokens``, not by the model."""
        return self.finish_reason == "length"

    @property
    def repeating(self) -> bool:
        return self_repeating(self.text)

    def json_valid(self) -> bool:
        """The text parses as JSON (a fenced ```json block counts: models write them)."""
        text = self.text.strip()
        if text.startswith("```"):
            text = text.strip("`").removeprefix("json").strip()
        try:
            wire.loads(text)
        except ValueError:
            return False
        return True

    def tools(self) -> tuple[str, ...]:
        """The tool calls, canonical, in order."""
        return tuple(call.canonical() for call in self.tool_calls)

    def signature(self) -> tuple[str, tuple[str, ...]]:
        """What two answers must share to be the same answer: the text and the canonical tool calls."""
        return self.text, self.tools()

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def repeat_share(text: str) -> float:
    """The share of the text's ``REPEAT_PIECE``-character pieces that appeared earlier in it (0 under
    ~100 characters, where nothing can be said)."""
    text = text[:REPEAT_SCAN]
    pieces = [text[i:i + REPEAT_PIECE] for i in range(len(text) - REPEAT_PIECE + 1)]
    if len(pieces) < 4 * REPEAT_PIECE:
        return 0.0
    seen: set[str] = set()
    repeated = 0
    for piece in pieces:
        repeated += piece in seen
        seen.add(piece)
    return repeated / len(pieces)


def self_repeating(text: str) -> bool:
    """More than ``REPEAT_SHARE`` of the text's ``REPEAT_PIECE``-character pieces appeared earlier in it."""
    return repeat_share(text) > REPEAT_SHARE


def first_difference(a: str, b: str) -> tuple[int, str, str] | None:
    """(word index, a's word, b's word) where the two texts first differ, word by word; None when equal."""
    if a == b:
        return None
    wa, wb = _TOKEN.findall(a), _TOKEN.findall(b)
    for i, (x, y) in enumerate(zip(wa, wb, strict=False)):
        if x != y:
            return i, x.strip(), y.strip()
    i = min(len(wa), len(wb))
    return i, (wa[i].strip() if i < len(wa) else "(end)"), (wb[i].strip() if i < len(wb) else "(end)")


def answer_from_response(prompt_id: str, route: str, doc: Any) -> Answer:
    """The answer in a non-streamed completions or chat response body; an ``error`` when it carries none."""
    if not isinstance(doc, dict):
        return Answer(prompt_id, error="the answer is not a JSON object")
    choices = doc.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        said = doc["error"].get("message") if isinstance(doc.get("error"), dict) else None
        return Answer(prompt_id, error=f"no choice in the answer{': ' + str(said)[:200] if said else ''}")
    choice = choices[0]
    usage: dict[str, Any] = doc["usage"] if isinstance(doc.get("usage"), dict) else {}
    answer = Answer(
        prompt_id, finish_reason=choice.get("finish_reason") if isinstance(choice.get("finish_reason"), str) else None,
        model=doc.get("model") if isinstance(doc.get("model"), str) else None,
        prompt_tokens=wire.number(usage.get("prompt_tokens"), int),
        completion_tokens=wire.number(usage.get("completion_tokens"), int),
    )
    if route == "completions":
        answer.text = str(choice.get("text") or "")
        return answer
    message: dict[str, Any] = choice["message"] if isinstance(choice.get("message"), dict) else {}
    answer.text = str(message.get("content") or "")
    for call in message.get("tool_calls") or []:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            args = function.get("arguments")
            answer.tool_calls.append(ToolCall(str(function.get("name") or ""),
                                              args if isinstance(args, str) else json.dumps(args)))
    return answer


def answer_from_json(doc: Any, where: str) -> Answer:
    """An answer recorded by ``--save-answers`` (``Answer.to_json``); ``ValueError`` naming ``where`` when it is not one."""
    if not isinstance(doc, dict) or not isinstance(doc.get("prompt_id"), str):
        raise ValueError(f"{where}: not a recorded answer (no 'prompt_id')")
    calls = doc.get("tool_calls") or []
    if not isinstance(calls, list) or not all(isinstance(c, dict) for c in calls):
        raise ValueError(f"{where}: 'tool_calls' is not a list of objects")
    return Answer(
        doc["prompt_id"], text=str(doc.get("text") or ""),
        finish_reason=doc.get("finish_reason") if isinstance(doc.get("finish_reason"), str) else None,
        tool_calls=[ToolCall(str(c.get("name") or ""), str(c.get("arguments") or "")) for c in calls],
        model=doc.get("model") if isinstance(doc.get("model"), str) else None,
        prompt_tokens=wire.number(doc.get("prompt_tokens"), int),
        completion_tokens=wire.number(doc.get("completion_tokens"), int),
        error=doc.get("error") if isinstance(doc.get("error"), str) else None,
    )
