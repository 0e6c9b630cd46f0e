"""Incident load from a process of its own: N users streaming from an OpenAI-compatible server.

The real-vLLM stage needs the load that hurts the server to come from somewhere other than
llm-doctor, as it does in production: the probe's few requests are then just more users, and
the report must say what *all* users felt. Each user is a thread in a closed loop (send a
streamed request, read it to the end, send the next), so N users keep N requests in flight.
The run is bounded: it stops after ``--duration`` seconds (no new request starts later; one in
flight may finish within ``--request-timeout``) or ``--requests`` requests per user, or on
SIGTERM / SIGINT (requests in flight are then abandoned at their next line, recorded as stopped).

Every finished request is one JSON line in ``--out``: when it started (Unix time), what the
user felt (client TTFT, the largest gap between two content events, E2E), how many content
events and tokens it got, and its error if it failed. The test reads that file to state the
users' experience beside llm-doctor's verdict.

Standard library only (``http.client``), so it runs from any Python without the project's
dependencies; one connection per request, as most clients' pools do under load. Example:
``python -m tests.support.loadgen --url http://127.0.0.1:8000 --users 12 --duration 60 --out users.jsonl``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import signal
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

#: Words of the tiny model's training corpus (tests/realvllm/tiny_model.py): about one token each there.
WORDS = ["the", "of", "to", "and", "in", "is", "it", "that", "for", "on", "with", "as", "was", "at", "by", "be",
         "this", "from", "or", "an", "are", "not", "but", "have", "token", "stream", "server", "engine", "cache",
         "queue", "request", "model", "prompt", "batch", "first", "time", "wait", "buffer", "proxy"]


@dataclass
class Shape:
    """One class of user request: prompt and output length, and how many users send it."""

    users: int
    prompt_tokens: int
    max_tokens: int
    label: str = "user"
    think_s: float = 0.0  # each user waits this long between its requests
    shared_prefix: int = 0  # tokens of one system prompt every request of the class starts with
    stream: bool = True  # False: whole answers (a batch client, a tool), held by every hop until complete


@dataclass
class Record:
    label: str
    user: int
    seq: int
    start: float  # Unix time the request was sent
    prompt_tokens: int | None = None  # as the server counted them (usage), when it said
    ttft_s: float | None = None
    max_gap_s: float | None = None  # largest gap between two content events after the first
    e2e_s: float | None = None
    events: int = 0  # SSE events with content
    completion_tokens: int | None = None
    status: int | None = None
    error: str | None = None
    gaps_over_1s: list[float] = field(default_factory=list)


def prompt(tokens: int, nonce: str, shared: int = 0) -> str:
    """About ``tokens`` tokens, starting with a unique marker so no prefix cache is shared; with
    ``shared``, after that many tokens of one text every such prompt starts with (a shared system
    prompt, what cache-aware routing pins to one replica)."""
    head = " ".join(f"rule{i}" for i in range(shared)) + " " if shared else ""
    return f"{head}{nonce} " + " ".join(WORDS[i % len(WORDS)] for i in range(max(tokens - shared - 3, 1)))


def body(route: str, model: str, text: str, max_tokens: int, stream: bool = True) -> dict:
    out: dict = {"model": model, "max_tokens": max_tokens, "temperature": 0, "stream": stream,
                 "ignore_eos": True, "min_tokens": max_tokens}
    if stream:
        out["stream_options"] = {"include_usage": True, "continuous_usage_stats": True}
    if route == "completions":
        out["prompt"] = text
    else:
        out["messages"] = [{"role": "user", "content": text}]
    return out


def _content(event: dict) -> bool:
    for choice in event.get("choices") or []:
        delta = choice.get("delta") or {}
        if delta.get("content") or choice.get("text"):
            return True
    return False


def one_request(url: str, route: str, model: str, shape: Shape, user: int, seq: int, timeout_s: float,
                stop: threading.Event) -> Record:
    """Send one streamed request and time it from this client's clock; give up on it once ``stop`` is set."""
    parts = urlsplit(url)
    path = parts.path.rstrip("/") + ("/v1/completions" if route == "completions" else "/v1/chat/completions")
    rec = Record(label=shape.label, user=user, seq=seq, start=time.time())
    payload = json.dumps(body(route, model, prompt(shape.prompt_tokens, f"u{user}s{seq}t{rec.start:.3f}", shape.shared_prefix),
                              shape.max_tokens, shape.stream)).encode()
    t0 = time.monotonic()
    last: float | None = None
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout_s)
    try:
        conn.request("POST", path, payload, {"Content-Type": "application/json", "Accept": "text/event-stream"})
        resp = conn.getresponse()
        rec.status = resp.status
        if resp.status != 200:
            rec.error = f"HTTP {resp.status}: {resp.read(300).decode(errors='replace')}"
            return rec
        if not shape.stream:  # the whole answer at once: its first token is its last
            usage = json.loads(resp.read()).get("usage") or {}
            rec.prompt_tokens, rec.completion_tokens = usage.get("prompt_tokens"), usage.get("completion_tokens")
            rec.ttft_s = rec.e2e_s = time.monotonic() - t0
            rec.events = 1
            return rec
        while True:
            line = resp.readline()
            if not line:
                break
            if stop.is_set():
                rec.error = "stopped: the run ended during this request"
                return rec
            line = line.strip()
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                break
            now = time.monotonic()
            event = json.loads(data)
            usage = event.get("usage") or {}
            rec.prompt_tokens = usage.get("prompt_tokens", rec.prompt_tokens)
            rec.completion_tokens = usage.get("completion_tokens", rec.completion_tokens)
            if not _content(event):
                continue
            rec.events += 1
            if last is None:
                rec.ttft_s = now - t0
            else:
                gap = now - last
                rec.max_gap_s = max(rec.max_gap_s or 0.0, gap)
                if gap > 1.0:
                    rec.gaps_over_1s.append(round(gap, 3))
            last = now
        rec.e2e_s = time.monotonic() - t0
    except (OSError, http.client.HTTPException, ValueError) as exc:  # a timeout is an OSError
        rec.error = f"{type(exc).__name__}: {exc}"
    finally:
        conn.close()
    return rec


class LoadGen:
    """Users in closed loops until ``stop`` is set, the duration passes or the per-user count is done."""

    def __init__(self, url: str, route: str, model: str, shapes: list[Shape], *, duration_s: float,
                 requests_per_user: int, timeout_s: float, out: Path) -> None:
        self.url, self.route, self.model, self.shapes = url.rstrip("/"), route, model, shapes
        self.duration_s, self.requests_per_user, self.timeout_s = duration_s, requests_per_user, timeout_s
        self.out = out
        self.stop = threading.Event()
        self._lock = threading.Lock()

    def _user(self, shape: Shape, user: int, deadline: float) -> None:
        for seq in range(self.requests_per_user):
            if self.stop.is_set() or time.monotonic() >= deadline:
                return
            rec = one_request(self.url, self.route, self.model, shape, user, seq, self.timeout_s, self.stop)
            with self._lock, self.out.open("a") as f:
                f.write(json.dumps(asdict(rec)) + "\n")
            if shape.think_s:
                self.stop.wait(shape.think_s)

    def run(self) -> None:
        deadline = time.monotonic() + self.duration_s
        threads = []
        user = 0
        for shape in self.shapes:
            for _ in range(shape.users):
                t = threading.Thread(target=self._user, args=(shape, user, deadline), daemon=True)
                threads.append(t)
                user += 1
        for t in threads:
            t.start()
        for t in threads:  # a request in flight ends within its timeout: the join is bounded
            t.join(self.duration_s + self.timeout_s + 5)


def read_records(path: Path) -> list[dict]:
    """The JSON lines a run wrote (none when it wrote nothing)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _shape(text: str) -> Shape:
    """``USERS:PROMPT:MAX[:LABEL[:THINK]]``, e.g. ``1:900:4:long:2``."""
    fields = text.split(":")
    if len(fields) not in (3, 4, 5):
        raise argparse.ArgumentTypeError(f"expected USERS:PROMPT_TOKENS:MAX_TOKENS[:LABEL[:THINK_S]], got {text!r}")
    try:
        return Shape(int(fields[0]), int(fields[1]), int(fields[2]), fields[3] if len(fields) > 3 else "user",
                     float(fields[4]) if len(fields) > 4 else 0.0)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.support.loadgen", description=__doc__.split("\n\n")[0])
    p.add_argument("--url", required=True, help="server base URL, e.g. http://127.0.0.1:8000")
    p.add_argument("--route", choices=("chat", "completions"), default="chat")
    p.add_argument("--model", default="tiny")
    p.add_argument("--users", type=int, default=4, help="concurrent users of the main shape")
    p.add_argument("--prompt-tokens", type=int, default=64)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--also", type=_shape, action="append", default=[],
                   help="another class of users, USERS:PROMPT_TOKENS:MAX_TOKENS[:LABEL[:THINK_S]] (repeatable)")
    p.add_argument("--duration", type=float, default=60.0, help="no request starts after this many seconds")
    p.add_argument("--requests", type=int, default=1000, help="at most this many requests per user")
    p.add_argument("--think", type=float, default=0.0, help="seconds a main-shape user waits between its requests")
    p.add_argument("--whole", action="store_true", help="main-shape users ask for whole answers (no stream)")
    p.add_argument("--shared-prefix", type=int, default=0, help="tokens of one shared system prompt the main-shape prompts start with")
    p.add_argument("--request-timeout", type=float, default=120.0, help="per-request socket timeout")
    p.add_argument("--out", type=Path, required=True, help="JSONL file, one line per request")
    a = p.parse_args(argv)
    shapes = [Shape(a.users, a.prompt_tokens, a.max_tokens, think_s=a.think, shared_prefix=a.shared_prefix,
                    stream=not a.whole), *a.also]
    gen = LoadGen(a.url, a.route, a.model, [s for s in shapes if s.users > 0], duration_s=a.duration,
                  requests_per_user=a.requests, timeout_s=a.request_timeout, out=a.out)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: gen.stop.set())
    gen.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
