"""The prompts the answers gate sends: the built-in set, or one request body per line of a file.

Every body is sent at temperature 0 with a fixed seed and without streaming (``gate_body``): the
gate compares what two configurations answer to the same request, so the sampler must not be a
difference of its own. A prompts file is read whole and checked before any request: a bad line
is named (``PromptFileError``), because a gate that dies on line 12 after minutes of requests
wastes the minutes.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from doctor.foundation import wire

#: The seed every request carries: any fixed number; the same on both sides is what matters.
SEED = 1234
#: Lines a prompts file may hold: each prompt is sent at least four times.
MAX_PROMPTS = 1000


class PromptFileError(ValueError):
    """A prompts file the gate cannot use, with the line that says why (``path:line: why``)."""


@dataclass(frozen=True)
class Prompt:
    """One request of the gate: its id, what kind of request it is, the route and the body as given."""

    id: str
    route: str  # "chat" or "completions" (``doctor.probes.payload.ROUTES``)
    body: dict[str, Any] = field(hash=False)
    kind: str = "prompt"

    @property
    def expects_json(self) -> bool:
        """The answer must parse as JSON: the body asks for a JSON format, or its kind says so."""
        fmt = self.body.get("response_format")
        return self.kind == "json output" or (isinstance(fmt, dict) and fmt.get("type") in ("json_object", "json_schema"))

    @property
    def expects_tool(self) -> bool:
        """The answer is a tool call: the body offers tools and does not refuse them."""
        return bool(self.body.get("tools")) and self.body.get("tool_choice") != "none"


def gate_body(prompt: Prompt, model: str | None) -> dict[str, Any]:
    """The body sent for ``prompt``: temperature 0, the fixed seed, no stream, the endpoint's model when the body names none."""
    body = copy.deepcopy(prompt.body)
    body.update(temperature=0, seed=SEED, stream=False)
    body.pop("stream_options", None)
    if model and not body.get("model"):
        body["model"] = model
    return body


def _prompt(doc: Any, where: str, default_id: str) -> Prompt:
    """One line's prompt: ``{"id", "kind", "body"}`` or a bare request body."""
    if not isinstance(doc, dict):
        raise PromptFileError(f"{where}: not a JSON object")
    wrapped = isinstance(doc.get("body"), dict)
    body = doc["body"] if wrapped else doc
    if isinstance(body.get("messages"), list) and body["messages"]:
        route = "chat"
    elif isinstance(body.get("prompt"), str) and body["prompt"]:
        route = "completions"
    else:
        raise PromptFileError(f"{where}: neither 'messages' (a chat request) nor 'prompt' (a completion) is there")
    if body.get("stream") is True:
        raise PromptFileError(f"{where}: 'stream: true' asks for a stream; the gate reads whole answers (drop it)")
    n = body.get("n")
    if n is not None and n != 1:
        raise PromptFileError(f"{where}: 'n: {n}' asks for several answers; the gate compares one")
    ident = str(doc.get("id") or default_id) if wrapped else default_id
    return Prompt(ident, route, body, str(doc.get("kind") or "prompt") if wrapped else "prompt")


def parse_prompts(text: str, source: str) -> list[Prompt]:
    """Every prompt of a JSONL text; ``PromptFileError`` naming the first bad line.

    Blank lines are skipped; ids must be unique (the reports and recorded answers key on them).
    """
    prompts: list[Prompt] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{source}:{number}"
        try:
            doc = wire.loads(line)
        except ValueError as exc:
            raise PromptFileError(f"{where}: not JSON ({exc})") from None
        prompt = _prompt(doc, where, f"line-{number}")
        if any(p.id == prompt.id for p in prompts):
            raise PromptFileError(f"{where}: the id {prompt.id!r} is used twice")
        prompts.append(prompt)
        if len(prompts) > MAX_PROMPTS:
            raise PromptFileError(f"{where}: more than {MAX_PROMPTS} prompts")
    if not prompts:
        raise PromptFileError(f"{source}: no prompt in the file")
    return prompts


def builtin() -> list[Prompt]:
    """The built-in set (``prompts.jsonl`` beside this module): short chat, long context, code, JSON output,
    tool calls and plain completions, each short enough that the whole gate costs minutes on a CPU engine."""
    text = resources.files(__package__).joinpath("prompts.jsonl").read_text(encoding="utf-8")
    return parse_prompts(text, "built-in prompts")
