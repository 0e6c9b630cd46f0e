"""A deterministic OpenAI-compatible model server for the eval gate's tests: real HTTP on 127.0.0.1.

Why not the lab engine: the lab simulates a scheduler (queues, batches, KV blocks) and its words
are drawn per request, so the same prompt gets another answer each time; the gate needs the
opposite, a *model*: the same prompt, the same answer, and a log-probability for any token after
any context, which a perturbation of its "weights" (``shift``) moves a little, as a quantised or
otherwise changed copy of a model does.

The model: a word-level tokenizer (a word or a punctuation mark is a token, its id a CRC) over a
fixed vocabulary; the log-probability of word ``w`` after word ``p`` is a fixed function of the two
(``logits``), normalised over the vocabulary (a real softmax, so the log-probabilities are real
ones); greedy decoding takes the best word until ``max_tokens`` (``length``) or a full stop after
eight words (``stop``). ``shift`` adds ``shift x`` a fixed pseudo-random number per (context, word)
to every logit: 0 is the baseline's weights, 0.05 a small numerics change, 1.0 a broken copy.

What it answers as vLLM 0.32 does (``vllm/entrypoints/openai/protocol.py``): ``/v1/models``;
``/v1/completions`` and ``/v1/chat/completions``, whole or streamed (SSE, usage trailer); with
``prompt_logprobs: N`` the completion choice's (chat: the response's) ``prompt_logprobs``, a list
whose first entry is ``null`` and each next one ``{"<token id>": {"logprob", "rank",
"decoded_token"}}``; chat's ``continue_final_message`` (the last assistant message is continued,
not closed); tools with a named ``tool_choice`` (a tool call, its arguments filled with words);
``response_format`` JSON (a JSON object); a context longer than ``max_model_len`` (prompt and
``max_tokens``) refused with HTTP 400 and vLLM's message, ``/v1/models`` giving ``max_model_len``
(unless ``lists_len`` is off, as engines that do not give it). It retrieves, as a model that can
read its context: a last question "What is the Y of the X?" over a context that states "The Y of
the X is Z." is answered with that sentence, the long-context probe's needles; ``recall`` (tokens)
is how far back it still reads Z exactly, beyond which the last character comes back changed, as
a lossy (fp8) KV cache loses a fact stated far back. ``ttft`` delays every answer, streamed or
whole (a slow candidate). ``mode`` breaks it on purpose: ``empty`` (every answer
empty), ``loop`` (the same phrase over and over), ``nologprobs`` (ignores ``prompt_logprobs``, as
an engine without them does), ``fail`` (HTTP 500 to every generation).
"""

from __future__ import annotations

import json
import math
import re
import sys
import threading
import time
import zlib
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_TOKEN = re.compile(r"\w+|[^\w\s]")
_QUESTION = re.compile(r"What is the ([^?]{1,200})\?")
VOCAB = ("the", "model", "answers", "every", "prompt", "with", "a", "short", "and", "plain", "sentence", "about",
         "latency", "tokens", "cache", "queue", "engine", "gateway", "stream", "time", ",", ".")


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)


def token_id(piece: str) -> int:
    return zlib.crc32(piece.encode()) & 0x7FFFFFFF


def _unit(*parts: str) -> float:
    """A fixed pseudo-random number in [0, 1) for ``parts``."""
    return (zlib.crc32("\x00".join(parts).encode()) & 0xFFFFFF) / 0x1000000


@dataclass
class Model:
    """The "weights": the logits of every word after a context word, and how far they are perturbed."""

    shift: float = 0.0

    def logprobs(self, prev: str) -> dict[str, float]:
        """log p(w | prev) over the vocabulary, plus ``prev``-specific mass for words outside it
        (``prev``: the two words before, so that greedy answers do not loop within a few words)."""
        logits = {w: 4.0 * _unit("w", prev, w) + self.shift * (2 * _unit("s", prev, w) - 1) for w in VOCAB}
        top = max(logits.values())
        norm = top + math.log(sum(math.exp(v - top) for v in logits.values()) + 1.0)  # +1: the rest of the words
        return {w: v - norm for w, v in logits.items()}

    def logprob(self, prev: str, word: str) -> tuple[float, int]:
        """(log p(word | prev), its rank) for any word; one outside the vocabulary shares the rest's mass."""
        table = self.logprobs(prev)
        value = table.get(word, math.log(1.0 / (len(word) + 20)) + min(table.values()))
        return value, 1 + sum(v > value for v in table.values())

    def generate(self, context: list[str], max_tokens: int) -> tuple[list[str], str]:
        out: list[str] = []
        seen = list(context[-2:])
        while len(out) < max_tokens:
            prev = " ".join(seen[-2:])
            table = self.logprobs(prev)
            word = max(table, key=lambda w: (table[w], w))
            if word == "." and len(out) < 8:  # too early to stop: the next best
                word = max((w for w in table if w != "."), key=lambda w: (table[w], w))
            out.append(word)
            seen.append(word)
            if word == ".":
                return out, "stop"
        return out, "length"


def render(pieces: list[str]) -> str:
    return "".join(p if p in ",." else " " + p for p in pieces).lstrip()


def chat_text(messages: list[dict[str, Any]], continue_final: bool) -> str:
    """A minimal chat template: role markers around each message; the last assistant message left
    open with ``continue_final_message``, else the assistant's turn opened after the last one."""
    parts = []
    for i, m in enumerate(messages):
        last = i == len(messages) - 1
        closing = "" if continue_final and last and m.get("role") == "assistant" else " <|end|>"
        parts.append(f"<|{m.get('role', 'user')}|> {m.get('content') or ''}{closing}")
    return " ".join(parts) + ("" if continue_final else " <|assistant|>")


class _Listener(ThreadingHTTPServer):
    """http.server's listen backlog is 5: an eighth connection at once waits for a SYN retry (1 s)."""

    request_queue_size = 128

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return  # the client gave up on a slow answer (its deadline): not the server's error
        super().handle_error(request, client_address)


class AnswerServer:
    """The server: ``with AnswerServer(shift=0.05) as s: s.url``. ``ttft`` / ``itl`` pace a streamed answer."""

    def __init__(self, *, shift: float = 0.0, model: str = "tiny-model", mode: str = "ok", ttft: float = 0.0,
                 itl: float = 0.0, max_model_len: int = 4096, lists_len: bool = True, recall: int | None = None) -> None:
        self.model, self.name, self.mode, self.ttft, self.itl = Model(shift), model, mode, ttft, itl
        self.max_model_len, self.lists_len, self.recall = max_model_len, lists_len, recall
        self.requests: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                if self.path.endswith("/v1/models"):
                    entry: dict[str, Any] = {"id": server.name, "object": "model", "owned_by": "vllm"}
                    if server.lists_len:
                        entry["max_model_len"] = server.max_model_len
                    server._json(self, 200, {"object": "list", "data": [entry]})
                else:
                    server._json(self, 404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                server.requests.append(body)
                server._answer(self, body)

        self.httpd = _Listener(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> AnswerServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    @staticmethod
    def _json(handler: BaseHTTPRequestHandler, status: int, doc: Any) -> None:
        data = json.dumps(doc).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    def _answer(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        chat = handler.path.endswith("/chat/completions")
        if self.mode == "fail":
            return self._json(handler, 500, {"error": {"message": "CUDA error: an illegal memory access", "code": 500}})
        text = chat_text(body.get("messages") or [], bool(body.get("continue_final_message"))) if chat else str(body.get("prompt", ""))
        context = tokens(text)
        max_tokens = int(body.get("max_tokens") or 16)
        if len(context) + max_tokens > self.max_model_len:
            return self._json(handler, 400, {"error": {
                "message": f"This model's maximum context length is {self.max_model_len} tokens. However, you requested "
                           f"{len(context) + max_tokens} tokens ({len(context)} in the messages, {max_tokens} in the completion). "
                           "Please reduce the length of the messages or completion.",
                "type": "BadRequestError", "param": None, "code": 400}})
        time.sleep(0 if body.get("stream") else self.ttft)
        words, finish = self.model.generate(context, max_tokens)
        retrieved = self._retrieve(text) if self.mode in ("ok", "nologprobs") else None
        if self.mode == "empty":
            words, finish = [], "stop"
        elif self.mode == "loop":
            words, finish = ["the", "queue", "is", "full", ","] * (max_tokens // 5), "length"
        if body.get("stream"):
            return self._stream(handler, chat, words, finish, len(context))
        answer, tool_calls = render(words), None
        if retrieved is not None:
            answer, words, finish = retrieved, tokens(retrieved), "stop"
        choice_tool = body.get("tool_choice")
        if chat and body.get("tools") and isinstance(choice_tool, dict):
            name = choice_tool["function"]["name"]
            tool = next(t["function"] for t in body["tools"] if t["function"]["name"] == name)
            args = {k: words[i % len(words)] if words else "" for i, k in enumerate(tool["parameters"].get("required", []))}
            tool_calls, answer = [{"id": "chatcmpl-tool-0", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}], ""
        elif isinstance(body.get("response_format"), dict) and body["response_format"].get("type") != "text":
            answer = json.dumps({"answer": render(words)})
        usage = {"prompt_tokens": len(context), "total_tokens": len(context) + len(words), "completion_tokens": len(words)}
        prompt_logprobs = self._prompt_logprobs(context) if body.get("prompt_logprobs") is not None and self.mode != "nologprobs" else None
        head = {"id": "cmpl-0", "created": int(time.time()), "model": self.name, "usage": usage}
        if chat:
            message = {"role": "assistant", "content": answer or None, "tool_calls": tool_calls or []}
            doc = {**head, "object": "chat.completion", "prompt_logprobs": prompt_logprobs,
                   "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": "tool_calls" if tool_calls else finish}]}
        else:
            doc = {**head, "object": "text_completion", "choices": [
                {"index": 0, "text": answer, "logprobs": None, "finish_reason": finish, "prompt_logprobs": prompt_logprobs}]}
        return self._json(handler, 200, doc)

    def _retrieve(self, text: str) -> str | None:
        """The sentence that answers the text's last "What is the Y of the X?" from the text itself, its
        value changed beyond ``recall`` tokens back; None when there is no such question or statement."""
        questions = list(_QUESTION.finditer(text))
        if not questions:
            return None
        asked = questions[-1].group(1)
        fact = re.search(rf"The {re.escape(asked)} is (\S+?)\.(?:\s|$)", text[:questions[-1].start()])
        if fact is None:
            return None
        value = fact.group(1)
        if self.recall is not None and len(tokens(text[fact.start():])) > self.recall:
            value = value[:-1] + ("A" if value[-1] != "A" else "B")
        return f"The {asked} is {value}."

    def _prompt_logprobs(self, context: list[str]) -> list[dict[str, dict[str, Any]] | None]:
        out: list[dict[str, dict[str, Any]] | None] = [None]
        for i, word in enumerate(context[1:], 1):
            value, rank = self.model.logprob(" ".join(context[max(0, i - 2):i]), word)
            out.append({str(token_id(word)): {"logprob": value, "rank": rank, "decoded_token": word}})
        return out

    def _stream(self, handler: BaseHTTPRequestHandler, chat: bool, words: list[str], finish: str, prompt_tokens: int) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.end_headers()
        time.sleep(self.ttft)
        for i, word in enumerate(words):
            if i:
                time.sleep(self.itl)
            piece = word if word in ",." or i == 0 else " " + word
            choice = ({"index": 0, "delta": {"content": piece}, "finish_reason": None} if chat
                      else {"index": 0, "text": piece, "finish_reason": None})
            handler.wfile.write(f"data: {json.dumps({'model': self.name, 'choices': [choice]})}\n\n".encode())
            handler.wfile.flush()
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": len(words), "total_tokens": prompt_tokens + len(words)}
        handler.wfile.write(f"data: {json.dumps({'model': self.name, 'choices': [], 'usage': usage})}\n\n".encode())
        handler.wfile.write(b"data: [DONE]\n\n")
        handler.wfile.flush()
