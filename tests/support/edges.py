"""Small FastAPI edges in front of the test SSE server, served by a real uvicorn, for the edge tests.

They are the application edges llm-doctor meets in front of vLLM:

- ``playbook``: like the vLLM playbook's FastAPI wrapper. ``POST /chat?prompt=...``; the async
  handler calls the engine with a SYNCHRONOUS client (httpx's here, standing in for the sync
  ``openai`` client) and returns the raw text deltas, one write per token, as
  ``text/event-stream``: no ``data:``, no JSON, no ``[DONE]``. The deltas are read by a plain
  generator, which Starlette iterates in its thread pool.
- ``blocking``: the same, but the sync stream is iterated inside an ``async`` generator, which
  blocks the event loop between tokens: concurrent streams are served one after another.
- ``gzip``: the playbook's edge with Starlette's ``GZipMiddleware``, its stream sent as
  ``text/plain`` (GZipMiddleware skips ``text/event-stream`` since Starlette 0.46, not other
  types): compressed, and the headers held until the first body.
- ``ndjson``: one JSON object per token, ``{"text": ...}``, as ``application/x-ndjson``.

Each edge records the prompts it received, so a test can check what the probe sent.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import AsyncIterator, Iterator

import httpx
import uvicorn
from fastapi import FastAPI
from fastapi.responses import StreamingResponse
from starlette.middleware.gzip import GZipMiddleware

from tests.support.sse_server import MODEL

START_TIMEOUT_S = 10.0
KINDS = ("playbook", "blocking", "gzip", "ndjson")


def _deltas(response: httpx.Response) -> Iterator[str]:
    """The ``delta.content`` of each OpenAI SSE chunk of ``response`` (then the response is closed)."""
    try:
        for line in response.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            for choice in json.loads(line[6:]).get("choices") or ():
                text = (choice.get("delta") or {}).get("content")
                if text:
                    yield text
    finally:
        response.close()


def edge_app(kind: str, engine: str) -> FastAPI:
    """The FastAPI app of edge ``kind`` (``KINDS``) calling ``engine`` (a base URL of the test SSE server)."""
    client = httpx.Client(timeout=30.0)  # sync, like the playbook's OpenAI client
    app = FastAPI()
    app.state.prompts = []
    if kind == "gzip":
        app.add_middleware(GZipMiddleware, minimum_size=0)

    @app.post("/chat")
    async def chat(prompt: str, max_tokens: int = 64) -> StreamingResponse:
        app.state.prompts.append(prompt)
        body = {"model": MODEL, "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens, "stream": True}
        # the playbook's mistake kept on purpose: a blocking call inside an async handler (it holds
        # the event loop until the engine's response headers arrive)
        upstream = client.send(client.build_request("POST", engine + "/v1/chat/completions", json=body), stream=True)
        if kind == "ndjson":
            lines = (json.dumps({"text": text}) + "\n" for text in _deltas(upstream))
            return StreamingResponse(lines, media_type="application/x-ndjson")
        if kind == "blocking":
            async def blocking() -> AsyncIterator[str]:
                for text in _deltas(upstream):  # a sync iteration on the event loop: blocks every other stream
                    yield text
            return StreamingResponse(blocking(), media_type="text/event-stream")
        return StreamingResponse(_deltas(upstream), media_type="text/plain" if kind == "gzip" else "text/event-stream")

    return app


@contextlib.contextmanager
def serve(app: FastAPI) -> Iterator[str]:
    """Serve ``app`` with a real uvicorn on a free port of 127.0.0.1; yield its base URL; stop on exit."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True, name="uvicorn-edge")
    thread.start()
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@contextlib.contextmanager
def run_edge(kind: str, engine: str) -> Iterator[tuple[str, FastAPI]]:
    """Edge ``kind`` in front of ``engine``, served by uvicorn: (base URL, app)."""
    app = edge_app(kind, engine)
    with serve(app) as url:
        yield url, app
