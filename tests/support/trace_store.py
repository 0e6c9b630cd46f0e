"""A trace store's query API on 127.0.0.1, answering with the recorded answers of ``fixtures/traces/``.

Each persona serves its product's routes and, for any other path, what the product does there
(``jaeger``: API v3 and the classic API, a 404 page elsewhere; ``jaeger-classic``: a Jaeger before
API v3, whose UI answers unknown paths with its HTML page; ``tempo``: v2 and v1, 404 elsewhere).
A trace is answered with the route's recorded answer, its trace id swapped for the one asked
(in the answer's own spelling: hex, or Tempo's base64), so the spans are the product's real shape
under the probe's ids. Knobs: ``held`` the trace ids it holds (None: every id), ``ingest_after`` the
requests for an id answered 404 before it is held (ingestion delay), ``status`` an error status to
every request, ``token`` a bearer token it requires (401 without), ``echo_auth`` puts the request's
``Authorization`` into a span attribute (a store that repeats a secret), ``body`` a raw 200 body to
every trace request (a malformed answer), ``delay`` seconds before every answer.

``ingest=True`` makes it a store of what it is sent instead: it takes OTLP/HTTP exports (binary
protobuf, ``POST /v1/traces``, as vLLM sends) and answers a trace's OTLP routes with the spans of
that trace, written as the product writes them: Tempo with protobuf's own JSON mapping
(``json_format.MessageToDict``: base64 ids, enum names, as in its recorded answers), Jaeger's API
v3 with hex ids and numeric kinds; the classic Jaeger JSON is not produced (404 there).
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest, ExportTraceServiceResponse

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "traces"

#: persona -> (route prefix, fixture, the trace id as the fixture spells it, how to spell an asked id)
ROUTES: dict[str, list[tuple[str, str, str, str]]] = {
    "jaeger": [("/api/v3/traces/", "jaeger-v3-get-trace.json", "000000000000009600000000000000a0", "hex"),
               ("/api/traces/", "jaeger-api-traces.json", "83a9efd15c1c98a977e0711cc93ee28b", "hex")],
    "jaeger-classic": [("/api/traces/", "jaeger-api-traces.json", "83a9efd15c1c98a977e0711cc93ee28b", "hex")],
    "tempo": [("/api/v2/traces/", "tempo-v2-trace.json", "W47/95gDgQPSabYzgT/HAA==", "base64"),
              ("/api/traces/", "tempo-v1-trace.json", "W47/95gDgQPSabYzgT/HAA==", "base64")],
}
NOT_FOUND = {"jaeger": '{"error":{"httpCode":404,"message":"trace not found"}}',
             "jaeger-classic": '{"data":null,"total":0,"limit":0,"offset":0,"errors":[{"code":404,"msg":"trace not found"}]}',
             "tempo": "trace not found"}


@dataclass
class StoreLog:
    """What the store was asked: each request's path, query and headers."""

    requests: list[tuple[str, dict[str, list[str]], dict[str, str]]] = field(default_factory=list)
    asked: Counter[str] = field(default_factory=Counter)


def _spell(trace_id: str, how: str) -> str:
    return base64.b64encode(bytes.fromhex(trace_id)).decode() if how == "base64" else trace_id


class TraceStoreServer:
    """``with TraceStoreServer("tempo") as store: store.url``: the persona on a free port."""

    def __init__(self, persona: str, *, held: Iterable[str] | None = None, ingest_after: int = 0, status: int | None = None,
                 token: str | None = None, echo_auth: bool = False, body: str | None = None, delay: float = 0.0,
                 ingest: bool = False) -> None:
        self.persona, self.held = persona, set(held) if held is not None else None
        self.ingest_after, self.status, self.token, self.echo_auth, self.body, self.delay = ingest_after, status, token, echo_auth, body, delay
        self.log = StoreLog()
        self.ingested: ExportTraceServiceRequest | None = ExportTraceServiceRequest() if ingest else None
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def answer(self, path: str, headers: dict[str, str]) -> tuple[int, str, str]:
        time.sleep(self.delay)
        if self.status is not None:
            return self.status, "text/plain", f"store error {self.status}"
        if self.token is not None and headers.get("authorization") != f"Bearer {self.token}":
            return 401, "text/plain", "unauthorized"
        for prefix, fixture, recorded, how in ROUTES[self.persona]:
            if not path.startswith(prefix) or "/" in path[len(prefix):]:
                continue
            trace_id = path[len(prefix):]
            with self._lock:
                self.log.asked[trace_id] += 1
                seen = self.log.asked[trace_id]
            if (self.held is not None and trace_id not in self.held) or seen <= self.ingest_after:
                return 404, "application/json", NOT_FOUND[self.persona]
            if self.body is not None:
                return 200, "application/json", self.body
            if self.ingested is not None:
                return self._ingested_answer(fixture, trace_id)
            text = (FIXTURES / fixture).read_text().replace(recorded, _spell(trace_id, how))
            if self.echo_auth:
                data: Any = json.loads(text)
                text = json.dumps(_with_attribute(data, "http.request.header.authorization", headers.get("authorization", "")))
            return 200, "application/json", text
        if self.persona == "jaeger-classic":
            return 200, "text/html", "<!doctype html><html><body>Jaeger UI</body></html>"
        return 404, "text/plain", "404 page not found"

    def ingest(self, body: bytes) -> None:
        """Keep the spans of one OTLP/HTTP export request."""
        assert self.ingested is not None
        message = ExportTraceServiceRequest()
        message.ParseFromString(body)
        with self._lock:
            self.ingested.resource_spans.extend(message.resource_spans)

    def _ingested_answer(self, fixture: str, trace_id: str) -> tuple[int, str, str]:
        """The spans held of one trace, in the answer shape of the route whose recorded answer is ``fixture``."""
        assert self.ingested is not None
        wanted = bytes.fromhex(trace_id)
        trace = ExportTraceServiceRequest()
        with self._lock:
            for resource_spans in self.ingested.resource_spans:
                for scope_spans in resource_spans.scope_spans:
                    spans = [s for s in scope_spans.spans if s.trace_id == wanted]
                    if spans:
                        kept = trace.resource_spans.add()
                        kept.resource.CopyFrom(resource_spans.resource)
                        kept_scope = kept.scope_spans.add()
                        kept_scope.scope.CopyFrom(scope_spans.scope)
                        kept_scope.spans.extend(spans)
        if not trace.resource_spans or fixture == "jaeger-api-traces.json":
            return 404, "application/json", NOT_FOUND[self.persona]
        if self.persona == "tempo":
            tree = json_format.MessageToDict(trace)
            answer: Any = {"batches": tree["resourceSpans"]} if fixture == "tempo-v1-trace.json" else {"trace": tree}
        else:
            tree = json_format.MessageToDict(trace, use_integers_for_enums=True)
            answer = {"result": _hex_ids(tree)}
        return 200, "application/json", json.dumps(answer)

    def __enter__(self) -> TraceStoreServer:
        store = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                headers = {k.lower(): v for k, v in self.headers.items()}
                store.log.requests.append((parts.path, parse_qs(parts.query), headers))
                status, kind, body = store.answer(parts.path, headers)
                data = body.encode()
                try:
                    self.send_response(status)
                    self.send_header("content-type", kind)
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the read-back gave up on a slow answer: its deadline, what the test wants

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                ok = store.ingested is not None and urlsplit(self.path).path == "/v1/traces"
                if ok:
                    store.ingest(body)
                answer = ExportTraceServiceResponse().SerializeToString() if ok else b""
                self.send_response(200 if ok else 404)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()


def _with_attribute(data: Any, key: str, value: str) -> Any:
    """The answer with ``key: value`` added to every span's attributes (OTLP) or tags (Jaeger's JSON)."""
    if isinstance(data, dict):
        if "spanId" in data or "operationName" in data:
            if "operationName" in data:
                data.setdefault("tags", []).append({"key": key, "type": "string", "value": value})
            else:
                data.setdefault("attributes", []).append({"key": key, "value": {"stringValue": value}})
        for v in data.values():
            _with_attribute(v, key, value)
    elif isinstance(data, list):
        for v in data:
            _with_attribute(v, key, value)
    return data


def _hex_ids(data: Any) -> Any:
    """Protobuf's base64 ids written in hex, as Jaeger's API v3 writes them."""
    if isinstance(data, dict):
        return {k: base64.b64decode(v).hex() if k in ("traceId", "spanId", "parentSpanId") and isinstance(v, str)
                else _hex_ids(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_hex_ids(v) for v in data]
    return data
