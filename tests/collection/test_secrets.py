"""Planted secrets never reach the bundle, the JSON, the HTML, the Markdown or the terminal.

A real HTTP server on 127.0.0.1 plays a vLLM that leaks the caller's credentials everywhere it
can (echoed headers, error bodies, metric labels), the log holds keys in engine arguments, and
the URL carries a password; ``diagnose`` then runs end to end through the real CLI.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from typer.testing import CliRunner

from doctor.cli import app

API_KEY = "sk-canaryAPIKEY1234567890abcdef"
HEADER_VALUE = "canary-header-value-4242"
URL_PASSWORD = "canaryurlpass99"
LOG_KEY = "canary-log-key-7777"
FLAG_KEY = "canary-flag-key-8888"
METRIC_TOKEN = "canarymetrictoken5555"
CANARIES = [API_KEY, HEADER_VALUE, URL_PASSWORD, LOG_KEY, FLAG_KEY, METRIC_TOKEN]

CHUNK = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m"}


class LeakyVllm(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # keep test output clean
        pass

    def _send(self, status, body, ctype="application/json", extra=None):
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("X-Echo-Authorization", self.headers.get("Authorization", ""))
        self.send_header("Set-Cookie", f"session={API_KEY}")
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/v1/models":
            self._send(200, json.dumps({"object": "list", "data": [{"id": "m", "object": "model", "root": "m", "max_model_len": 4096}]}))
        elif self.path == "/metrics":
            self._send(200, (
                "# HELP vllm:num_requests_running r\n# TYPE vllm:num_requests_running gauge\n"
                f'vllm:num_requests_running{{engine="0",model_name="m",authorization="Bearer {METRIC_TOKEN}"}} 0\n'
            ), "text/plain; version=0.0.4")
        elif self.path == "/version":
            self._send(200, '{"version": "0.32.0"}')
        else:
            self._send(200, "{}")

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        if "leak-error" in self.headers.get("X-Custom-Auth", "") or self.path.startswith("/fail"):
            self._send(401, json.dumps({"error": f"bad key {self.headers.get('Authorization')} / {self.headers.get('X-Custom-Auth')}"}))
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("X-Echo-Authorization", self.headers.get("Authorization", ""))
        self.end_headers()
        events = [{**CHUNK, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}]
        events += [{**CHUNK, "choices": [{"index": 0, "delta": {"content": f" w{i}"}}]} for i in range(5)]
        events.append({**CHUNK, "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]})
        for ev in [f"data: {json.dumps(e)}\n\n" for e in events] + ["data: [DONE]\n\n"]:
            data = ev.encode()
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")


@pytest.fixture
def leaky_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), LeakyVllm)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_no_planted_secret_reaches_any_output(leaky_server, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    log = tmp_path / "vllm.log"
    log.write_text(
        "INFO 11-30 10:00:00 [api_server.py:1] vLLM API server version 0.32.0\n"
        f"INFO 11-30 10:00:00 [utils.py:1] non-default args: {{'model': 'm', 'api_key': ['{LOG_KEY}'], 'max_num_seqs': 8}}\n"
        f"INFO 11-30 10:00:01 [launcher.py:1] command: vllm serve m --api-key {FLAG_KEY} --port 8000\n"
    )
    out = {k: tmp_path / f"report.{k}" for k in ("json", "html", "md")}
    bundle = tmp_path / "bundle.json"
    port = leaky_server
    result = CliRunner().invoke(app, [
        "diagnose",
        "--engine", f"http://admin:{URL_PASSWORD}@127.0.0.1:{port}",
        "--gateway", f"http://127.0.0.1:{port}/fail",
        "--header", f"X-Custom-Auth: {HEADER_VALUE}",
        "--log", str(log), "--requests", "2", "--warmup", "0", "--no-gpu",
        "--bundle", str(bundle), "--verbose",
        *[x for k, p in out.items() for x in (f"--{k}", str(p))],
    ])
    assert result.exit_code in (0, 1, 2), result.output
    texts = {"terminal": result.output, "bundle": bundle.read_text()}
    texts.update({k: p.read_text() for k, p in out.items()})
    for where, text in texts.items():
        for canary in CANARIES:
            assert canary not in text, f"{canary} leaked into the {where}"
    redactions = json.loads(bundle.read_text())["redactions"]
    assert sum(redactions.values()) >= len(CANARIES)
