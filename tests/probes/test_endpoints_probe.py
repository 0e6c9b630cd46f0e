"""The endpoints probe against real HTTP servers on 127.0.0.1 (``http.server`` in a thread)."""

from __future__ import annotations

import json
import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from doctor.bundle import dumps
from doctor.evidence import Bundle
from doctor.probes.endpoints import collect_endpoints
from doctor.probes.http import HttpOptions
from tests.parsers.test_engine_self_report import LLAMACPP_PROPS, SERVER_INFO
from tests.support import system
from tests.support.nginx import NEEDS_NGINX, free_port, run_nginx

# The shape of vLLM's answers (vllm/entrypoints/openai/protocol.py: ModelList, ModelCard).
MODELS = {
    "object": "list",
    "data": [
        {
            "id": "small-llama",
            "object": "model",
            "created": 1796020025,
            "owned_by": "vllm",
            "root": "/srv/models/small-llama",
            "parent": None,
            "max_model_len": 1024,
            "permission": [{"id": "modelperm-1", "object": "model_permission", "allow_sampling": True}],
        }
    ],
}
VERSION = {"version": "0.32.0"}

Route = Callable[[BaseHTTPRequestHandler], None]


def send(handler: BaseHTTPRequestHandler, status: int, body: bytes, content_type: str, **headers: str) -> None:
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(body)))
    for name, value in headers.items():
        handler.send_header(name.replace("_", "-"), value)
    handler.end_headers()
    handler.wfile.write(body)


def json_route(doc: object, **headers: str) -> Route:
    return lambda h: send(h, 200, json.dumps(doc).encode(), "application/json", **headers)


@contextmanager
def serve(
    routes: dict[str, Route], server_name: str = "uvicorn", tls: ssl.SSLContext | None = None
) -> Iterator[tuple[str, list[dict[str, str]]]]:
    """A threaded HTTP/1.1 server answering ``routes`` (404 elsewhere); yields (base URL, requests seen)."""
    seen: list[dict[str, str]] = []
    stop = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = server_name
        sys_version = ""

        def do_GET(self) -> None:
            seen.append({"path": self.path, **{k.lower(): v for k, v in self.headers.items()}})
            self.server.stop = stop  # type: ignore[attr-defined]
            route = routes.get(self.path)
            if route is None:
                send(self, 404, b'{"detail":"Not Found"}', "application/json")
            else:
                route(self)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{server.server_address[1]}", seen
    finally:
        stop.set()
        server.shutdown()
        server.server_close()


def vllm_routes() -> dict[str, Route]:
    return {
        "/version": json_route(VERSION),
        "/v1/models": json_route(MODELS),
        "/health": lambda h: send(h, 200, b"", "application/json"),
    }


def test_healthy_engine_and_gateway() -> None:
    # Only the API route carries the streaming headers: those are the ones kept.
    gateway_routes: dict[str, Route] = {
        "/version": json_route(VERSION),
        "/v1/models": json_route(MODELS, X_Accel_Buffering="no", Via="1.1 edge"),
        "/health": lambda h: send(h, 200, b"", "application/json"),
    }
    http = HttpOptions(api_key="sk-test-0123456789abcdefghij", timeout_s=5)
    with serve(vllm_routes()) as (engine, engine_seen), serve(gateway_routes, "nginx/1.22.1") as (gateway, _):
        evidence, errors = collect_endpoints({"direct": engine, "gateway": gateway + "/v1"}, http)

    assert errors == []
    direct, edge = evidence.endpoints
    assert (direct.role, direct.url) == ("engine", engine)
    assert direct.version == "0.32.0"
    assert [(m.id, m.root, m.max_model_len) for m in direct.models] == [("small-llama", "/srv/models/small-llama", 1024)]
    assert direct.health_status == 200
    assert direct.http_version == "HTTP/1.1"
    assert direct.headers["Server"] == "uvicorn"
    assert direct.headers["Content-Type"] == "application/json"
    # A base URL ending in /v1 must not become /v1/v1/models.
    assert edge.role == "gateway" and edge.models[0].id == "small-llama"
    assert edge.headers["Server"] == "nginx/1.22.1"
    assert edge.headers["X-Accel-Buffering"] == "no"
    assert edge.headers["Via"] == "1.1 edge"
    assert [r["path"] for r in engine_seen] == ["/version", "/v1/models", "/health"]
    assert all(r["authorization"] == "Bearer sk-test-0123456789abcdefghij" for r in engine_seen)
    assert "sk-test" not in dumps(Bundle(endpoints=evidence))


def test_404_everywhere_is_three_status_errors() -> None:
    with serve({}) as (base, _):
        evidence, errors = collect_endpoints({"gateway": base}, HttpOptions(timeout_s=5))
    assert [(e.action, e.kind, e.fatal) for e in errors] == [
        ("GET /version", "http-status", False),
        ("GET /v1/models", "http-status", False),
        ("GET /health", "http-status", False),
    ]
    assert "404" in errors[0].message
    endpoint = evidence.endpoints[0]
    assert endpoint.health_status == 404
    assert endpoint.version is None and endpoint.models == []


def test_html_error_page_and_html_200_are_named() -> None:
    bad_gateway = b"<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>"
    portal = b"<!doctype html><html><head><title>Sign in</title></head></html>"
    routes: dict[str, Route] = {
        "/version": lambda h: send(h, 502, bad_gateway, "text/html"),
        "/v1/models": lambda h: send(h, 200, portal, "text/html; charset=utf-8"),
        "/health": lambda h: send(h, 200, b"", "text/plain"),
    }
    with serve(routes, "nginx") as (base, _):
        evidence, errors = collect_endpoints({"gateway": base}, HttpOptions(timeout_s=5))
    version_error, models_error = errors
    assert version_error.kind == "http-status"
    assert "502" in version_error.message and "502 Bad Gateway" in version_error.message
    assert models_error.kind == "malformed"
    assert "not JSON" in models_error.message and "Sign in" in models_error.message
    assert evidence.endpoints[0].health_status == 200


def test_non_json_and_wrong_json_are_malformed() -> None:
    routes: dict[str, Route] = {
        "/version": lambda h: send(h, 200, b"OK", "text/plain"),
        "/v1/models": json_route({"models": ["a"]}),
        "/health": lambda h: send(h, 200, b"", "application/json"),
    }
    with serve(routes) as (base, _):
        _, errors = collect_endpoints({"direct": base}, HttpOptions(timeout_s=5))
    assert [(e.action, e.kind) for e in errors] == [("GET /version", "malformed"), ("GET /v1/models", "malformed")]
    assert "text/plain" in errors[0].message
    assert '"data"' in errors[1].message


def test_hung_server_hits_the_deadline_once() -> None:
    def hang(h: BaseHTTPRequestHandler) -> None:
        h.server.stop.wait(30)  # type: ignore[attr-defined]

    with serve({"/version": hang, "/v1/models": hang, "/health": hang}) as (base, seen):
        evidence, errors = collect_endpoints({"direct": base}, HttpOptions(timeout_s=0.3))
    (error,) = errors
    assert (error.action, error.kind, error.fatal) == ("GET /version", "timeout", True)
    assert "/v1/models" in error.message and "not tried" in error.message
    assert [r["path"] for r in seen] == ["/version"]
    assert evidence.endpoints[0].version is None


def test_trickling_server_cannot_outlast_the_deadline() -> None:
    """Each byte arrives well inside the read timeout; only the per-call deadline stops it."""

    def trickle(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", "100000")
        h.end_headers()
        while not h.server.stop.is_set():  # type: ignore[attr-defined]
            try:
                h.wfile.write(b" ")
                h.wfile.flush()
            except OSError:
                return
            time.sleep(0.02)

    with serve({"/version": trickle}) as (base, _):
        _, errors = collect_endpoints({"direct": base}, HttpOptions(timeout_s=0.5))
    assert errors[0].kind == "timeout"
    assert "no complete answer" in errors[0].message


def test_connection_refused_is_one_fatal_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    evidence, errors = collect_endpoints({"direct": f"http://127.0.0.1:{port}"}, HttpOptions(timeout_s=2))
    (error,) = errors
    assert (error.source, error.kind, error.fatal) == ("endpoints", "connect", True)
    assert error.target == f"http://127.0.0.1:{port}/version"
    assert evidence.endpoints[0].models == []


def test_reachable_gateway_keeps_engine_failure_non_fatal() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with serve(vllm_routes()) as (gateway, _):
        evidence, errors = collect_endpoints(
            {"direct": f"http://127.0.0.1:{port}", "gateway": gateway}, HttpOptions(timeout_s=2)
        )
    assert [(e.kind, e.fatal) for e in errors] == [("connect", False)]
    assert evidence.endpoints[1].version == "0.32.0"


@pytest.mark.parametrize("url", ["ftp://127.0.0.1/", "http://"])
def test_unusable_url_is_an_error_not_a_traceback(url: str) -> None:
    _, errors = collect_endpoints({"direct": url}, HttpOptions(timeout_s=1))
    assert errors and errors[0].kind in {"malformed", "connect"}


def test_unreadable_ca_bundle_is_a_tls_error(tmp_path: Path) -> None:
    bad = tmp_path / "ca.pem"
    bad.write_text("not a certificate")
    evidence, errors = collect_endpoints({"direct": "https://127.0.0.1:1"}, HttpOptions(verify=str(bad)))
    assert [(e.kind, e.fatal) for e in errors] == [("tls", True)]
    assert str(bad) in errors[0].message
    assert evidence.endpoints == []


@system.needs(shutil.which("openssl"), "needs the openssl command to make a certificate (apt-get install openssl)")
def test_self_signed_engine_fails_tls_until_its_ca_is_given(tmp_path: Path) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert, key)
    with serve(vllm_routes(), tls=tls) as (base, _):
        _, refused = collect_endpoints({"direct": base}, HttpOptions(timeout_s=5))
        trusted, errors = collect_endpoints({"direct": base}, HttpOptions(timeout_s=5, verify=str(cert)))
    (error,) = refused
    assert (error.kind, error.fatal) == ("tls", True) and "--ca-cert" in error.message
    assert errors == [] and trusted.endpoints[0].version == "0.32.0"


needs_nginx = NEEDS_NGINX

# The documented streaming setup in front of vLLM (nginx docs; vLLM's own nginx example).
STREAMING_NGINX = """
location / {
  proxy_pass http://{upstream};
  proxy_http_version 1.1;
  proxy_buffering off;
  add_header X-Accel-Buffering no always;
  add_header Via "1.1 llm-edge" always;
}
"""


@pytest.mark.nginx
@needs_nginx
def test_through_a_real_nginx() -> None:
    with serve(vllm_routes()) as (engine, _):
        port = int(engine.rsplit(":", 1)[1])
        with run_nginx(STREAMING_NGINX, port) as gateway:
            evidence, errors = collect_endpoints({"direct": engine, "gateway": gateway}, HttpOptions(timeout_s=5))
    assert errors == []
    edge = evidence.endpoints[1]
    assert edge.role == "gateway" and edge.version == "0.32.0" and edge.models[0].max_model_len == 1024
    assert edge.headers["Server"].startswith("nginx")
    assert (edge.headers["X-Accel-Buffering"], edge.headers["Via"]) == ("no", "1.1 llm-edge")
    assert edge.health_status == 200 and edge.http_version == "HTTP/1.1"


@pytest.mark.nginx
@needs_nginx
def test_real_nginx_with_its_upstream_down_answers_its_own_html() -> None:
    """nginx's own 502 page, as an on-call engineer meets it when vLLM is restarting."""
    with run_nginx(STREAMING_NGINX, free_port()) as gateway:
        evidence, errors = collect_endpoints({"gateway": gateway}, HttpOptions(timeout_s=5))
    assert [(e.action, e.kind) for e in errors] == [
        ("GET /version", "http-status"), ("GET /v1/models", "http-status"), ("GET /health", "http-status"),
    ]
    assert all("HTTP 502" in e.message and "502 Bad Gateway" in e.message for e in errors)
    assert evidence.endpoints[0].health_status == 502
    assert evidence.endpoints[0].headers["Server"].startswith("nginx")


def test_a_proxy_from_the_environment_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """``HTTPS_PROXY`` in the shell must not put the proxy's ``Server`` / ``Via`` into the target's evidence."""
    proxy_routes: dict[str, Route] = {}  # a proxy asked for an absolute URL answers 404 here, as "squid"
    with serve(vllm_routes()) as (engine, _), serve(proxy_routes, "squid/6.6") as (proxy, proxy_seen):
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
            monkeypatch.setenv(name, proxy)
        for name in ("NO_PROXY", "no_proxy"):
            monkeypatch.delenv(name, raising=False)
        evidence, errors = collect_endpoints({"direct": engine}, HttpOptions(timeout_s=5))
    assert errors == []
    assert evidence.endpoints[0].headers["Server"] == "uvicorn"
    assert proxy_seen == []


# --------------------------------------------------------------------------- what the engine says it is

def _doc(name: str) -> object:
    return json.loads((SERVER_INFO / name).read_text())


def _models(owner: str) -> dict[str, object]:
    return {"object": "list", "data": [{"id": "m", "object": "model", "owned_by": owner}]}


def test_llama_server_is_asked_for_its_props_alone() -> None:
    # llama-server names itself in its Server header; its /v1/models lists owned_by "llamacpp".
    routes = {"/v1/models": json_route(_models("llamacpp")), "/props": json_route(_doc(LLAMACPP_PROPS)),
              "/health": json_route({"status": "ok"})}
    with serve(routes, "llama.cpp") as (base, seen):
        evidence, errors = collect_endpoints({"direct": base}, HttpOptions(timeout_s=5))
    info = evidence.endpoints[0].engine_info
    assert info is not None and (info.engine, info.path) == ("llama.cpp", "/props")
    assert "chat_template" not in info.fields  # only the fields the facts are read from
    assert [r["path"] for r in seen] == ["/version", "/v1/models", "/health", "/props"]
    assert [e.action for e in errors] == ["GET /version"]  # llama-server has no /version


def test_sglang_is_asked_for_its_server_info_and_its_secrets_are_not_kept() -> None:
    routes = {"/version": json_route({"version": "0.5.4.post3"}), "/v1/models": json_route(_models("sglang")),
              "/get_server_info": json_route(_doc("sglang-0.5.4.post3-get_server_info-source-shape.json"))}
    with serve(routes) as (base, seen):
        evidence, _ = collect_endpoints({"direct": base}, HttpOptions(timeout_s=5))
    info = evidence.endpoints[0].engine_info
    assert info is not None and info.engine == "sglang"
    assert [r["path"] for r in seen][-1] == "/get_server_info"
    assert "fixture-api-key-not-real" not in dumps(Bundle(endpoints=evidence))


def test_an_unnamed_engine_is_tried_in_order_until_one_answers() -> None:
    # TGI sends no Server header of its own and lists the model id as owned_by: /info, third in the order.
    routes = {"/v1/models": json_route(_models("meta-llama/Llama-2-13b-chat-hf")),
              "/info": json_route(_doc("tgi-2.2.0-info-source-shape.json"))}
    with serve(routes) as (base, seen):
        evidence, errors = collect_endpoints({"direct": base}, HttpOptions(timeout_s=5))
    info = evidence.endpoints[0].engine_info
    assert info is not None and (info.engine, info.fields["max_batch_total_tokens"]) == ("tgi", 16000)
    assert [r["path"] for r in seen][-3:] == ["/props", "/get_server_info", "/info"]
    assert {e.action for e in errors} == {"GET /version", "GET /health"}  # the guesses that 404 are no error


def test_vllm_and_the_gateway_are_not_asked_what_they_are() -> None:
    with serve(vllm_routes()) as (engine, engine_seen), serve(vllm_routes(), "nginx/1.22.1") as (gateway, gateway_seen):
        evidence, _ = collect_endpoints({"direct": engine, "gateway": gateway}, HttpOptions(timeout_s=5))
    assert all(ep.engine_info is None for ep in evidence.endpoints)
    assert len(engine_seen) == len(gateway_seen) == 3


def test_a_named_engine_whose_route_fails_says_so() -> None:
    routes = {"/v1/models": json_route(_models("sglang")),
              "/get_server_info": lambda h: send(h, 500, b"Internal Server Error", "text/plain")}
    with serve(routes) as (base, _):
        evidence, errors = collect_endpoints({"direct": base}, HttpOptions(timeout_s=5))
    assert evidence.endpoints[0].engine_info is None
    assert [(e.action, e.kind) for e in errors if "server_info" in e.action] == [("GET /get_server_info", "http-status")]
    assert not any(e.fatal for e in errors)
