"""Write the fixture bundles of the proxy-only checks (LD301-LD305, LD308).

Run ``.venv/bin/python -m tests.support.make_check_fixtures_proxy``. The strongest cases are the
real nginx traces (``fixtures/real-vllm/nginx``, converted by ``tests.support.nginx_traces``);
the synthetic ones cover what those recordings do not (other proxies, concurrency, timeouts).
"""

from __future__ import annotations

import sys

from doctor.evidence import RequestTrace, StreamEvidence
from tests.support import nginx_traces
from tests.support.bundles import bundle, request, stream
from tests.support.write_fixture import write_all, write_case

SSE = {"content-type": "text/event-stream; charset=utf-8", "transfer-encoding": "chunked"}
UVICORN = {**SSE, "server": "uvicorn"}
NGINX = {**SSE, "server": "nginx/1.22.1"}
KEEP_TOKENS = 32
REAL = (
    "real vLLM 0.32.0 (CPU) traces from fixtures/real-vllm/nginx: direct.chat.jsonl as the direct "
    "path and {case}.chat.jsonl as the gateway path (nginx.conf there has the configuration); "
    "each request kept up to the first read boundary after 32 token events"
)



def fastapi_edge(ev: StreamEvidence) -> StreamEvidence:
    """``--gateway-kind fastapi``: an edge whose ``server: uvicorn`` is the engine's own header too."""
    ev.shape.gateway_kind = "fastapi"
    return ev

def real(
    case: str, *, keep_requests: int | None = None, gateway_keep_tokens: int | None = None
) -> StreamEvidence:
    ev = nginx_traces.direct_vs(case, keep_tokens=KEEP_TOKENS, gateway_keep_tokens=gateway_keep_tokens)
    if keep_requests is not None:
        by_path: dict[str, int] = {}
        kept = []
        for req in ev.requests:
            by_path[req.path] = by_path.get(req.path, 0) + 1
            if by_path[req.path] <= keep_requests:
                kept.append(req)
        ev.requests = kept
    return ev


def paths(
    direct_ttfts: list[float],
    gateway_ttfts: list[float],
    *,
    gaps: list[float],
    concurrency: int = 1,
    wave_every: float = 0.0,
    gateway_headers: dict[str, str] | None = None,
    burst_bytes: int | None = None,
) -> StreamEvidence:
    """Direct then gateway requests; with ``concurrency`` > 1 they start in waves of that size."""
    reqs: list[RequestTrace] = []
    for path, ttfts in (("direct", direct_ttfts), ("gateway", gateway_ttfts)):
        base = 0.0 if path == "direct" else 100.0
        for i, ttft in enumerate(ttfts):
            start = base + (i // concurrency) * wave_every if concurrency > 1 else base + i * 5.0
            headers = (
                gateway_headers
                if path == "gateway" and gateway_headers
                else ({**SSE, "server": "uvicorn"} if path == "direct" else NGINX)
            )
            reqs.append(
                request(
                    path,
                    len(reqs),
                    ttft=ttft,
                    gaps=gaps,
                    start=start,
                    headers=headers,
                    burst_bytes=burst_bytes if path == "gateway" else None,
                )
            )
    return stream(reqs, concurrency=concurrency)


def cut_after(req: RequestTrace, keep_tokens: int, idle: float) -> RequestTrace:
    """The same request, closed by the gateway ``idle`` seconds after its last kept read."""
    req.tokens = req.tokens[:keep_tokens]
    req.reads = req.reads[:keep_tokens]
    last = req.reads[-1].t if req.reads else (req.t_headers or req.t_scheduled)
    req.t_last_token = req.tokens[-1].t if req.tokens else None
    req.t_end = last
    req.t_failed = last + idle
    req.outcome = "cut"
    req.error = "peer closed connection without sending complete message body (incomplete chunked read)"
    req.completion_tokens = len(req.tokens)
    req.finish_reason = None
    return req


def cases_proxy_buffering() -> None:
    name = "proxy-buffering"
    write_case(
        name,
        "fires-real-nginx-relay-16k",
        bundle(stream=real("relay-16k", keep_requests=1, gateway_keep_tokens=120)),
        why=REAL.format(case="relay-16k") + " (first request of each path; the gateway one kept to 120 token "
        "events, two 16 KiB reads). nginx with proxy_buffer_size 16k relays 16 KiB bursts.",
        expect={
            "severity": "critical",
            "setting": "proxy_buffering",
            "summary_contains": ["66.5 events per read"],
        },
    )
    for case, severity in (("relay-default", "critical"), ("xaccel-ignored", "critical")):
        write_case(
            name,
            f"fires-real-nginx-{case}",
            bundle(stream=real(case)),
            why=REAL.format(case=case) + f". nginx relays {case} in buffer-sized bursts.",
            expect={
                "severity": severity,
                "setting": "proxy_buffering",
                "summary_contains": ["events per read", "TTFT p50"],
            },
        )
    write_case(
        name,
        "fires-real-nginx-gzip-buffered",
        bundle(stream=real("gzip-buffered", keep_requests=1)),
        why=REAL.format(case="gzip-buffered") + " (first request of each path only, to stay small): "
        "gzip behind default buffering delivers the whole answer in one read; a warning, as "
        "stream-compression (LD302) names the more specific cause.",
        expect={
            "severity": "warning",
            "setting": "proxy_buffering",
            "summary_contains": ["one piece", "gzip-compressed"],
        },
    )
    for case in ("default", "buffering-off"):
        write_case(
            name,
            f"quiet-real-nginx-{case}",
            bundle(stream=real(case)),
            why=REAL.format(case=case) + ". A chunked vLLM upstream flows through nginx one token per read.",
        )
    for case, headers, kind, setting, why in (
        ("envoy-ext-proc", {**SSE, "server": "envoy", "x-envoy-upstream-service-time": "12"}, None,
         "ext_proc processing_mode.response_body_mode", ("an Envoy gateway (server: envoy, "
         "x-envoy-upstream-service-time) releasing 2 KiB bursts: its ext_proc body mode is named")),
        ("kong-via", {**SSE, "server": "uvicorn", "via": "1.1 kong/3.6.0", "x-kong-proxy-latency": "1"}, None,
         "response_buffering", ("Kong (via: kong, x-kong-*) in front of vLLM, whose server: uvicorn passes "
         "through: Kong's Route response_buffering is named, not a Python edge")),
        ("f5-ingress-kind", NGINX, "f5-nginx-ingress", "nginx.org/proxy-buffering", ("nginx headers, "
         "and --gateway-kind f5-nginx-ingress: F5's annotation is named (headers alone cannot tell)")),
        ("community-ingress-kind", NGINX, "ingress-nginx", "nginx.ingress.kubernetes.io/proxy-buffering",
         "nginx headers, and --gateway-kind ingress-nginx: the community annotation, which is off by default"),
        ("cloudflare-cf-ray", {"content-type": "text/plain", "server": "cloudflare", "cf-ray": "8d1f2a3b4c5d6e7f-AMS"},
         None, "Content-Type", ("Cloudflare (server: cloudflare, cf-ray) in front of a stream sent as text/plain, "
         "which Cloudflare's tunnels buffer")),
    ):
        ev = paths([0.1] * 2, [0.1] * 2, gaps=[0.03] * 21, burst_bytes=2048, gateway_headers=headers)
        ev.shape.gateway_kind = kind
        write_case(
            name,
            f"fires-{case}",
            bundle(stream=ev),
            why=f"Synthetic: {why}. Bursts of 11 events, TTFT 4x direct: a warning.",
            expect={"severity": "warning", "setting": setting},
        )
    direct_only = real("default")
    direct_only.requests = [r for r in direct_only.requests if r.path == "direct"]
    write_case(
        name,
        "na-direct-only",
        bundle(stream=direct_only),
        why=REAL.format(case="default") + ", direct requests only: nothing to compare the gateway with.",
    )


def cases_stream_compression() -> None:
    name = "stream-compression"
    write_case(
        name,
        "fires-real-nginx-gzip-buffered",
        bundle(stream=real("gzip-buffered", keep_requests=1)),
        why=REAL.format(case="gzip-buffered") + " (first request of each path only): `gzip on; gzip_types "
        "text/event-stream;` behind default buffering, whole answers in one read.",
        expect={"severity": "critical", "setting": "gzip", "felt": True, "summary_contains": ["Content-Encoding: gzip"]},
    )
    write_case(
        name,
        "fires-uvicorn-gzip-middleware",
        bundle(stream=fastapi_edge(paths([0.1] * 2, [0.12] * 2, gaps=[0.03] * 12,
                                         gateway_headers={**UVICORN, "content-encoding": "gzip"}))),
        why="Synthetic: a FastAPI edge (Server: uvicorn) whose GZipMiddleware compresses the stream but "
        "still flushes per event, 20 ms over the direct TTFT: a warning naming the middleware, and a risk "
        "(tokens flow as direct), not yet felt. vLLM says `server: uvicorn` too, so only `--gateway-kind fastapi` "
        "names the edge.",
        expect={"severity": "warning", "setting": "GZipMiddleware", "felt": False},
    )
    write_case(
        name,
        "quiet-real-nginx-default",
        bundle(stream=real("default")),
        why=REAL.format(case="default") + ". No Content-Encoding on the stream.",
    )
    failed = [request(p, i, ttft=0, gaps=[], outcome="connect") for i, p in enumerate(("direct", "gateway"))]
    write_case(
        name,
        "na-every-request-failed",
        bundle(stream=stream(failed)),
        why="Every request failed to connect: no response headers to read.",
    )


def cases_gateway_serialisation() -> None:
    name = "gateway-serialisation"
    answer = 0.1 + 8 * 0.15  # TTFT + 8 gaps: one whole answer
    staircase = [0.1 + k * answer for k in range(3)]
    write_case(
        name,
        "fires-blocking-edge-staircase",
        bundle(
            stream=paths(
                [0.1, 0.11, 0.12], staircase, gaps=[0.15] * 8, concurrency=3, gateway_headers=UVICORN
            )
        ),
        why="Synthetic: concurrency 3, an edge that streams one upstream answer at a time: gateway TTFTs "
        "0.1, 1.4, 2.7 s in one wave while direct stays ~0.1 s.",
        expect={"severity": "critical", "setting": "gateway_streaming", "summary_contains": ["step"]},
    )
    haproxy = paths([0.1, 0.11, 0.12], staircase, gaps=[0.15] * 8, concurrency=3, gateway_headers=UVICORN)
    haproxy.shape.gateway_kind = "haproxy"
    write_case(
        name,
        "quiet-haproxy-queues-on-its-maxconn",
        bundle(stream=haproxy),
        why="Synthetic: the same staircase through HAProxy (--gateway-kind haproxy), which queues on its own "
        "`maxconn`: gateway-connection-cap (LD309) names it.",
    )
    write_case(
        name,
        "quiet-async-edge",
        bundle(stream=paths([0.1, 0.11, 0.12], [0.12, 0.13, 0.14], gaps=[0.15] * 8, concurrency=3)),
        why="Synthetic: concurrency 3, the gateway adds ~20 ms to every request alike.",
    )
    write_case(
        name,
        "na-sequential-probe",
        bundle(stream=real("relay-default")),
        why=REAL.format(case="relay-default") + ". Concurrency 1: serialisation cannot show.",
    )


def cases_gateway_overhead() -> None:
    name = "gateway-overhead"
    write_case(
        name,
        "fires-constant-hop",
        bundle(stream=paths([0.08, 0.09, 0.1], [0.28, 0.3, 0.29], gaps=[0.03] * 8)),
        why="Synthetic: every gateway request gets its first token ~200 ms later than direct, tokens still "
        "one per read.",
        expect={"severity": "warning", "setting": "gateway_hop", "summary_contains": ["adds"]},
    )
    write_case(
        name,
        "quiet-real-nginx-default",
        bundle(stream=real("default")),
        why=REAL.format(case="default") + ". nginx adds nothing measurable.",
    )
    write_case(
        name,
        "quiet-real-nginx-relay-default-is-buffering",
        bundle(stream=real("relay-default")),
        why=REAL.format(case="relay-default")
        + ". The added TTFT comes with bursts: LD301's, not this check's.",
    )
    only_gw = paths([], [0.3, 0.3], gaps=[0.03] * 10)
    write_case(name, "na-gateway-only", bundle(stream=only_gw), why="Only the gateway was probed.")


def cases_proxy_read_timeout() -> None:
    name = "proxy-read-timeout"
    ev = paths([0.1] * 2, [0.1] * 3, gaps=[0.03] * 8 + [70.0] + [0.03] * 3, gateway_headers=NGINX)
    gateway = [r for r in ev.requests if r.path == "gateway"]
    cut_after(gateway[1], 9, 60.0)
    cut_after(gateway[2], 9, 60.02)
    write_case(
        name,
        "fires-nginx-60s-default",
        bundle(stream=ev),
        why="Synthetic: vLLM pauses 70 s mid-answer (e.g. a preemption stall); direct answers finish, "
        "two gateway answers are cut 60 s after their last read (nginx default proxy_read_timeout).",
        expect={"severity": "critical", "setting": "proxy_read_timeout", "summary_contains": ["cut after"]},
    )
    both = paths([0.1] * 2, [0.1] * 2, gaps=[0.03] * 8 + [70.0] + [0.03] * 3, gateway_headers=NGINX)
    for req in both.requests:
        cut_after(req, 9, 60.0)
    write_case(
        name,
        "quiet-direct-cut-too",
        bundle(stream=both),
        why="Synthetic: the direct requests are cut the same way: the gateway is not the cause.",
    )
    write_case(
        name,
        "quiet-real-nginx-default",
        bundle(stream=real("default")),
        why=REAL.format(case="default") + ". No request cut.",
    )
    direct_only = paths([0.1] * 2, [], gaps=[0.03] * 10)
    write_case(name, "na-direct-only", bundle(stream=direct_only), why="Only the direct path was probed.")
    for case, headers, idle, setting, what in (
        ("fires-aws-alb-60s-idle",
         {**SSE, "server": "uvicorn", "x-amzn-trace-id": "Root=1-67a1b2c3-0123456789abcdef01234567"},
         60.0, "idle_timeout.timeout_seconds", "behind an AWS ALB (x-amzn-trace-id) whose default idle timeout is 60 s"),
        ("fires-cloudflare-100s", {**SSE, "server": "cloudflare", "cf-ray": "8d1f2a3b4c5d6e7f-AMS"}, 100.0,
         "Cloudflare proxy read timeout", "behind Cloudflare (cf-ray), whose proxy read timeout is 100 s"),
    ):
        ev = paths([0.1] * 2, [0.1] * 3, gaps=[0.03] * 8 + [idle + 10] + [0.03] * 3, gateway_headers=headers)
        gateway = [r for r in ev.requests if r.path == "gateway"]
        cut_after(gateway[1], 9, idle)
        cut_after(gateway[2], 9, idle + 0.03)
        write_case(
            name,
            case,
            bundle(stream=ev),
            why=f"Synthetic: vLLM pauses {idle + 10:.0f} s mid-answer; two gateway answers are cut {idle:.0f} s "
            f"after their last read, {what}: the hop that cut is named with its own setting.",
            expect={"severity": "critical", "setting": setting, "summary_contains": [f"{idle:.0f}"]},
        )


def cases_litellm_overhead() -> None:
    name = "litellm-overhead"
    litellm = {**UVICORN, "x-litellm-call-id": "3f1c0a52-7d1e-4d38-9a57-0c9f1b2e4d61", "x-litellm-model-id": "vllm-1"}

    def through_litellm(overhead_ms: float, callback_ms: float, ttfts: list[float]) -> StreamEvidence:
        ev = paths([0.12, 0.13, 0.12], ttfts, gaps=[0.03] * 8, gateway_headers=litellm)
        for k, req in enumerate(r for r in ev.requests if r.path == "gateway"):
            req.headers = {**req.headers, "x-litellm-overhead-duration-ms": f"{overhead_ms + k:.3f}",
                           "x-litellm-callback-duration-ms": f"{callback_ms:.3f}"}
        return ev

    write_case(
        name,
        "fires-debug-logging-share",
        bundle(stream=through_litellm(210.0, 4.0, [0.34, 0.35, 0.34])),
        why="Synthetic: LiteLLM (x-litellm-* headers, server: uvicorn) reports ~210 ms of its own overhead per "
        "request against a gateway TTFT of ~340 ms; its callbacks take 4 ms: the logging level is named.",
        expect={"severity": "warning", "setting": "LITELLM_LOG", "summary_contains": ["LiteLLM reports"]},
    )
    write_case(
        name,
        "fires-callbacks",
        bundle(stream=through_litellm(160.0, 130.0, [0.5, 0.52, 0.5])),
        why="Synthetic: LiteLLM's overhead ~160 ms of a 500 ms TTFT, 130 ms of it in callbacks "
        "(x-litellm-callback-duration-ms): an info naming the callbacks.",
        expect={"severity": "info", "setting": "callbacks"},
    )
    write_case(
        name,
        "quiet-small-overhead",
        bundle(stream=through_litellm(3.0, 0.5, [0.13, 0.14, 0.13])),
        why="Synthetic: LiteLLM reports ~3 ms of its own per request: nothing to do.",
    )
    write_case(
        name,
        "na-not-litellm",
        bundle(stream=real("default")),
        why=REAL.format(case="default") + ". nginx sends no x-litellm-overhead-duration-ms header.",
    )


def main() -> None:
    write_all(sys.modules[__name__])


if __name__ == "__main__":
    main()
