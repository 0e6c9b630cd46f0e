"""The OTLP/HTTP receiver run during the probe: where the engine's and the gateway's spans arrive.

vLLM started with ``--otlp-traces-endpoint http://HOST:PORT/v1/traces`` (and
``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf``) exports one ``llm_request`` span per
request, in the trace of the request's ``traceparent``; gateways with an OpenTelemetry module do
the same. This receiver takes ``POST /v1/traces`` in both OTLP/HTTP encodings, binary protobuf and
JSON, decoded with the protocol's own generated classes (``opentelemetry-proto``), and keeps the
spans as ``doctor.evidence.traces.Span`` records.

Bounded, because a busy production engine exports every user's requests: at most ``cap`` spans
are kept (the rest are counted in ``dropped`` and reported to the exporter as rejected), a body
over ``MAX_BODY_BYTES`` (compressed or not) is refused, and a payload that does not decode is
answered 400 and counted in ``malformed``: none of it reaches the probe as an exception. The
server runs in its own threads, so the probe's event loop never waits on an exporter.
"""

from __future__ import annotations

import json
import threading
import time
import zlib
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest, ExportTraceServiceResponse

from doctor.evidence.traces import TraceEvidence
from doctor.foundation import wire
from doctor.tracestores.otlp_json import parse_json, spans_of

#: Spans kept per run: a probe sends a few hundred requests at most, and the other users' spans in
#: the window are a sample of the server's distribution, which this many describe well.
MAX_SPANS = 20_000
#: The largest export request taken, before and after decompression: OTLP exporters batch 512
#: spans by default, a few hundred kB.
MAX_BODY_BYTES = 8 * 1024 * 1024
#: How long the receiver waits after the probe for the spans of its requests: vLLM's batch span
#: processor exports every 5 s (``OTEL_BSP_SCHEDULE_DELAY``), so a probe's last spans arrive up to
#: that long after its last answer.
WAIT_S = 6.0
#: Seconds a connection may take to send its request: a client dripping bytes holds one thread, no more.
READ_TIMEOUT_S = 5.0
PATH = "/v1/traces"

class Malformed(ValueError):
    """An export request that does not decode: answered 400, counted, never raised to the probe."""


def decode(body: bytes, content_type: str) -> ExportTraceServiceRequest:
    """The export request in ``body``, binary protobuf or OTLP/JSON by its content type."""
    message = ExportTraceServiceRequest()
    kind = content_type.split(";")[0].strip().lower()
    try:
        if kind == "application/json":
            data = wire.loads(body)
            if not isinstance(data, dict):
                raise Malformed("an OTLP/JSON export request is a JSON object")
            message = parse_json(data)
        elif kind in ("application/x-protobuf", "application/protobuf", ""):
            message.ParseFromString(body)
        else:
            raise Malformed(f"unsupported content type {kind!r}: OTLP/HTTP is application/x-protobuf or application/json")
    except Malformed:
        raise
    except (DecodeError, json_format.ParseError, wire.WireError, ValueError, TypeError, RecursionError) as exc:
        raise Malformed(f"not an OTLP export request: {type(exc).__name__}: {str(exc)[:200]}") from None
    return message


def _inflate(body: bytes, encoding: str) -> bytes:
    """The body without its content encoding (gzip or deflate, as exporters may send), bounded."""
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return body
    if encoding not in ("gzip", "deflate"):
        raise Malformed(f"unsupported content encoding {encoding!r}")
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS if encoding == "gzip" else zlib.MAX_WBITS)
    try:
        out = inflater.decompress(body, MAX_BODY_BYTES + 1)
    except zlib.error as exc:
        raise Malformed(f"bad {encoding} body: {exc}") from None
    if len(out) > MAX_BODY_BYTES:
        raise Malformed(f"the body inflates past {MAX_BODY_BYTES} bytes")
    return out


class Receiver:
    """An OTLP/HTTP trace receiver on ``listen`` ("HOST:PORT"), in a background thread while the probe runs."""

    def __init__(self, listen: str, cap: int = MAX_SPANS) -> None:
        host, _, port = listen.rpartition(":")
        self._bind = (host.strip("[]"), int(port))
        self.evidence = TraceEvidence(source="otlp", cap=cap)
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> str:
        """Listen, and return the "HOST:PORT" really bound (port 0 chooses one); raises ``OSError`` when it cannot."""
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            timeout = READ_TIMEOUT_S
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                if self.path.split("?")[0] != PATH:
                    self._answer(HTTPStatus.NOT_FOUND, b"", "text/plain")
                    return
                status, body, kind = receiver._take(self.headers.get("content-length"), self.rfile,
                                                    self.headers.get("content-type", ""), self.headers.get("content-encoding", ""))
                self._answer(status, body, kind)

            def _answer(self, status: HTTPStatus, body: bytes, kind: str) -> None:
                self.send_response(status)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                """Silent: the exporters' requests are evidence, not console output."""

        server = ThreadingHTTPServer(self._bind, Handler)
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="llm-doctor-otlp", daemon=True)
        self._thread.start()
        port = server.server_address[1]
        self.evidence.listen = f"{self._bind[0]}:{port}"
        return self.evidence.listen

    def _take(self, length: str | None, stream: Any, content_type: str, encoding: str) -> tuple[HTTPStatus, bytes, str]:
        """Read, decode and keep one export request; the status, body and content type of the answer."""
        json_answer = content_type.split(";")[0].strip().lower() == "application/json"
        kind = "application/json" if json_answer else "application/x-protobuf"
        size = wire.number(length, int) if length is not None else None
        if size is None or size < 0:
            return self._refuse(HTTPStatus.LENGTH_REQUIRED, "a content-length is required", json_answer)
        if size > MAX_BODY_BYTES:
            return self._refuse(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"over {MAX_BODY_BYTES} bytes", json_answer)
        try:
            body = stream.read(size)
            message = decode(_inflate(body, encoding), content_type)
        except (OSError, Malformed) as exc:
            return self._refuse(HTTPStatus.BAD_REQUEST, str(exc), json_answer)
        spans = list(spans_of(message))
        with self._lock:
            rejected = self.evidence.take(spans)
            self.evidence.payloads += 1
            self._arrived.notify_all()
        answer = ExportTraceServiceResponse()
        if rejected:
            answer.partial_success.rejected_spans = rejected
            answer.partial_success.error_message = f"llm-doctor keeps at most {self.evidence.cap} spans per run"
        body = json_format.MessageToJson(answer).encode() if json_answer else answer.SerializeToString()
        return HTTPStatus.OK, body, kind

    def _refuse(self, status: HTTPStatus, why: str, json_answer: bool) -> tuple[HTTPStatus, bytes, str]:
        with self._lock:
            self.evidence.malformed += 1
            if len(self.evidence.notes) < 5:  # the first few say why; the count says how many
                self.evidence.notes.append(f"refused an export request ({status.value}): {why}")
        # the reason as text (JSON for a JSON exporter): what an exporter logs beside the status
        if json_answer:
            return status, json.dumps({"message": why}).encode(), "application/json"
        return status, why.encode()[:1000], "text/plain; charset=utf-8"

    def wait_for(self, trace_ids: set[str], limit_s: float) -> float:
        """Wait up to ``limit_s`` until a span of every trace in ``trace_ids`` has arrived (or the cap
        is full); the seconds waited, recorded in the evidence."""
        start = time.monotonic()
        with self._arrived:
            while True:
                seen = {s.trace_id for s in self.evidence.spans}
                left = limit_s - (time.monotonic() - start)
                if trace_ids <= seen or left <= 0 or len(self.evidence.spans) >= self.evidence.cap:
                    break
                self._arrived.wait(min(left, 0.5))
        self.evidence.waited_s = round(time.monotonic() - start, 3)
        return self.evidence.waited_s

    def result(self) -> TraceEvidence:
        """Stop listening and return what arrived."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        with self._lock:
            return self.evidence


__all__ = ["MAX_SPANS", "PATH", "WAIT_S", "Malformed", "Receiver", "decode", "spans_of"]
