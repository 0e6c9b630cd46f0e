"""``diagnose`` and ``collect`` sharded over client worker processes (``--client-workers``), judged by
real SSE servers: one as the engine, one as the gateway, each counting what it saw.

The parent keeps every decision across the workers (``doctor.probes.stream.shards``): each path's
cap, the gateway's bound from the direct path's answers, the adaptive stop, the wedge watchdog; a
sharded diagnosis must send what one process sends and say the same, and SIGTERM must still leave
the report with the requests in flight kept as cancelled.
"""

from __future__ import annotations

import json
import multiprocessing.spawn
import signal
import sys
from multiprocessing import resource_tracker
from pathlib import Path

import psutil
import pytest
from typer.testing import CliRunner

from doctor.bundle import load_path
from doctor.cli import app
from doctor.evidence import Bundle, EvidenceError, ProbePath
from doctor.evidence.stream import WEDGED
from doctor.exit_codes import ExitCode
from doctor.foundation.clock import Clock
from doctor.probes import deadlines
from doctor.probes import stream as stream_probe
from doctor.probes.plan import CollectConfig
from doctor.probes.stream import run_stream_probe
from doctor.probes.watchdog import Watchdog
from tests.collection.test_collect import stop_mid_stream
from tests.probes.test_probe_deadlines import silent_port
from tests.runs.test_load import measured, most_in_flight
from tests.support.sse_server import SseServer

runner = CliRunner()
QUIET = ("--no-gpu", "--no-host", "--no-metrics")


def diagnose(tmp_path: Path, name: str, *args: str) -> tuple[int, dict, Bundle]:
    out, bundle = tmp_path / f"{name}.json", tmp_path / f"{name}-bundle.json"
    result = runner.invoke(app, ["diagnose", "--json", str(out), "--bundle", str(bundle), *args], env={"COLUMNS": "200"})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, json.loads(out.read_text()), load_path(bundle)


def test_a_sharded_diagnosis_sends_what_one_process_sends_under_each_paths_cap_and_says_the_same(tmp_path) -> None:
    runs = {}
    for workers in ("1", "2"):
        with SseServer() as engine, SseServer() as gateway:
            runs[workers] = (*diagnose(tmp_path, f"w{workers}", *QUIET, "--engine", engine.base(ttft=0.02, itl=0.005, n=6),
                                       "--gateway", gateway.base(ttft=0.03, itl=0.005, n=6), "--concurrency", "4",
                                       "--requests", "12", "--warmup", "1", "--client-workers", workers),
                             measured(engine), measured(gateway))
    code, report, bundle, to_engine, to_gateway = runs["2"]
    stream = bundle.stream
    assert stream is not None
    # every request accounted for: 13 per path sent, each one a trace, each read by a worker
    assert len(to_engine) == len(to_gateway) == 13
    assert len({(t.path, t.index, t.warmup) for t in stream.requests}) == len(stream.requests) == 26
    assert [sum(1 for t in stream.requests if t.path == p) for p in (ProbePath.DIRECT, ProbePath.GATEWAY)] == [13, 13]
    assert all(t.ok for t in stream.requests)
    assert {t.shard for t in stream.requests} == {0, 1} and len(stream.client.shards) == 2
    assert "sharded over 2 worker processes" in stream.client.transport
    assert most_in_flight(to_engine) <= 4 and most_in_flight(to_gateway) <= 4  # each path's cap, counted by its server
    # the same diagnosis as one process: its class and its exit code
    one_code, one_report, one_bundle, *_ = runs["1"]
    assert one_bundle.stream is not None and {t.shard for t in one_bundle.stream.requests} == {None}
    assert report["verdict"]["symptom"] == one_report["verdict"]["symptom"]
    assert report["verdict"]["primary_code"] == one_report["verdict"]["primary_code"]
    assert code == one_code


def test_a_sharded_diagnosis_stops_once_conclusive_as_one_process_does(tmp_path) -> None:
    with SseServer() as engine:
        _, _, bundle = diagnose(tmp_path, "adaptive", *QUIET, "--engine", engine.base(ttft=0.01, itl=0.002, n=4),
                                     "--concurrency", "4", "--warmup", "0", "--duration", "60", "--client-workers", "2")
        sent = measured(engine)
    stream = bundle.stream
    assert stream is not None and stream.shape.stopped is not None and stream.shape.stopped.startswith("conclusive")
    assert len(sent) == len(stream.requests) and {t.shard for t in stream.requests} == {0, 1}


def test_a_hung_gateway_read_by_another_worker_is_held_to_the_bound_the_parent_sets(tmp_path, monkeypatch) -> None:
    """The direct answers and the gateway requests are read by both workers: the bound each gateway
    request is held to is the parent's, over every direct answer (the floor patched here, in the parent)."""
    monkeypatch.setattr(deadlines, "HUNG_FLOOR_S", 0.2)
    with SseServer() as engine, silent_port() as gateway:
        _, report, bundle = diagnose(tmp_path, "hung", *QUIET, "--engine", engine.base(ttft="0.05", itl="0.001", n="4"),
                                     "--gateway", gateway, "--requests", "6", "--warmup", "0", "--concurrency", "2",
                                     "--client-workers", "2")
    stream = bundle.stream
    assert stream is not None
    hung = [t for t in stream.requests if t.path == ProbePath.GATEWAY]
    assert hung and all(t.outcome == "head-timeout" and t.head_deadline_basis == "direct-path" for t in hung)
    assert {t.shard for t in stream.requests} == {0, 1}
    assert report["verdict"]["symptom"] == "proxy-only"


@pytest.mark.slow
def test_a_wedged_engine_is_named_by_the_parents_watchdog_across_workers(tmp_path, monkeypatch) -> None:
    """The parent's watchdog, with a 3 s bound instead of its default 15 s (and the check's 10 s
    ``min_still_s`` set to 2 s), which ``tests/checks/test_engine_wedged.py`` holds with the
    defaults: which process watches is what is asserted here, not how long it waits."""
    monkeypatch.setattr(stream_probe, "Watchdog", lambda scrapes, clock, _bound_s: Watchdog(scrapes, clock, 3.0))
    with SseServer() as srv:
        _, report, bundle = diagnose(tmp_path, "wedged", "--no-gpu", "--no-host", "--engine", srv.base(fail="hang"),
                                     "--concurrency", "2", "--warmup", "2", "--client-workers", "2",
                                     "--set", "LD105.min_still_s=2")
    assert report["verdict"]["primary_code"] == "LD105"
    stream = bundle.stream
    assert stream is not None and stream.wedge is not None and stream.wedge.bound_s == 3.0
    assert stream.wedge.sent == len(stream.requests) == stream.wedge.in_flight  # what the workers said was in flight
    assert all(r.outcome == WEDGED and not r.tokens for r in stream.requests)
    assert {t.shard for t in stream.requests} == {0, 1}


def test_workers_that_cannot_start_leave_the_diagnosis_to_one_process_and_say_so(monkeypatch) -> None:
    resource_tracker.ensure_running()  # started first, by the real interpreter: only the workers fail
    monkeypatch.setattr(multiprocessing.spawn, "_python_exe", b"/bin/false")  # every worker ends as it starts
    error = diagnosis_read_by_one_process()
    assert "read by one process" in error.message


def diagnosis_read_by_one_process() -> EvidenceError:
    """A paired diagnosis asked for 2 client workers, when they cannot start: every request is still
    sent and answered, read by this process alone; the one (non-fatal) error that says so."""
    with SseServer() as engine, SseServer() as gateway:
        config = CollectConfig(engine=engine.base(ttft=0.01, itl=0.002, n=4), gateway=gateway.base(ttft=0.01, itl=0.002, n=4),
                               route="chat", requests=4, warmup=0, concurrency=2, client_workers=2)
        evidence, errors = run_stream_probe(config, Clock(), lambda _msg: None, discover_model=False)
        sent = len(measured(engine)) + len(measured(gateway))
    assert evidence is not None and len(evidence.requests) == sent == 8 and all(t.ok for t in evidence.requests)
    assert {t.shard for t in evidence.requests} == {None} and evidence.client.shards == []
    (error,) = errors
    assert error.action == "start the client workers" and not error.fatal
    return error


@pytest.mark.slow
@pytest.mark.parametrize("command", ["diagnose", "collect"])
def test_sigterm_stops_a_sharded_diagnosis_and_keeps_its_requests_in_flight_as_cancelled(tmp_path, command) -> None:
    out = tmp_path / "out.json"
    with SseServer() as srv:
        argv = [sys.executable, "-m", "doctor", command, "--engine", srv.base(itl="0.05", n="100000"), *QUIET,
                "--warmup", "0", "--concurrency", "4", "--requests", "8", "--client-workers", "2",
                *(["--json", str(out)] if command == "diagnose" else ["-o", str(out)])]
        code, output, workers = stop_mid_stream(argv, srv, signal.SIGTERM, streaming=4)
        sent = len(srv.log.requests)
    assert code == ExitCode.INTERRUPTED and "Traceback" not in output, output
    _, alive = psutil.wait_procs(workers, timeout=10)
    assert len(workers) >= 2 and alive == []
    doc = json.loads(out.read_text())
    bundle = doc["bundle"] if command == "diagnose" else doc
    stream = bundle["stream"]
    assert bundle["interrupted"] and len(stream["requests"]) == sent == 4
    assert all(r["outcome"] == "cancelled" and r["tokens"] for r in stream["requests"])
    assert {r["shard"] for r in stream["requests"]} == {0, 1} and len(stream["client"]["shards"]) == 2
