"""Write the fixture bundles of the application-edge checks (LD306 stream-reframed, LD307 headers-held).

Run ``.venv/bin/python -m tests.support.make_check_fixtures_edge``. Synthetic, shaped on what the
real FastAPI edges of ``tests/probes/test_fastapi_edges.py`` measure: the playbook's edge answers in raw
text chunks, and a Starlette ``GZipMiddleware`` sends its headers with the first body.
"""

from __future__ import annotations

import sys

from doctor.evidence import RequestTrace, StreamEvidence
from tests.support.bundles import bundle, request, stream
from tests.support.write_fixture import write_all, write_case

SSE = {"content-type": "text/event-stream; charset=utf-8", "server": "uvicorn"}
GZIP = {"content-type": "text/plain; charset=utf-8", "content-encoding": "gzip", "server": "uvicorn"}
GAPS = [0.02] * 15


def pair(gateway_framing: str | None, *, direct_framing: str | None = "openai-sse", gateway_headers_delay: float = 0.01, direct_headers_delay: float = 0.01,
         ttft: float = 0.2, gateway_headers: dict[str, str] | None = None, gateway_kind: str | None = None,
         gateway_ttft: float | None = None) -> StreamEvidence:
    """Three requests per path; the gateway's headers ``gateway_headers_delay`` after the send, its
    first token ``gateway_ttft`` after it (``ttft``, as direct, by default)."""
    reqs: list[RequestTrace] = []
    for path, framing, delay, start in (("direct", direct_framing, direct_headers_delay, 0.0),
                                        ("gateway", gateway_framing, gateway_headers_delay, 10.0)):
        for i in range(3):
            first = gateway_ttft if path == "gateway" and gateway_ttft is not None else ttft
            req = request(path, i, ttft=first + 0.01 * i, gaps=GAPS, start=start + 2.0 * i, headers_delay=delay,
                          headers=SSE if path == "direct" else (gateway_headers or SSE))
            req.framing, req.tokens_estimated = framing, framing == "raw"
            reqs.append(req)
    ev = stream(reqs)
    ev.shape.gateway_route = "POST /chat?prompt={prompt}"
    ev.shape.gateway_kind = gateway_kind
    return ev


def cases_stream_reframed() -> None:
    name = "stream-reframed"
    write_case(name, "fires-raw-text-edge", bundle(stream=pair("raw")),
               why="Synthetic: the direct path streams OpenAI SSE, the playbook-like edge raw text chunks.",
               expect={"severity": "info", "setting": "gateway_framing", "summary_contains": ["raw text", "estimated"]})
    write_case(name, "fires-ndjson-edge", bundle(stream=pair("ndjson")),
               why="Synthetic: an NDJSON edge in front of vLLM; token counts are per line, not estimated.",
               expect={"severity": "info", "setting": "gateway_framing", "summary_contains": ["NDJSON"]})
    write_case(name, "quiet-sse-relayed", bundle(stream=pair("openai-sse")),
               why="Synthetic: the gateway relays vLLM's OpenAI SSE unchanged.")
    write_case(name, "na-old-bundle", bundle(stream=pair(None, direct_framing=None)),
               why="Synthetic: a bundle from before framing detection records no framing.")
    write_case(name, "na-gateway-only", bundle(stream=stream([r for r in pair("raw").requests if r.path == "gateway"])),
               why="Only the gateway was probed: nothing to compare its framing with.")


def cases_headers_held() -> None:
    name = "headers-held"
    write_case(name, "fires-gzip-middleware", bundle(stream=pair("raw", gateway_headers_delay=1.0, gateway_headers=GZIP)),
               why="Synthetic, as the real GZipMiddleware edge measures: the gateway's headers arrive with the "
               "first token, vLLM's 190 ms before it. Edge and engine both say `server: uvicorn`, so no header "
               "names the edge: an unidentified gateway, with the usual suspects' settings.",
               expect={"severity": "warning", "setting": "gateway_response_start", "felt": False,
                       "summary_contains": ["with the first token", "an unidentified gateway", "a risk users do not feel yet"]})
    write_case(name, "fires-felt-first-token-later",
               bundle(stream=pair("raw", gateway_headers_delay=1.0, gateway_headers=GZIP, gateway_ttft=0.6)),
               why="Synthetic: the same held headers, and the gateway's first token 400 ms after the direct one's: "
               "users feel it (felt), so it may make the verdict's class.",
               expect={"severity": "warning", "setting": "gateway_response_start", "felt": True})
    write_case(name, "fires-named-by-gateway-kind",
               bundle(stream=pair("raw", gateway_headers_delay=1.0, gateway_headers={"content-type": "text/plain"},
                                  gateway_kind="fastapi")),
               why="Synthetic: no Server header; --gateway-kind fastapi names the edge in the remediation.",
               expect={"severity": "warning", "setting": "gateway_response_start", "felt": False,
                       "summary_contains": ["fastapi"]})
    write_case(name, "fires-stock-nginx-uncompressed",
               bundle(stream=pair("openai-sse", gateway_headers_delay=1.0,
                                  gateway_headers={**SSE, "server": "nginx/1.22.1"})),
               why="Synthetic, as a stock nginx answers (issue 30 item 12): no Content-Encoding, so its gzip is "
               "off or leaves the stream alone; the remediation leads with proxy_buffering, not `gzip off;`.",
               expect={"severity": "warning", "setting": "gateway_response_start", "felt": False,
                       "summary_contains": ["nginx"]})
    write_case(name, "quiet-headers-early", bundle(stream=pair("raw")),
               why="Synthetic: the edge sends its headers at once, as the playbook-like edge does.")
    lagged = pair("raw", gateway_headers_delay=1.0)
    for req in lagged.requests[3:5]:  # two of three gateway requests got their headers at once
        req.t_headers = req.t_scheduled + 0.01
    write_case(name, "quiet-client-lag-in-some-requests", bundle(stream=lagged),
               why="Synthetic: headers and first token stamped together in one gateway request only, as a client "
               "whose event loop stalled stamps them; an edge that holds headers holds them in every request.")
    write_case(name, "na-engine-sends-late", bundle(stream=pair("raw", direct_headers_delay=1.0)),
               why="Synthetic: the direct path's headers come with its first token too; nothing to compare.")


def main() -> None:
    write_all(sys.modules[__name__])


if __name__ == "__main__":
    main()
