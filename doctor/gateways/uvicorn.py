"""A Python (ASGI) edge in front of the engine: FastAPI/Starlette on uvicorn, hypercorn or gunicorn. vLLM runs on
uvicorn too, so ``server: uvicorn`` beside another hop's tell is the engine's, passed on (``engine_server``).
"""

from __future__ import annotations

from doctor.gateways.record import NOT_RECORDED, START_WHERE, GatewayRecord, IdleTimeout, Phrasing, Suspect

RECORD = GatewayRecord(
    id="uvicorn",
    display="the Python edge",
    kind="fastapi",
    tokens=("uvicorn", "hypercorn", "gunicorn", "fastapi", "starlette"),
    engine_server=True,
    passed_note="a Python server's header behind another gateway: most likely vLLM's own, passed on",
    buffering=Phrasing(
        "StreamingResponse", "relay each upstream chunk as it arrives",
        where="{name}: the streaming route's handler and its middleware stack",
        why="{name} releases the stream in {burst}. In a Starlette/FastAPI edge: yield each upstream chunk "
            "from the StreamingResponse's generator (never read the whole upstream body first), keep the "
            "route out of `GZipMiddleware` (it holds ~32 KiB before it flushes: starlette PR #2753) and out of "
            "`BaseHTTPMiddleware` in old Starlette releases, which loaded a StreamingResponse entirely into "
            "memory (PR #1028).",
        suspect=Suspect(9, "a FastAPI edge without GZipMiddleware")),
    compression=Phrasing(
        "GZipMiddleware", "not applied to the streaming route",
        where="{name}: its middleware stack",
        why="A Starlette/FastAPI `GZipMiddleware` compresses the event stream and buffers ~32 KiB at a "
            "time in older releases (and withholds headers until the first token in newer ones). Mount "
            "the streaming route in a sub-application without the middleware, or use a Starlette that "
            "skips `text/event-stream`.",
        suspect=Suspect(9, "a Starlette/FastAPI edge's GZipMiddleware")),
    response_start=Phrasing(
        "gateway_response_start", "send the response start at once: no GZipMiddleware on the streaming route",
        where=START_WHERE,
        why="{name} withholds the response start until its first body: Starlette's GZipMiddleware waits for the "
        "first body to decide on compression, and a handler that awaits the upstream's first token before "
        "returning its StreamingResponse does the same. Exclude the streaming route's content type from "
        "GZipMiddleware (or mount it without) and return the StreamingResponse at once.",
        suspect=Suspect(1, "a Starlette/FastAPI edge's GZipMiddleware or a handler that awaits the first token")),
    idle_timeout=IdleTimeout("read timeout", "the Python edge: its upstream client's read timeout, e.g. "
                             "`httpx.AsyncClient(timeout=httpx.Timeout(10.0, read={s}))`", 5.0,
                             "httpx's default 5 s read timeout in a Python edge",
                             suspect=Suspect(9, "a Python edge's client read timeout")),
    connection_cap=NOT_RECORDED,
    retries=NOT_RECORDED,
    connect_timeout=NOT_RECORDED,
)
