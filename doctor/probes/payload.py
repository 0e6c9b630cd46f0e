"""The request bodies the stream probe sends, per route.

Default bodies ask for a fixed output length (vLLM's ``ignore_eos`` and ``min_tokens``), so a
request that ends early is not mistaken for a fast one, and for usage on every chunk
(``stream_options.include_usage`` and vLLM's ``continuous_usage_stats``), so a chunk that
carries several tokens is counted as several. Each default prompt starts with a per-request
number: the engine's prefix cache must not make the second path of a pair look faster.
An application's own body (``--payload``) is sent as it is, with ``stream`` forced on. When it
constrains decoding (a JSON schema, tools, a guided grammar), ``constraints`` names how and
``unconstrained`` is its twin without them: the control the stream probe sends first, so a
schema's compile and the cost of constrained decoding can be told from the prompt's own cost.
"""

from __future__ import annotations

import copy
from typing import Any

#: The OpenAI-compatible streaming routes the probe can send to, by the name ``--route`` takes.
ROUTES = {
    "completions": "/v1/completions",
    "chat": "/v1/chat/completions",
    "responses": "/v1/responses",
}

#: Common one-token English words: a prompt of N of them is about N tokens for BPE tokenizers.
_WORDS = ["the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "while", "the", "small", "cat", "sleeps", "near", "the", "warm", "fire", "and", "every", "bird", "in", "the", "old", "tree", "sings", "a", "song", "about", "the", "long", "day"]

#: Fields only vLLM (and servers mimicking it) accept; dropped when the server rejects them.
VLLM_EXTENSIONS = ("ignore_eos", "min_tokens", "continuous_usage_stats")


def prompt_text(tokens: int, nonce: int) -> str:
    """About ``tokens`` tokens of plain text, starting with a request-unique number."""
    words = [_WORDS[i % len(_WORDS)] for i in range(max(tokens - 4, 1))]
    return f"Request {nonce}: " + " ".join(words)


def default_body(route: str, model: str | None, prompt_tokens: int, max_tokens: int, nonce: int) -> dict[str, Any]:
    """The probe's own streamed request for ``route``: a fixed prompt and output length, usage per chunk.

    ``ignore_eos`` / ``min_tokens`` (vLLM extensions) make every request produce exactly
    ``max_tokens``, so per-token timings compare across requests and paths; ``nonce`` makes each
    prompt unique so no prefix cache turns one request's TTFT into another's.
    """
    text = prompt_text(prompt_tokens, nonce)
    body: dict[str, Any] = {"model": model} if model else {}
    if route == "responses":
        body.update(input=text, max_output_tokens=max_tokens, temperature=0, stream=True)
        return body
    if route == "completions":
        body["prompt"] = text
    else:
        body["messages"] = [{"role": "user", "content": text}]
    body.update(
        max_tokens=max_tokens,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True, "continuous_usage_stats": True},
        ignore_eos=True,
        min_tokens=max_tokens,
    )
    return body


def user_body(payload: dict[str, Any], route: str, model: str | None) -> dict[str, Any]:
    """The application's body with ``stream`` forced on (and usage asked for where it is absent)."""
    body = copy.deepcopy(payload)
    body["stream"] = True
    if model and not body.get("model"):
        body["model"] = model
    if route != "responses":
        options = body.setdefault("stream_options", {})
        if isinstance(options, dict):
            options.setdefault("include_usage", True)
    return body


#: Fields of a request body that constrain decoding to a schema, a grammar or a tool call.
#: ``text`` is the Responses API's (``text.format``); ``response_format: {"type": "text"}`` constrains nothing.
CONSTRAINT_FIELDS = ("response_format", "tools", "tool_choice", "parallel_tool_calls", "guided_json", "guided_regex",
                     "guided_choice", "guided_grammar", "guided_decoding_backend", "structured_outputs")
_FREE = ("text", None)


def constraints(body: dict[str, Any]) -> list[str]:
    """How ``body`` constrains decoding, e.g. ``["response_format:json_schema", "tools"]``; empty when it does not.

    Only what changes the engine's work counts: a ``response_format`` or Responses ``text.format``
    of type ``text``, or ``tools`` with ``tool_choice: "none"``, leave decoding free.
    """
    found = []
    for key, spec in (("response_format", body.get("response_format")),
                      ("text.format", body["text"].get("format") if isinstance(body.get("text"), dict) else None)):
        kind = spec.get("type") if isinstance(spec, dict) else spec
        if spec is not None and kind not in _FREE:
            found.append(f"{key}:{kind}" if isinstance(kind, str) else key)
    if isinstance(body.get("tools"), list) and body["tools"] and body.get("tool_choice") != "none":
        found.append("tools")
    found += [key for key in ("guided_json", "guided_regex", "guided_choice", "guided_grammar", "structured_outputs")
              if body.get(key) is not None]
    return found


def unconstrained(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` without what constrains its decoding: the same prompt and length, free text."""
    out = {k: copy.deepcopy(v) for k, v in body.items() if k not in CONSTRAINT_FIELDS}
    if isinstance(out.get("text"), dict):
        out["text"] = {k: v for k, v in out["text"].items() if k != "format"}
    return out


def max_tokens(payload: dict[str, Any]) -> int | None:
    """The output length the application's body asks for, when it is a count.

    ``max_tokens: "64"`` or ``12.5`` or ``true`` is the application's business (the server may
    accept or refuse it); the probe shape records only an integer, which its bundle can carry.
    """
    for key in ("max_tokens", "max_output_tokens", "max_completion_tokens"):
        value = payload.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def without_extensions(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` without vLLM's extensions, for a server that answered 400 to them."""
    out = {k: v for k, v in body.items() if k not in VLLM_EXTENSIONS}
    if isinstance(out.get("stream_options"), dict):
        out["stream_options"] = {k: v for k, v in out["stream_options"].items() if k not in VLLM_EXTENSIONS}
    return out


def mentions_extension(error_text: str) -> bool:
    """True when a 400 body names one of vLLM's extensions: the server rejects them, so retry without."""
    return any(name in error_text for name in VLLM_EXTENSIONS)
