"""The client stack the stream probe runs on: uvloop when installed, asyncio without it, and the
garbage collector kept out of every measured window (issue 25).

Both loops are run for real against the tests' SSE server; the collector's state is read from
inside the run (the progress line of each finished request), not inferred from timings.
"""

from __future__ import annotations

import asyncio
import gc
import sys

import pytest

from doctor.collection.collector import CollectConfig
from doctor.foundation.clock import Clock
from doctor.probes import kernel_stamps
from doctor.probes.client_stack import run_loop
from doctor.probes.selfcheck import SelfCheck
from doctor.probes.stream import loop_name, run_stream_probe
from tests.support.sse_server import SseServer


@pytest.fixture(scope="module")
def server():
    with SseServer() as srv:
        yield srv


def probe(server: SseServer, progress=lambda _msg: None, **kw):
    config = CollectConfig(engine=server.base(ttft=0.01, itl=0.002, n=5), route="chat", requests=4, warmup=1,
                           concurrency=2, **kw)
    evidence, errors = run_stream_probe(config, Clock(), progress)
    assert evidence is not None
    return evidence, errors


def test_without_uvloop_the_probe_runs_on_asyncio(server, monkeypatch):
    monkeypatch.setitem(sys.modules, "uvloop", None)  # what `import uvloop` meets where it is not installed
    evidence, errors = probe(server)
    assert loop_name() == "asyncio"
    assert evidence.client.transport.endswith("asyncio")
    assert [t.outcome for t in evidence.requests] == ["ok"] * 5 and not errors


def test_with_uvloop_installed_the_probe_runs_on_it_unless_the_kernel_stamps(server, monkeypatch):
    """uvloop where the probe reads through the loop's own transports; asyncio's loop where it polls
    kernel-stamped sockets itself (``client_stack._uvloop`` says why)."""
    pytest.importorskip("uvloop")
    monkeypatch.setattr(kernel_stamps, "supported", lambda: False)
    evidence, errors = probe(server)
    assert loop_name() == "uvloop"
    assert evidence.client.transport.endswith("uvloop")
    assert [t.outcome for t in evidence.requests] == ["ok"] * 5 and not errors
    monkeypatch.undo()
    if kernel_stamps.supported():
        assert loop_name() == "asyncio"


def test_the_collector_is_off_while_requests_are_measured_and_back_after(server):
    seen: list[bool] = []
    assert gc.isenabled()
    evidence, _ = probe(server, progress=lambda msg: seen.append(gc.isenabled()) if "/" in msg else None)
    assert len(seen) == 5 and not any(seen)  # each finished request, warm-up and measured, found it off
    assert gc.isenabled() and gc.get_freeze_count() == 0  # given back: the analysis collects as before
    assert not any("garbage collection" in r for r in evidence.client.reasons)


def test_the_self_check_records_a_collection_inside_a_measured_window_only():
    async def main() -> SelfCheck:
        check = SelfCheck(Clock())
        sampler = asyncio.ensure_future(check.sample())
        await asyncio.sleep(0)
        gc.collect()  # outside a window: the probe's own collection between phases
        with check.measuring():
            assert not gc.isenabled()
            gc.collect()  # inside: someone else's, which stops every stream
        sampler.cancel()
        return check

    check = asyncio.run(main())
    assert len(check.gc_pauses_ms) == 1
    assert check._on_gc not in gc.callbacks
    assert gc.isenabled()


class _Evidence:
    """A result that counts how often it is shown: the probe's evidence holds every token and read."""

    shown = 0

    def __repr__(self) -> str:
        type(self).shown += 1
        return "<evidence>"


async def _returns(value):
    await asyncio.sleep(0)
    return value


async def _fails():
    await asyncio.sleep(0)
    raise ValueError("the probe failed")


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_the_run_hands_back_its_result_without_ever_formatting_it(loop, monkeypatch):
    # asyncio's Runner, at its end, asks signal.getsignal(SIGINT); on Python 3.11 that formats the
    # repr of its handler, which holds the main task and so the task's result: the whole evidence
    if loop == "asyncio":
        monkeypatch.setitem(sys.modules, "uvloop", None)
    else:
        monkeypatch.setattr(kernel_stamps, "supported", lambda: False)  # uvloop runs only without kernel stamps
        if loop_name() != "uvloop":
            pytest.skip("uvloop is not installed")
    result = _Evidence()
    _Evidence.shown = 0
    assert run_loop(_returns(result)) is result
    assert _Evidence.shown == 0
    with pytest.raises(ValueError, match="the probe failed"):
        run_loop(_fails())
