"""Write the fixture bundles of the gateway's own limits and retries (LD309, LD310), and its hold (LD315).

Run ``.venv/bin/python -m tests.support.make_check_fixtures_gateway_limits``. Synthetic, shaped as
the real HAProxy and nginx reproductions of ``tests/checks/test_gateway_limits.py`` recorded them: the
refusal pages are nginx 1.22's and HAProxy 2.6's own, the headers Envoy's.
"""

from __future__ import annotations

import sys

from doctor.evidence import RequestTrace, StreamEvidence
from tests.support.bundles import bundle, metrics, request, stream, traced
from tests.support.make_check_fixtures_proxy import NGINX, SSE, UVICORN, paths
from tests.support.write_fixture import write_all, write_case

NGINX_502 = ("<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1>"
             "</center>\r\n<hr><center>nginx/1.22.1</center>\r\n</body>\r\n</html>\r\n")
NGINX_504 = NGINX_502.replace("502 Bad Gateway", "504 Gateway Time-out")
HTML = {"content-type": "text/html", "server": "nginx/1.22.1"}
ENVOY_503 = "upstream connect error or disconnect/reset before headers. reset reason: overflow"
GAPS = [0.03] * 8
ANSWER = 0.05 + sum(GAPS)  # one whole answer


def refused(req: RequestTrace, status: int, headers: dict[str, str], body: str, after: float = 0.002) -> RequestTrace:
    """``req`` answered by the gateway itself with ``status`` ``after`` seconds after its send."""
    req.outcome, req.status, req.headers, req.body_excerpt = "http-status", status, headers, body
    req.error, req.t_headers = f"HTTP {status}", req.t_sent + after if req.t_sent is not None else None
    req.t_end = req.t_headers
    return req


def capped(headers: dict[str, str], kind: str | None = None) -> StreamEvidence:
    """Concurrency 4 through a gateway that lets one stream through: a staircase of whole answers."""
    ev = paths([0.05, 0.051, 0.052, 0.053], [0.05 + k * ANSWER for k in range(4)], gaps=GAPS, concurrency=4,
               gateway_headers=headers)
    ev.shape.gateway_kind = kind
    return ev


def engine(running: float, waiting: float = 0.0, length: int = 0, abort: int = 0, prompts: int = 0) -> dict[str, object]:
    return {"vllm:num_requests_running": running, "vllm:num_requests_waiting": waiting,
            "vllm:request_success_total": {"length": length, "abort": abort},
            "vllm:prompt_tokens_total": 38 * prompts}


def refusing(status: int, headers: dict[str, str], body: str, answered: dict[str, str] = NGINX,
             n: int = 3) -> StreamEvidence:
    """Concurrency 4: the first gateway requests ``answered`` with these headers, the last ``n`` refused at once."""
    ev = paths([0.05, 0.051, 0.052, 0.053], [0.05] * 4, gaps=GAPS, concurrency=4, gateway_headers=answered)
    for req in ev.requests[8 - n:]:
        refused(req, status, headers, body)
    return ev


def cases_gateway_connection_cap() -> None:
    name = "gateway-connection-cap"
    window = metrics(("before", -0.1, engine(0)), ("during", 100.2, engine(1, length=4, prompts=5)),
                     ("during", 100.6, engine(1, length=5, prompts=6)), ("after", 102.0, engine(0, length=8, prompts=8)))
    write_case(
        name,
        "fires-haproxy-maxconn-queue",
        bundle(stream=capped(UVICORN, "haproxy"), metrics=window),
        why="Shaped as the real HAProxy reproduction (`maxconn 1` on the server line, --gateway-kind haproxy): at "
        "concurrency 4 the gateway's TTFTs step by one answer while direct stays ~50 ms; the engine's waiting "
        "gauge stays 0 and it runs one gateway stream while the probe has four open.",
        expect={"severity": "critical", "setting": "maxconn", "summary_contains": ["ran at most 1 gateway stream"]},
    )
    write_case(
        name,
        "fires-nginx-max-conns-502",
        bundle(stream=refusing(502, HTML, NGINX_502),
               metrics=metrics(("before", -0.1, engine(0)), ("after", 102.0, engine(0, length=5, prompts=5)))),
        why="Shaped as the real nginx reproduction (`max_conns=1` on the upstream server): three of four "
        "concurrent gateway requests get nginx's own 502 page at once, the direct ones are answered, and the "
        "engine took in 5 of the 8 requests sent.",
        expect={"severity": "critical", "setting": "max_conns", "summary_contains": ["never reached it"]},
    )
    envoy = {"content-type": "text/plain", "server": "envoy", "x-envoy-overloaded": "true"}
    write_case(
        name,
        "fires-envoy-circuit-breaker",
        bundle(stream=refusing(503, envoy, ENVOY_503, {**SSE, "server": "envoy", "x-envoy-upstream-service-time": "3"})),
        why="Synthetic, Envoy's own answer over a circuit breaker (envoy#11908): 503 with x-envoy-overloaded: true "
        "and 'reset reason: overflow'; no /metrics.",
        expect={"severity": "critical", "setting": "circuit_breakers"},
    )
    engine_503 = '{"error": {"message": "Too many requests queued", "type": "ServiceUnavailable", "code": 503}}'
    write_case(
        name,
        "quiet-engine-own-503",
        bundle(stream=refusing(503, {"content-type": "application/json", "server": "nginx/1.22.1"}, engine_503, n=2)),
        why="Synthetic: the 503s are the engine's own JSON passed on by nginx (vLLM's admission limit), and the "
        "answered requests do not queue: no gateway limit.",
    )
    write_case(
        name,
        "quiet-engine-queues",
        bundle(stream=capped(UVICORN, "haproxy"),
               metrics=metrics(("before", -0.1, engine(0)), ("during", 100.2, engine(1, waiting=3)),
                               ("after", 102.0, engine(0, length=8)))),
        why="Synthetic: the same staircase through HAProxy, but the engine's waiting gauge reaches 3: the queue "
        "is the engine's.",
    )
    write_case(
        name,
        "na-direct-only",
        bundle(stream=paths([0.05, 0.06], [], gaps=GAPS)),
        why="Only the direct path was probed.",
    )


def cases_gateway_retries() -> None:
    name = "gateway-retries"
    ev = paths([0.65, 0.66], [0.5, 0.5], gaps=GAPS, gateway_headers=NGINX)
    for req in ev.requests[2:]:
        refused(req, 504, HTML, NGINX_504, after=0.5)
    for req in ev.requests[:2]:
        req.prompt_tokens = 38
    write_case(
        name,
        "fires-nginx-timeout-retries",
        bundle(stream=ev, metrics=metrics(("before", -0.1, engine(0)),
                                          ("after", 106.0, engine(1, length=2, abort=3, prompts=6)))),
        why="Shaped as the real nginx reproduction (`proxy_next_upstream error timeout non_idempotent`, "
        "`proxy_read_timeout 250ms`, two upstream servers on one engine whose headers take 0.6 s): each gateway "
        "request ends in nginx's 504 after two tries of 250 ms; the engine, idle before, took in 6 requests for "
        "the 4 sent, 3 of them aborted and one still running.",
        expect={"severity": "critical", "setting": "proxy_next_upstream",
                "summary_contains": ["2.0 engine requests per gateway request", "exact"]},
    )
    envoy = {**SSE, "server": "envoy", "x-envoy-attempt-count": "3"}
    ev = paths([0.1, 0.1, 0.1], [0.4, 0.4, 0.4], gaps=GAPS, gateway_headers=envoy)
    write_case(
        name,
        "fires-envoy-attempts-under-other-load",
        bundle(stream=ev, metrics=metrics(("before", -0.1, engine(2)), ("after", 106.0, engine(2, length=10)))),
        why="Synthetic: Envoy reports x-envoy-attempt-count: 3 and the engine finished 10 requests for the 6 sent, "
        "but it was already running 2 others as the probe began: a share, corroborated by the header.",
        expect={"severity": "warning", "setting": "retry_policy", "summary_contains": ["a share"]},
    )
    ev = paths([0.1, 0.1], [0.12, 0.12], gaps=GAPS, gateway_headers=NGINX)
    write_case(
        name,
        "quiet-one-engine-request-per-request",
        bundle(stream=ev, metrics=metrics(("before", -0.1, engine(0)), ("after", 106.0, engine(0, length=4)))),
        why="Synthetic: the engine took in exactly the 4 requests the probe sent.",
    )
    write_case(
        name,
        "na-direct-only",
        bundle(stream=paths([0.1, 0.1], [], gaps=GAPS),
               metrics=metrics(("before", -0.1, engine(0)), ("after", 6.0, engine(0, length=2)))),
        why="Only the direct path was probed: extra requests could not be told from other clients'.",
    )
    write_case(
        name,
        "missing-no-metrics",
        bundle(stream=paths([0.1], [0.1], gaps=GAPS, gateway_headers=NGINX)),
        why="No /metrics: the engine's request counter is the evidence.",
    )


def joined(ttfts: list[float], path: str = "gateway", kind: str | None = "haproxy") -> StreamEvidence:
    """One request every 2 s on ``path`` (concurrency 4 in the probe's shape), for ``traced`` spans."""
    ev = stream([request(path, i, ttft=t, gaps=[0.03] * 7, start=i * 2.0, headers=UVICORN) for i, t in enumerate(ttfts)],
                concurrency=4)
    ev.shape.gateway_kind = kind if path == "gateway" else None
    return ev


def cases_slow_requests_held_before_the_engine() -> None:
    name = "slow-requests-held-before-the-engine"
    ttfts = [0.2] * 18 + [1.4, 1.31]
    held = joined(ttfts)
    write_case(
        name,
        "fires-haproxy-held-the-slow-requests",
        bundle(stream=held, traces=traced(held, {}, held={18: 1.15, 19: 1.06}, gateway="haproxy")),
        why="Synthetic, through HAProxy (--gateway-kind haproxy) exporting its own span: 18 gateway requests at 0.2 s, "
        "2 at 1.4 s and 1.31 s whose engine spans start 1.15 s and 1.06 s after the send, inside HAProxy's span "
        "(a maxconn queue): 79 % of their TTFT before the engine against 1 % for the other 18 -> maxconn",
        expect={"severity": "warning", "setting": "maxconn", "summary_contains": ["2 slowest of 20", "#18", "haproxy"]},
    )
    unseen = joined(ttfts, kind=None)
    write_case(
        name,
        "fires-unidentified-gateway-without-span",
        bundle(stream=unseen, traces=traced(unseen, {}, held={18: 1.15, 19: 1.06})),
        why="The same hold through a gateway no header names and that sends no span: the time is between the "
        "client's send and the engine's arrival (the gateway or the network); the remediation is the generic "
        "connection limit and says how to turn the gateway's tracing on",
        expect={"severity": "warning", "setting": "gateway connection limit",
                "summary_contains": ["gateway or the network"]},
    )
    nginx = joined(ttfts, kind="nginx")
    write_case(
        name,
        "fires-nginx-held-generic-limit",
        bundle(stream=nginx, traces=traced(nginx, {}, held={18: 1.15, 19: 1.06}, gateway="nginx")),
        why="The same hold in nginx's own span (--gateway-kind nginx): open-source nginx's max_conns refuses with "
        "502 rather than queueing, so the advice is the generic connection limit under nginx's name",
        expect={"severity": "warning", "setting": "gateway connection limit", "summary_contains": ["nginx"]},
    )
    alike = joined([1.0] * 8 + [1.2, 1.1])
    write_case(
        name,
        "quiet-every-request-held-alike",
        bundle(stream=alike, traces=traced(alike, {}, held=dict.fromkeys(range(10), 0.8))),
        why="every gateway request reached the engine 0.8 s after its send (the 2 slowest too, 70 % of their TTFT "
        "against 80 % for the rest): a hop every request pays (the network, the gateway's own overhead), not a few held",
    )
    queued = joined(ttfts)
    write_case(
        name,
        "quiet-slow-requests-queued-in-the-engine",
        bundle(stream=queued, traces=traced(queued, {18: 1.12, 19: 1.05}, gateway="haproxy")),
        why="the 2 slow gateway requests reached the engine at once and waited 1.12 s and 1.05 s in its queue: "
        "slow-requests-queued (LD110) names it",
    )
    direct = joined(ttfts, path="direct")
    write_case(
        name,
        "na-direct-only",
        bundle(stream=direct, traces=traced(direct, {}, held={18: 1.15, 19: 1.06})),
        why="only the direct path was probed: the time before the engine is the network's alone",
    )
    skewed = joined(ttfts)
    spans = traced(skewed, {}, held={18: 1.15, 19: 1.06})
    spans.spans[0].start_ns -= 5_000_000_000  # one request's span 5 s early: no one offset fits every request
    spans.spans[0].end_ns -= 5_000_000_000
    write_case(
        name,
        "na-clocks-disagree",
        bundle(stream=skewed, traces=spans),
        why="one span lies 5 s before its request's send while the others start after theirs: no one clock offset "
        "fits, so the time before the engine cannot be told from the clocks' difference",
    )
    bare = joined(ttfts)
    traced(bare, {})  # the requests carried their traceparent; no span came back
    write_case(name, "missing-no-spans", bundle(stream=bare),
               why="no OTLP receiver ran (no --otlp-listen): the join is missing, and says how to turn tracing on")


def main() -> None:
    write_all(sys.modules[__name__])


if __name__ == "__main__":
    main()
