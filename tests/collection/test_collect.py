"""The collector end to end: what it keeps on Ctrl-C, what it asks twice (nothing), how it names a crash.

Real servers on 127.0.0.1 (the SSE server of the probe tests, a raw socket that never answers)
and a real ``python -m doctor collect`` process for Ctrl-C; no timing thresholds: the test
waits for the server to have streamed before it interrupts.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest

import doctor.probes.host as host_probe
from doctor.bundle import load_path
from doctor.collection.collector import CollectConfig, collect
from doctor.exit_codes import ExitCode
from doctor.foundation.clock import Clock
from doctor.probes.http import HttpOptions
from doctor.probes.stream import run_stream_probe
from tests.support.sse_server import SseServer

ROOT = Path(__file__).parents[2]
STARTUP_LOG = ROOT / "fixtures" / "run_record" / "startup-0.32.0-cpu-default.log"
#: Only a guard against a hung test, never an assertion about speed.
HANG_GUARD_S = 60.0


@contextmanager
def silent_server() -> Iterator[tuple[str, list[str]]]:
    """Accepts connections, reads each request line, never answers; yields (base URL, request lines seen)."""
    seen: list[str] = []
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.05)
    held: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            held.append(conn)
            threading.Thread(target=read_head, args=(conn,), daemon=True).start()

    def read_head(conn: socket.socket) -> None:
        data = b""
        try:
            while b"\r\n" not in data:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                data += chunk
        except OSError:
            return
        seen.append(data.split(b"\r\n", 1)[0].decode("latin-1"))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}", seen
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        listener.close()


def quick_config(**kw: object) -> CollectConfig:
    """One request, no warm-up, no machine probes, short deadlines: what these tests need."""
    base = {"requests": 1, "warmup": 0, "gpu": False, "host": False, "metrics": False, "stall_timeout_s": 0.3,
            "deadline_s": 30.0, "http": HttpOptions(timeout_s=0.3)}
    return CollectConfig(**{**base, **kw})  # type: ignore[arg-type]


def paths(seen: list[str]) -> list[str]:
    return [" ".join(line.split(" ")[:2]) for line in seen]


def test_a_silent_target_is_asked_for_its_models_once_not_twice() -> None:
    """The endpoints probe asked (and waited); the stream probe must not ask /v1/models again."""
    with silent_server() as (url, seen):
        bundle = collect(quick_config(engine=url))
    assert bundle.endpoints is not None
    assert "GET /v1/models" not in paths(seen)  # /version timed out: the endpoints probe stopped there
    assert paths(seen).count("POST /v1/chat/completions") == 1
    assert [t.outcome for t in bundle.stream.requests] == ["stall"]


def test_the_stream_probe_alone_still_discovers_the_model() -> None:
    """Without the endpoints probe (``run_stream_probe`` called directly) the model is looked up."""
    with silent_server() as (url, seen):
        run_stream_probe(quick_config(engine=url), Clock(), lambda _msg: None)
        run_stream_probe(quick_config(engine=url), Clock(), lambda _msg: None, discover_model=False)
    assert paths(seen).count("GET /v1/models") == 1


def test_a_crash_names_the_cause_inside_an_exception_group(monkeypatch: pytest.MonkeyPatch) -> None:
    """anyio's task groups wrap the real error; the evidence error must name it, not the group."""
    group_type = ExceptionGroup if sys.version_info >= (3, 11) else pytest.importorskip("exceptiongroup").ExceptionGroup  # noqa: F821

    def crash(_engine: str | None) -> None:
        raise group_type("unhandled errors in a TaskGroup", [OverflowError("port must be 0-65535")])

    monkeypatch.setattr(host_probe, "collect_host", crash)
    bundle = collect(CollectConfig(log=str(STARTUP_LOG), gpu=False, metrics=False))
    (error,) = bundle.errors_for("host")
    assert error.kind == "internal"
    assert error.message == "OverflowError: port must be 0-65535"
    assert bundle.log is not None  # the crash cost the host facts only


def test_probe_clients_are_built_in_one_place() -> None:
    """Every request/response probe uses ``http.http_client`` and the stream probe ``transport.make_client``.

    A client built elsewhere would miss their settings (``trust_env=False``: no proxy from the
    environment), which is how the endpoints probe once reported a proxy's headers.
    """
    builders = {"http.py": "httpx.Client(", "transport.py": "httpx.AsyncClient("}
    for source in sorted((ROOT / "doctor" / "probes").glob("*.py")):
        text = source.read_text()
        for construct in ("httpx.Client(", "httpx.AsyncClient("):
            expected = int(builders.get(source.name) == construct)
            assert text.count(construct) == expected, f"{source.name} builds its own {construct[:-1]}"


def test_every_probe_loop_is_started_by_run_loop() -> None:
    """``doctor.probes.client_stack.run_loop`` is the one place a probe starts an event loop: uvloop
    where it is installed, and the result kept off the main task (issue 25). A probe calling
    ``asyncio.run`` itself (the endpoints probe's scheme question once did) bypasses both."""
    starts = ("asyncio.run(", "uvloop.run(", "new_event_loop(", "run_until_complete(")
    for source in sorted((ROOT / "doctor" / "probes").rglob("*.py")):
        if source.relative_to(ROOT).as_posix() == "doctor/probes/client_stack.py":
            continue
        text = source.read_text()
        assert not any(start in text for start in starts), f"{source.name} starts its own event loop"


def _sigint_ignored() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.parametrize("inherited", [None, _sigint_ignored], ids=["", "sigint-inherited-ignored"])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_ctrl_c_mid_stream_keeps_the_requests_scrapes_and_log(tmp_path: Path, sig: signal.Signals, inherited) -> None:
    """SIGINT (or SIGTERM, what timeout/systemd/Kubernetes send) to a real ``llm-doctor collect``
    while a request streams: exit 130, a partial bundle. Also when SIGINT was inherited ignored, as
    by a job a script starts with ``&`` (and by this test when pytest itself runs so): Ctrl-C once
    did nothing there for a minute."""
    out = tmp_path / "bundle.json"
    with SseServer() as server:
        engine = server.base(itl="0.05", n="100000")
        command = [sys.executable, "-m", "doctor", "collect", "--engine", engine, "--requests", "2", "--warmup", "0",
                   "--no-gpu", "--no-host", "--metrics-url", server.url + "/metrics", "--log", str(STARTUP_LOG),
                   "-o", str(out)]
        code, output, _ = stop_mid_stream(command, server, sig, inherited=inherited)
    assert code == ExitCode.INTERRUPTED, output
    bundle = load_path(out)
    assert bundle.interrupted
    assert bundle.stream is not None, output
    (trace,) = bundle.stream.requests  # the second request was never sent
    assert trace.outcome == "cancelled"
    assert trace.tokens and trace.reads  # what streamed before Ctrl-C is evidence
    assert trace.t_end is not None and trace.t_end >= trace.tokens[-1].t
    assert bundle.errors_for("stream") == []  # Ctrl-C is not a failure of the target
    assert bundle.metrics is not None and [s.phase for s in bundle.metrics.scrapes][:1] == ["before"]
    assert bundle.log is not None
    assert not re.search(r"Traceback", output)


def stop_mid_stream(command: list[str], server: SseServer, sig: signal.Signals, *, streaming: int = 1,
                    inherited: Callable[[], None] | None = None) -> tuple[int, str, list[psutil.Process]]:
    """Run ``command`` from the repository root until ``streaming`` of ``server``'s requests have five
    tokens each, then send ``sig`` to the parent only, as timeout(1), systemd or Kubernetes do: its
    exit code, its output and the worker processes it had then. ``inherited`` runs in the child
    first (a signal disposition a script's ``&`` would leave it)."""
    proc = subprocess.Popen(command, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, preexec_fn=inherited)
    try:
        end = time.monotonic() + HANG_GUARD_S
        while sum(1 for sent in list(server.log.requests.values()) if len(sent.tokens) >= 5) < streaming:
            assert proc.poll() is None, proc.communicate()[0].decode()
            assert time.monotonic() < end, "the probe never started streaming"
            time.sleep(0.02)
        workers = psutil.Process(proc.pid).children()
        proc.send_signal(sig)
        return proc.wait(timeout=HANG_GUARD_S), proc.communicate()[0].decode(), workers
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_sigterm_during_diagnose_writes_a_report_marked_partial(tmp_path: Path) -> None:
    """SIGTERM mid-probe: exit 130, the text and the HTML banner say "partial"; analysing that
    report later is not itself an interruption, so it exits with the verdict's code, not 130."""
    html, md = tmp_path / "report.html", tmp_path / "report.md"
    with SseServer() as server:
        command = [sys.executable, "-m", "doctor", "diagnose", "--engine", server.base(itl="0.05", n="100000"),
                   "--requests", "2", "--warmup", "0", "--no-gpu", "--no-host", "--no-metrics",
                   "--html", str(html), "--md", str(md)]
        code, output, _ = stop_mid_stream(command, server, signal.SIGTERM)
    assert code == ExitCode.INTERRUPTED, output
    assert "Partial report" in output and "Traceback" not in output
    banner = html.read_text().split('id="verdict"', 1)[1].split("</section>", 1)[0]
    assert 'id="partial"' in banner and "Partial report" in banner
    assert "Partial report" in md.read_text()
    again = subprocess.run([sys.executable, "-m", "doctor", "analyze", str(html), "--format", "text"], cwd=ROOT,
                           env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                           timeout=HANG_GUARD_S)
    assert again.returncode != ExitCode.INTERRUPTED, again.stdout + again.stderr
    assert "Partial report" in again.stdout
