"""A reverse proxy on 127.0.0.1 that answers as a named gateway does: its headers and its behaviour.

The gateways llm-doctor names in remediations (Envoy, Kong, LiteLLM, Cloudflare, an AWS ALB...)
cannot all be installed on a test machine, so this proxy stands in for them in front of
``SseServer``: it really relays the upstream's stream over its own HTTP connection, adding the
response headers that gateway sends (``PERSONAS``, as the public reports in
``fixtures/gateway-reports/`` and the vendors' docs show them) and doing what makes it an
incident, chosen per persona:

- ``buffer``: hold the body until that many bytes have accumulated (``-1``: the whole body, as an
  ext_proc in BUFFERED mode or an ALB in front of Lambda does), then pass it on in one write;
- ``idle``: close the connection mid-body when the upstream stays silent that long (an idle
  timeout: the client sees a cut chunked body);
- ``delay``: wait that long before calling the upstream, and report it as LiteLLM does in
  ``x-litellm-overhead-duration-ms`` (its own time, the upstream call excluded).

Raw asyncio on the client side (one request per connection, ``connection: close``, on
``doctor.lab.loop_server``'s loop thread) and httpx to the upstream, so the relay's timing is the persona's and nothing else's::

    with GatewayPersona("envoy", upstream.url, buffer=-1) as gw:
        ... gw.url ...
"""

from __future__ import annotations

import asyncio
import time

import httpx

from doctor.lab.loop_server import LoopServer

#: persona -> the response headers it adds (or replaces) on every answer.
PERSONAS: dict[str, dict[str, str]] = {
    "envoy": {"server": "envoy", "x-envoy-upstream-service-time": "3"},
    "kong": {"via": "1.1 kong/3.6.0", "x-kong-upstream-latency": "3", "x-kong-proxy-latency": "1"},
    "litellm": {"x-litellm-call-id": "3f1c0a52-7d1e-4d38-9a57-0c9f1b2e4d61", "x-litellm-model-id": "vllm-1",
                "x-litellm-callback-duration-ms": "0.4"},
    "cloudflare": {"server": "cloudflare", "cf-ray": "8d1f2a3b4c5d6e7f-AMS"},
    "aws-alb": {"x-amzn-trace-id": "Root=1-67a1b2c3-0123456789abcdef01234567"},
    "traefik": {},  # Traefik sends no header of its own: named only by --gateway-kind
}
#: Hop-by-hop or framing headers the relay sets itself.
DROPPED = ("transfer-encoding", "content-length", "connection", "keep-alive")


class GatewayPersona(LoopServer):
    """Serves on 127.0.0.1 from a private event loop thread (``LoopServer``); ``url`` once started."""

    def __init__(self, persona: str, upstream: str, *, buffer: int = 0, idle: float | None = None,
                 delay: float = 0.0) -> None:
        super().__init__(name=f"gateway-{persona}")
        self.persona, self.upstream = persona, upstream.rstrip("/")
        self.buffer, self.idle, self.delay = buffer, idle, delay
        self._client: httpx.AsyncClient | None = None

    async def setup(self) -> None:
        self._client = httpx.AsyncClient(timeout=httpx.Timeout(30.0))

    async def teardown(self) -> None:
        assert self._client is not None
        await self._client.aclose()

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        method, target, _ = head[0].split(" ", 2)
        headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in head[1:] if ln)}
        body = await reader.readexactly(int(headers.get("content-length", "0") or 0))
        try:
            await self._relay(writer, method, target, headers, body)
        except httpx.HTTPError:
            return

    async def _relay(self, writer: asyncio.StreamWriter, method: str, target: str, headers: dict[str, str],
                     body: bytes) -> None:
        assert self._client is not None
        started = time.perf_counter()
        await asyncio.sleep(self.delay)
        own_ms = (time.perf_counter() - started) * 1000.0
        forward = {k: v for k, v in headers.items() if k not in ("host", "connection", "content-length")}
        request = self._client.build_request(method, self.upstream + target, headers=forward, content=body)
        response = await self._client.send(request, stream=True)
        try:
            out = {k.lower(): v for k, v in response.headers.items() if k.lower() not in DROPPED}
            out |= PERSONAS[self.persona]
            if self.persona == "litellm":
                out["x-litellm-overhead-duration-ms"] = f"{own_ms:.3f}"
            lines = [f"HTTP/1.1 {response.status_code} {response.reason_phrase}",
                     *(f"{k}: {v}" for k, v in out.items()), "transfer-encoding: chunked", "connection: close"]
            writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
            await writer.drain()
            held = b""
            chunks = response.aiter_raw()
            while True:
                try:
                    chunk = await asyncio.wait_for(anext(chunks), self.idle)
                except StopAsyncIteration:
                    break
                except TimeoutError:
                    return  # the idle timeout: close without the last chunk
                held += chunk
                if self.buffer >= 0 and len(held) >= self.buffer:
                    await _send_chunk(writer, held)
                    held = b""
            if held:
                await _send_chunk(writer, held)
            writer.write(b"0\r\n\r\n")
            await writer.drain()
        finally:
            await response.aclose()


async def _send_chunk(writer: asyncio.StreamWriter, data: bytes) -> None:
    writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
    await writer.drain()
