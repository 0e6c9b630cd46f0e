"""Say the obvious fast: a hung gateway, the wrong scheme, the user's own --deadline, a dripped head.

Real servers on 127.0.0.1: the SSE server (tests/support/sse_server.py) as the engine, a TCP
server that accepts and never answers as a hung gateway, the hostile server's header drip, and a
TLS port made with the openssl command. The assertions are what the run records (the bound and
its basis, the outcome, the requests sent, the remediation), never how long it took.
"""

from __future__ import annotations

import json
import shutil
import socket
import ssl
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from doctor.bundle import load_path
from doctor.cli import app
from doctor.collection.collector import collect
from doctor.evidence import ProbePath, RequestTrace
from doctor.exit_codes import ExitCode
from doctor.foundation.clock import Clock
from doctor.foundation.errors import UsageError
from doctor.probes import deadlines
from doctor.probes.deadlines import (
    HUNG_E2E_FACTOR,
    HUNG_TTFT_FACTOR,
    RunDeadline,
    direct_bound,
    gateway_head_bound,
    p99,
)
from doctor.probes.endpoints import collect_endpoints
from doctor.probes.http import DeadlineExceeded, HttpOptions, Unanswered, bounded_get
from doctor.probes.plan import CollectConfig
from doctor.probes.sampling import failing_fast
from doctor.probes.stream import run_stream_probe
from doctor.runs.outage import unreachable_paths
from tests.support import hostile_server, system
from tests.support.hostile_server import HostileServer, blackholed_port, silent_port
from tests.support.nginx import NEEDS_NGINX, run_nginx
from tests.support.sse_server import SseServer

runner = CliRunner()
#: The --timeout of the wrong-scheme tests: it also bounds the question of the other scheme
#: (``min(timeout, 2.0)``), which a loaded machine must have time to answer.
SCHEME_TIMEOUT_S = 3.0


@pytest.fixture(scope="module")
def engine() -> Iterator[SseServer]:
    with SseServer() as srv:
        yield srv


def diagnose(tmp_path: Path, *args: str) -> tuple[int, dict, Path]:
    out, bundle = tmp_path / "report.json", tmp_path / "bundle.json"
    result = runner.invoke(app, ["diagnose", "--no-gpu", "--no-host", "--no-metrics", "--json", str(out),
                                 "--bundle", str(bundle), *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, json.loads(out.read_text()), bundle


def finding(report: dict, code: str) -> dict | None:
    return next((f for f in report["findings"] if f["code"] == code), None)


def test_a_hung_gateway_beside_a_live_engine_is_held_to_the_bound_its_direct_path_sets(
        tmp_path, engine, monkeypatch) -> None:
    monkeypatch.setattr(deadlines, "HUNG_FLOOR_S", 0.2)  # so the TTFT term decides, and the test is short
    with silent_port() as gateway:
        code, report, path = diagnose(tmp_path, "--engine", engine.base(ttft="0.05", itl="0.001", n="4"),
                                      "--gateway", gateway, "--requests", "6", "--warmup", "0")
    bundle = load_path(path)
    direct = [t for t in bundle.stream.requests if t.path == ProbePath.DIRECT]
    hung = [t for t in bundle.stream.requests if t.path == ProbePath.GATEWAY]
    assert [t.outcome for t in hung] == ["head-timeout"]  # one was enough: the rest never sent
    assert all(t.ok for t in direct) and len(direct) < 6
    (trace,) = hung
    # the bound recorded is the one its direct path set, from the answers it had when it gave up
    assert trace.head_deadline_basis == "direct-path"
    answered = [t for t in direct if t.t_end is not None and t.t_end <= trace.t_failed]
    expected = max(0.2, HUNG_TTFT_FACTOR * p99([t.t_first_token - t.t_sent for t in answered]),
                   HUNG_E2E_FACTOR * p99([t.t_end - t.t_sent for t in answered]))
    assert trace.head_deadline_s == pytest.approx(expected)
    assert "direct path" in trace.error and "no response head" in trace.error
    assert "stopped sending" in bundle.stream.shape.stopped
    ld501 = finding(report, "LD501")
    assert ld501 is not None and ld501["remediation"]["setting"] == "gateway_upstream"
    assert "replicas" not in json.dumps(ld501) and "capacity" not in ld501["remediation"]["suggested"]
    assert report["verdict"]["symptom"] == "proxy-only"
    assert unreachable_paths(bundle) == {"gateway": "head-timeout"}
    assert code == ExitCode.SYMPTOM


def test_a_gateway_is_not_held_to_a_direct_path_over_budget() -> None:
    slow = RequestTrace(index=0, path=ProbePath.DIRECT, t_sent=0.0, t_first_token=2.0, t_end=3.0)
    assert gateway_head_bound([slow], ttft_budget_s=0.5) is None
    fast = RequestTrace(index=0, path=ProbePath.DIRECT, t_sent=0.0, t_first_token=0.05, t_end=4.0)
    bound = gateway_head_bound([fast], ttft_budget_s=0.5)
    assert bound is not None and bound.seconds == pytest.approx(HUNG_E2E_FACTOR * 4.0)  # a buffering edge's clearance
    assert gateway_head_bound([], ttft_budget_s=0.5) is None


def test_a_decisive_failure_stops_a_path_that_never_answered_but_not_one_that_did() -> None:
    def trace(outcome: str, warmup: bool = False, index: int = 1) -> RequestTrace:
        return RequestTrace(index=index, path=ProbePath.GATEWAY, warmup=warmup, outcome=outcome, t_end=1.0)

    assert failing_fast([trace("head-timeout", warmup=True, index=0), trace("head-timeout")], ProbePath.GATEWAY) \
        == "head-timeout"
    assert failing_fast([trace("tls")], ProbePath.GATEWAY) == "tls"
    assert failing_fast([trace("ok", warmup=True, index=0), trace("head-timeout")], ProbePath.GATEWAY) is None
    assert failing_fast([trace("stall")], ProbePath.GATEWAY) is None  # not decisive: three are needed
    held = trace("stall")
    held.first_token_deadline_s = 5.0  # a gateway's first token past its direct path's bound: as a silent head
    assert failing_fast([held], ProbePath.GATEWAY) == "stall"


def test_https_to_a_plain_http_server_is_one_line_naming_tls(tmp_path, engine) -> None:
    """Said at the first failure (the endpoints probe's first GET), before any stream is sent."""
    url = f"https://127.0.0.1:{engine.port}"
    before = engine.received
    result = runner.invoke(app, ["diagnose", "--no-gpu", "--no-host", "--engine", url, "--json", str(tmp_path / "r.json")])
    assert result.exit_code == ExitCode.NO_DIAGNOSIS, result.output
    assert result.output.strip().splitlines()[-1] == f"error: --engine: TLS handshake failed: {url} speaks plain HTTP; use http://"
    assert engine.received == before and not (tmp_path / "r.json").exists()


def test_a_wrong_scheme_is_said_at_the_first_failure_not_after_a_timeout_per_step() -> None:
    """A plain server that waits for a request head never answers a ClientHello: each step (the
    endpoints, /metrics before and after, the stream's requests) waited its own handshake timeout
    before the stream probe said the scheme was wrong (32 s with the defaults). Now the endpoints
    probe's first GET says it, and nothing more is sent."""
    with HostileServer() as hostile:
        url = hostile.url.replace("http://", "https://")
        config = CollectConfig(engine=url, requests=4, warmup=1, host=False, gpu=False)
        config.http.timeout_s = SCHEME_TIMEOUT_S
        with pytest.raises(UsageError, match=f"--engine: TLS handshake failed: {url} speaks plain HTTP; use http://"):
            collect(config)
        assert not any(r.startswith("POST") for r in hostile.requests)  # no stream request was sent


def test_https_to_a_server_silent_on_a_client_hello_is_the_same_line(tmp_path) -> None:
    """A plain server that waits for a request head never answers a ClientHello: the handshake
    times out, which must not read as "timeout -> add capacity"."""
    with HostileServer() as hostile:
        url = hostile.url.replace("http://", "https://")
        config = CollectConfig(engine=url, requests=1, warmup=0)
        config.http.timeout_s = SCHEME_TIMEOUT_S
        evidence, errors = run_stream_probe(config, Clock(), lambda _msg: None, discover_model=False)
    (trace,) = evidence.requests
    assert (trace.outcome, trace.scheme_mismatch) == ("tls", "http")
    assert errors[0].kind == "tls" and "speaks plain HTTP; use http://" in errors[0].message


@contextmanager
def tls_port(tmp_path: Path) -> Iterator[int]:
    """A port that speaks only TLS (a self-signed certificate made with the openssl command)."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)

    def serve() -> None:
        while True:
            try:
                conn = listener.accept()[0]
            except OSError:
                return
            conn.settimeout(5)
            try:
                with context.wrap_socket(conn, server_side=True) as tls:
                    tls.recv(1)
            except (OSError, ssl.SSLError):
                conn.close()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()


@system.needs(shutil.which("openssl"), "needs the openssl command to make a certificate (apt-get install openssl)")
def test_http_to_a_tls_port_says_use_https(tmp_path) -> None:
    with tls_port(tmp_path) as port:
        config = CollectConfig(engine=f"http://127.0.0.1:{port}", requests=1, warmup=0)
        evidence, errors = run_stream_probe(config, Clock(), lambda _msg: None, discover_model=False)
    (trace,) = evidence.requests
    assert (trace.outcome, trace.scheme_mismatch) == ("tls", "https")
    assert "speaks TLS; use https://" in errors[0].message


@system.needs(shutil.which("openssl"), "needs the openssl command to make a certificate (apt-get install openssl)")
def test_http_to_a_tls_port_is_said_by_the_endpoints_probe_before_any_stream(tmp_path) -> None:
    with tls_port(tmp_path) as port:
        config = CollectConfig(engine=f"http://127.0.0.1:{port}", requests=4, warmup=1, host=False, gpu=False)
        with pytest.raises(UsageError, match=f"--engine: no HTTP answer: http://127.0.0.1:{port} speaks TLS; use https://"):
            collect(config)


def test_a_request_cut_by_the_users_deadline_is_the_deadlines_doing(tmp_path, engine) -> None:
    code, report, path = diagnose(tmp_path, "--engine", engine.base(ttft="0.05", itl="0.02", n="200"),
                                  "--requests", "1", "--warmup", "0", "--deadline", "0.6")
    bundle = load_path(path)
    (trace,) = bundle.stream.requests
    assert trace.outcome == "deadline" and "--deadline" in trace.error
    assert trace.tokens  # what came before the cut is kept
    (error,) = bundle.errors_for("stream")
    assert not error.fatal and "not failed by the server" in error.message
    assert finding(report, "LD501") is None  # no failure of the target, so no capacity advice
    # what came before the cut is measured time (issue 22 item 5): within budget, so healthy, never "replicas"
    assert "replicas" not in json.dumps(report["verdict"])
    assert (report["verdict"]["symptom"], code) == ("healthy", ExitCode.HEALTHY)


def test_a_head_dripped_a_byte_a_second_fails_at_the_head_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """The drip sends a byte every quarter second (eight per read timeout, so a loaded machine
    still sends several), so a per-read timeout of 2 s never fires: only the head's own deadline
    ends it."""
    monkeypatch.setattr(hostile_server, "DRIP_S", 0.25)
    with HostileServer() as hostile:
        config = CollectConfig(engine=hostile.base("drip"), requests=1, warmup=0, stall_timeout_s=2.0)
        evidence, errors = run_stream_probe(config, Clock(), lambda _msg: None, discover_model=False)
    (trace,) = evidence.requests
    assert trace.outcome == "head-timeout"
    assert (trace.head_deadline_s, trace.head_deadline_basis) == (2.0, "stall-timeout")
    assert trace.t_headers is None and sum(r.nbytes for r in trace.reads) > 0
    assert errors[0].kind == "timeout" and "byte(s) of it came" in errors[0].message


def test_bytes_that_never_make_a_token_fail_at_the_first_token_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """A head at once, then a comment byte every quarter second: the per-read timeout of 2 s never
    fires, the first token's deadline does, and says the bytes came."""
    monkeypatch.setattr(hostile_server, "DRIP_S", 0.25)
    with HostileServer() as hostile:
        config = CollectConfig(engine=hostile.base("trickle"), requests=1, warmup=0, stall_timeout_s=2.0)
        evidence, _ = run_stream_probe(config, Clock(), lambda _msg: None, discover_model=False)
    (trace,) = evidence.requests
    assert trace.outcome == "stall" and trace.status == 200 and not trace.tokens
    assert "no first token" in trace.error and "byte(s) came" in trace.error
    assert len(trace.reads) > 1


def test_a_gateway_whose_head_came_but_no_token_is_held_to_the_bound_its_direct_path_sets(
        tmp_path, engine, monkeypatch) -> None:
    """A head at once and then nothing: the first-token phase on the gateway path is held to the
    direct path's bound (from the send, as the head is), not to the 30 s stall timeout."""
    monkeypatch.setattr(deadlines, "HUNG_FLOOR_S", 0.2)
    with HostileServer() as hostile:
        code, report, path = diagnose(tmp_path, "--engine", engine.base(ttft="0.05", itl="0.001", n="4"),
                                      "--gateway", hostile.base("mute"), "--requests", "4", "--warmup", "0")
    bundle = load_path(path)
    direct = [t for t in bundle.stream.requests if t.path == ProbePath.DIRECT]
    muted = [t for t in bundle.stream.requests if t.path == ProbePath.GATEWAY]
    assert [(t.outcome, t.status, t.tokens) for t in muted] == [("stall", 200, [])]  # decisive: one was enough
    assert all(t.ok for t in direct)
    assert "stall is not one to retry" in bundle.stream.shape.stopped
    for trace in muted:
        assert trace.head_deadline_s is None  # the head came in time: only the first token's bound fired
        answered = [t for t in direct if t.t_end is not None and t.t_end <= trace.t_failed]
        expected = max(0.2, HUNG_TTFT_FACTOR * p99([t.t_first_token - t.t_sent for t in answered]),
                       HUNG_E2E_FACTOR * p99([t.t_end - t.t_sent for t in answered]))
        assert trace.first_token_deadline_s == pytest.approx(expected)
        assert trace.first_token_deadline_s < 30.0  # not the stall timeout
        assert "no first token" in trace.error and "direct path" in trace.error
    ld501 = finding(report, "LD501")
    assert ld501 is not None and ld501["remediation"]["setting"] == "gateway_upstream"
    assert code == ExitCode.SYMPTOM


def test_a_gateway_on_its_own_has_no_direct_bound_for_its_first_token() -> None:
    """Without a direct path there is no bound to hold it to: the first token's own deadline (the
    stall timeout from the head) fires, and no direct-path bound is recorded."""
    with HostileServer() as hostile:
        # 3 s: a loaded test machine's own freezes (tenths of a second) stay well inside it, so the wait
        # is the server's silence ("stall"), not the client's ("client-stall")
        config = CollectConfig(gateway=hostile.base("mute"), requests=1, warmup=0, stall_timeout_s=3.0)
        evidence, _ = run_stream_probe(config, Clock(), lambda _msg: None, discover_model=False)
    (trace,) = evidence.requests
    assert trace.outcome == "stall" and trace.first_token_deadline_s is None and "no byte for 3 s" in trace.error


def test_the_endpoints_probe_holds_a_hung_gateway_to_the_bound_its_engine_sets(engine, monkeypatch) -> None:
    monkeypatch.setattr(deadlines, "HUNG_FLOOR_S", 0.2)
    http = HttpOptions(timeout_s=10.0)
    with silent_port() as gateway:
        evidence, errors = collect_endpoints({ProbePath.DIRECT: engine.base(), ProbePath.GATEWAY: gateway}, http,
                                             ttft_budget_s=0.5)
    direct, hung = evidence.endpoints
    assert (direct.deadline_s, direct.deadline_basis) == (10.0, "timeout")
    assert hung.deadline_basis == "direct-path" and hung.deadline_s < 10.0
    (error,) = [e for e in errors if e.target.startswith(gateway)]
    assert error.kind == "timeout" and "direct path" in error.message and "not tried" in error.message


def test_the_endpoints_probe_does_not_hold_a_gateway_to_an_engine_over_budget(engine) -> None:
    """An engine answering over the TTFT budget sets no bound: the gateway's silence may be its own."""
    with silent_port() as gateway:
        evidence, _ = collect_endpoints({ProbePath.DIRECT: engine.base(), ProbePath.GATEWAY: gateway},
                                        HttpOptions(timeout_s=0.5), ttft_budget_s=1e-9)
    assert [(e.deadline_s, e.deadline_basis) for e in evidence.endpoints] == [(0.5, "timeout"), (0.5, "timeout")]


def test_the_gateway_bounds_are_one_rule() -> None:
    """The stream probe's bound and the endpoints probe's are ``direct_bound`` of the direct answers."""
    traces = [RequestTrace(index=i, path=ProbePath.DIRECT, t_sent=0.0, t_first_token=0.1 * i, t_end=0.5 * i)
              for i in (1, 2, 3)]
    ttfts, e2es = [0.1 * i for i in (1, 2, 3)], [0.5 * i for i in (1, 2, 3)]
    bound = direct_bound(ttfts, e2es, 1.0)
    assert bound is not None and gateway_head_bound(traces, 1.0) == bound
    assert bound.seconds == pytest.approx(max(deadlines.HUNG_FLOOR_S, HUNG_TTFT_FACTOR * 0.3, HUNG_E2E_FACTOR * 1.5))


def test_a_run_deadline_gives_each_call_what_is_left() -> None:
    run = RunDeadline(3600.0)
    assert run.grant(10.0) == 10.0  # its own timeout while the run has more
    assert run.grant(1e9) <= 3600.0  # what is left when that is less
    over = RunDeadline(-1.0)
    assert over.grant(10.0) < 0 and "--deadline had run out" in over.spent("GET /x")


def test_every_network_step_of_a_run_ends_by_its_deadline(tmp_path) -> None:
    """A server that drips every answer's head, and a Prometheus that does: each step is given
    min(its own timeout, what is left), so the 5 s run ends with the steps after the deadline not
    started (``deadline`` errors), never each waiting out its own 3 s timeout."""
    with HostileServer() as hostile:
        base = hostile.base("drip")
        config = CollectConfig(engine=base, prometheus=base, requests=1, warmup=0, deadline_s=5.0,
                               host=False, gpu=False)
        config.http.timeout_s = 3.0
        bundle = collect(config)
    steps = bundle.run.steps
    assert bundle.run.deadline_s == 5.0
    assert list(steps) == ["endpoints", "metrics before", "stream", "metrics after", "prometheus"]
    assert steps["endpoints"] == 3.0  # its own timeout: the run had 5 s left
    assert steps["metrics before"] < 3.0  # what was left, less than its own timeout
    assert steps["stream"] < 5.0 - steps["endpoints"]  # what was left, never the --deadline itself
    assert steps["metrics after"] == 0.0 and steps["prometheus"] == 0.0
    late = [e for e in bundle.errors if e.kind == "deadline"]
    assert {e.source for e in late} >= {"metrics", "prometheus"}
    assert all("--deadline had run out" in e.message for e in late)
    (endpoint,) = bundle.endpoints.endpoints
    assert (endpoint.deadline_s, endpoint.deadline_basis) == (3.0, "timeout")
    assert not [e for e in bundle.errors if e.kind == "internal"]


@contextmanager
def kept_alive_then_cut_head() -> Iterator[str]:
    """One connection at a time: its first request answered whole and kept alive, its second sent
    the start of a response head and then nothing (until the test ends)."""
    listener = socket.create_server(("127.0.0.1", 0))
    done = threading.Event()

    def serve() -> None:
        with suppress(OSError):
            conn, _ = listener.accept()
            with conn:
                conn.recv(65536)
                conn.sendall(b'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 18\r\n\r\n{"version":"0.1"}\n')
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-")
                done.wait(30)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        done.set()
        listener.close()
        thread.join(5)


def test_a_head_begun_on_a_reused_connection_is_no_unanswered_request() -> None:
    """The byte count is the request's, not the connection's: on a kept-alive connection (a caller's
    own client) the second GET got part of a head before its server stalled, which is a late answer
    (``DeadlineExceeded``), not a server that sent not a byte (``Unanswered``, read as hung)."""
    with kept_alive_then_cut_head() as base, httpx.Client(trust_env=False, timeout=30.0) as client:
        response, text = bounded_get(client, base + "/version", deadline_s=5.0)
        assert response.status_code == 200 and "0.1" in text
        with pytest.raises(DeadlineExceeded) as caught:
            bounded_get(client, base + "/version", deadline_s=1.0)
    assert not isinstance(caught.value, Unanswered)


@NEEDS_NGINX
def test_only_a_silent_version_marks_a_target_unanswered() -> None:
    """A gateway that answers GET /version itself and passes /v1/models to an engine it cannot reach
    is silent on /v1/models for the whole --timeout: that proves no hung target (the one GET that does
    is the first, /version), so the stream probe is not told to hold its heads to the hung bound."""
    conf = ('location = /version { default_type application/json; return 200 \'{"version": "gw"}\'; }\n'
            "  location / { proxy_pass http://{upstream}; }")
    with blackholed_port() as upstream, run_nginx(conf, upstream) as gateway:
        evidence, errors = collect_endpoints({ProbePath.GATEWAY: gateway}, HttpOptions(timeout_s=1.0))
    (endpoint,) = evidence.endpoints
    assert endpoint.version == "gw" and endpoint.unanswered_s is None
    assert any(e.action == "GET /v1/models" and e.kind == "timeout" and "not a byte" in e.message for e in errors), errors
