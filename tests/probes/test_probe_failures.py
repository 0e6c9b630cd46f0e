"""Every failure the probe can meet is recorded as evidence, through ``llm-doctor probe``, without a crash."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from doctor.bundle import load_path
from doctor.exit_codes import ExitCode
from tests.support.sse_server import SseServer


@pytest.fixture(scope="module")
def server():
    with SseServer() as srv:
        yield srv


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def probe(tmp_path: Path, *args: str, env: dict[str, str] | None = None):
    from doctor.cli import app

    out = tmp_path / "bundle.json"
    result = CliRunner().invoke(app, ["probe", "--requests", "1", "--warmup", "0", "--stall-timeout", "2",
                                      "-o", str(out), *args], env=env)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result, load_path(out)


CASES = {
    # name: (base URL options or a URL maker, extra flags, expected outcome, evidence error kind)
    "http-500": ({"fail": "status"}, [], "http-status", "http-status"),
    "http-404": ("/nowhere", [], "http-status", "http-status"),
    "json-not-stream": ({"fail": "json"}, [], "not-a-stream", "malformed"),
    "error-in-stream": ({"fail": "error"}, [], "stream-error", "malformed"),
    "usage-only": ({"fail": "usage"}, [], "no-token", "malformed"),
    "invalid-utf8": ({"fail": "utf8"}, [], "invalid-utf8", "malformed"),
    "cut-chunked": ({"fail": "cut"}, [], "cut", "cut"),
    "cut-close-delimited": ({"fail": "cut", "framing": "close"}, [], "cut", "cut"),
    "stall": ({"fail": "hang"}, ["--stall-timeout", "0.3"], "stall", "timeout"),
    # a cut by --deadline is no failure of the target: tests/probes/test_probe_deadlines.py
}


@pytest.mark.parametrize("case", list(CASES))
def test_failures_through_the_server(tmp_path, server, case):
    where, flags, outcome, kind = CASES[case]
    engine = server.url + where if isinstance(where, str) else server.base(**where)
    result, bundle = probe(tmp_path, "--engine", engine, *flags)
    assert result.exit_code == ExitCode.NO_DIAGNOSIS
    (trace,) = bundle.stream.requests
    assert trace.outcome == outcome
    assert trace.error
    (error,) = bundle.errors_for("stream")
    assert error.kind == kind and error.fatal
    if outcome == "http-status":
        assert trace.status in (404, 500) and trace.body_excerpt
        assert trace.t_headers <= trace.t_first_byte  # the error body's first byte
    if case == "stall":  # headers, then silence: no body byte ever came
        assert trace.t_headers is not None and trace.t_first_byte is None


@pytest.mark.parametrize("url, outcome", [
    (lambda srv: f"http://127.0.0.1:{closed_port()}", "connect"),
    (lambda srv: "http://llm-doctor-test.invalid:8000", "dns"),
])  # https:// to this plain-HTTP server is a usage error at the first GET (tests/probes/test_probe_deadlines.py)
def test_connection_failures(tmp_path, server, url, outcome):
    result, bundle = probe(tmp_path, "--engine", url(server))
    assert result.exit_code == ExitCode.NO_DIAGNOSIS
    assert [t.outcome for t in bundle.stream.requests] == [outcome]
    assert bundle.errors_for("stream")[0].kind == outcome


def test_one_failing_path_does_not_hide_the_other(tmp_path, server):
    result, bundle = probe(tmp_path, "--engine", server.base(itl="0.001"), "--gateway", server.base(fail="status"))
    assert result.exit_code == ExitCode.HEALTHY
    outcomes = {t.path: t.outcome for t in bundle.stream.requests}
    assert outcomes == {"direct": "ok", "gateway": "http-status"}
    assert "http-status" in result.output  # the summary lists failures by outcome


def test_the_api_key_is_sent_but_never_stored(tmp_path, server):
    secret = "sk-test-0123456789abcdefghij"
    result, bundle = probe(tmp_path, "--engine", server.base(fail="status"), env={"OPENAI_API_KEY": secret})
    text = json.dumps(json.loads((tmp_path / "bundle.json").read_text()))
    assert secret not in text and secret not in result.output
    assert bundle.stream.requests[0].status == 500


def test_an_unreadable_ca_bundle_is_a_tls_evidence_error(tmp_path):
    # a missing file is refused before the probe (tests/cli/test_cli_preflight.py); one that is no CA bundle is found here
    (tmp_path / "missing.pem").write_text("not a certificate\n")
    result, bundle = probe(tmp_path, "--engine", "https://127.0.0.1:9", "--ca-cert", str(tmp_path / "missing.pem"))
    assert result.exit_code == ExitCode.NO_DIAGNOSIS
    assert bundle.stream is None
    (error,) = bundle.errors_for("stream")
    assert error.kind == "tls" and error.fatal and "missing.pem" in error.message


def test_a_port_out_of_range_is_a_connect_failure_that_names_its_cause():
    """httpx lets ``:99999`` through; the socket layer's OverflowError must surface, per request."""
    from doctor.collection.collector import CollectConfig
    from doctor.foundation.clock import Clock
    from doctor.probes.stream import run_stream_probe

    config = CollectConfig(engine="http://127.0.0.1:99999", requests=1, warmup=0)
    evidence, errors = run_stream_probe(config, Clock(), lambda _msg: None)
    (trace,) = evidence.requests
    assert trace.outcome == "connect"
    assert "OverflowError" in trace.error and "65535" in trace.error
    assert [e.kind for e in errors] == ["connect"]
