"""How accurately does the stream probe time tokens? Its stamps against a server's send log.

Method (as in ../shared/perf/peer-timing-fidelity.md, so the numbers compare): a vLLM-shaped
SSE server (tests/support/sse_server.py) in its own process pinned to core 0 sends the first
token 50 ms after it has read the request, then one every 20 ms, 100 tokens, and logs
``perf_counter_ns`` right after each chunk's write. The probe runs in this process pinned to
core 1, closed loop, max(15, 4 x concurrency) requests. On Linux ``perf_counter`` is
CLOCK_MONOTONIC for every process, so stamps subtract directly.

- TTFT error: the probe's first-token stamp minus the server's send time of that chunk.
- ITL error: the probe's gap minus the server's gap, for the same two consecutive tokens.
- TTFT inflation: the TTFT the probe reports (``doctor.derive.stream_stats.request_stats``: from
  the scheduled send, less the client's own send lag once the probe records when a request left)
  minus the server's (request read -> first token sent): the client's time before its request was
  on the wire that the probe's TTFT still counts.
- CPU us/chunk: the client's CPU time from its first request to its end (this process and its
  worker processes, sampled every 20 ms; their start-up before the first request left out) over
  the token chunks received.

Sharded (``--workers N``, N > 1): the probe reads its streams in N worker processes
(``doctor.probes.shard``), which inherit this process's CPU affinity: ``--client-cores 0 1``
lets them use both cores of a 2-core machine (beside the server), the default keeps them all on
``--client-core``. ``--per-stream K`` requests per stream (default 4) keeps long rows short.
``--diagnosis`` runs the probe as ``diagnose`` and ``collect`` do (the adaptive probe's run, its
``--requests`` given so the count compares), not as a load run.

Usage: ``python bench/probe_fidelity.py [--concurrency 1 16 64 256] [--workers 2] [--json out.json]``.
uvloop is used when it is installed (the probe's own choice); ``--no-uvloop`` hides it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing as mp
import os
import resource
import sys
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from doctor.collection.collector import CollectConfig  # noqa: E402
from doctor.derive.stream_stats import request_stats  # noqa: E402
from doctor.evidence import ProbePath  # noqa: E402
from doctor.foundation.clock import Clock  # noqa: E402
from doctor.foundation.stats import quantile  # noqa: E402
from doctor.probes import stream  # noqa: E402

TTFT_S, ITL_S, TOKENS = 0.05, 0.02, 100


def _realtime(policy: int, priority: int) -> str:
    """Real-time scheduling when allowed (it keeps other load off the core), else fair."""
    try:
        os.sched_setscheduler(0, policy, os.sched_param(priority))
        return {os.SCHED_FIFO: "SCHED_FIFO", os.SCHED_RR: "SCHED_RR"}[policy]
    except (PermissionError, OSError):
        return "fair"


def _serve(core: int, ready: mp.Queue, stop: mp.Event, out: str) -> None:
    from tests.support.sse_server import SseServer

    os.sched_setaffinity(0, {core})
    mode = _realtime(os.SCHED_FIFO, 10)
    with SseServer() as server:
        ready.put((server.port, mode))
        stop.wait()
        log = {rid: {"t_request": s.t_request, "tokens": s.tokens} for rid, s in server.log.requests.items()}
    Path(out).write_text(json.dumps(log))


def _pct(values: list[float]) -> str:
    if not values:
        return "-"
    v = sorted(values)
    return f"{quantile(v, 0.5):.3f} / {quantile(v, 0.99):.3f} / {v[-1]:.3f}"


def _cpu_s() -> float:
    """CPU seconds of this process and of its children that ended (the probe's workers, once joined)."""
    own, ended = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + ended.ru_utime + ended.ru_stime


class _CpuTrace(threading.Thread):
    """Samples the CPU seconds of this process and of the probe's live worker processes every
    20 ms, on the probe's clock: the CPU a sharded client spent starting its workers, before its
    first request, is then left out (a real run pays it once, not per chunk). The sampling's own
    CPU (this thread's) is left out too."""

    def __init__(self, clock: Clock, skip: int, workers: int) -> None:
        super().__init__(daemon=True)
        self.clock, self.skip, self.expect, self.done = clock, skip, workers if workers > 1 else 0, threading.Event()
        self.samples: list[tuple[float, float, float]] = [(clock.now(), _cpu_s(), 0.0)]  # (t, client CPU, sampler CPU)

    def run(self) -> None:
        me = psutil.Process()
        workers: list[psutil.Process] = []
        while not self.done.wait(0.02):
            if len(workers) < self.expect:  # looked up until they all exist: the process table scan is not cheap
                workers = [c for c in me.children() if c.pid != self.skip and "spawn_main" in " ".join(c.cmdline())]
            live = 0.0
            for child in workers:
                with contextlib.suppress(psutil.Error):
                    times = child.cpu_times()
                    live += times.user + times.system
            self.samples.append((self.clock.now(), _cpu_s() + live, time.thread_time()))

    def since(self, t: float, total: float) -> float:
        """Client CPU seconds from the last sample before ``t`` to ``total`` now, less the sampling's."""
        at = max((s for s in self.samples if s[0] <= t), default=self.samples[0])
        return total - at[1] - (self.samples[-1][2] - at[2])


def run_one(concurrency: int, server_core: int, tmp: Path, workers: int = 1, per_stream: int = 4,
            diagnosis: bool = False) -> dict[str, object]:
    ready: mp.Queue = mp.Queue()
    stop = mp.Event()
    log_path = tmp / f"server-{concurrency}.json"
    proc = mp.Process(target=_serve, args=(server_core, ready, stop, str(log_path)), daemon=True)
    proc.start()
    port, server_mode = ready.get(timeout=30)
    requests = max(15, per_stream * concurrency)
    config = CollectConfig(
        engine=f"http://127.0.0.1:{port}/o/ttft={TTFT_S},itl={ITL_S},n={TOKENS}", route="chat", model="bench",
        requests=requests, warmup=0, concurrency=concurrency, max_tokens=TOKENS, stall_timeout_s=30, deadline_s=600,
        adaptive=diagnosis, only_path=None if diagnosis else ProbePath.DIRECT, client_workers=workers,
    )
    clock = Clock()
    cpu = _CpuTrace(clock, proc.pid, workers)
    cpu.start()
    evidence, errors = stream.run_stream_probe(config, clock, lambda _msg: None)
    cpu.done.set()
    cpu.join()
    assert evidence is not None
    cpu_s = cpu.since(min(t.t_scheduled for t in evidence.requests), _cpu_s())
    # the measured phase (worker start-up excluded): from the first scheduled send to the last end
    wall = max(t.t_end or 0.0 for t in evidence.requests) - min(t.t_scheduled for t in evidence.requests)
    stop.set()
    proc.join(timeout=30)
    server = json.loads(log_path.read_text())
    ttft_err, itl_err, inflation, chunks = [], [], [], 0
    for t in evidence.requests:
        sent = server.get(stream.request_id(clock, t.path, t.index))
        if not t.ok or sent is None or len(sent["tokens"]) != len(t.tokens):
            continue
        mine = [clock.t0_ns + e.t * 1e9 for e in t.tokens]
        theirs = sent["tokens"]
        chunks += len(mine)
        ttft_err.append((mine[0] - theirs[0]) / 1e6)
        itl_err += [((b - a) - (d - c)) / 1e6 for a, b, c, d in zip(mine, mine[1:], theirs, theirs[1:], strict=False)]
        reported = request_stats(t, closed_loop=True).ttft or 0.0
        inflation.append((reported - (theirs[0] - sent["t_request"]) / 1e9) * 1000)
    per_request = TTFT_S + (TOKENS - 1) * ITL_S
    return {
        "concurrency": concurrency,
        "workers": len(evidence.client.shards) or 1,
        "ok": sum(t.ok for t in evidence.requests),
        "sent": len(evidence.requests),
        "errors": [e.message for e in errors],
        "ttft_err_ms": _pct(ttft_err),
        "itl_err_ms": _pct(itl_err),
        "ttft_inflation_ms": _pct(inflation),
        "cpu_us_per_chunk": round(cpu_s / chunks * 1e6) if chunks else None,
        "chunks_per_s": round(chunks / wall),
        "ideal_chunks_per_s": round(concurrency * TOKENS / per_request),
        "client": evidence.client.transport,
        "client_suspect": evidence.client.suspect,
        "client_reasons": evidence.client.reasons,
        "loop_lag_p99_ms": evidence.client.loop_lag_p99_ms,
        "stamp_clock": evidence.client.stamp_clock,
        "send_clock": evidence.client.send_clock,
        "kernel_gap_p99_ms": evidence.client.kernel_gap_p99_ms,
        "read_gap_p99_ms": evidence.client.read_gap_p99_ms,
        "send_p99_ms": evidence.client.send_p99_ms,
        "server_sched": server_mode,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64, 256])
    parser.add_argument("--server-core", type=int, default=0)
    parser.add_argument("--client-core", type=int, default=1)
    parser.add_argument("--client-cores", type=int, nargs="+", help="Cores the client and its workers may use (default: --client-core).")
    parser.add_argument("--workers", type=int, default=1, help="Client worker processes (doctor.probes.shard); 1: one process.")
    parser.add_argument("--per-stream", type=int, default=4, help="Requests per stream (at least 15 in all).")
    parser.add_argument("--diagnosis", action="store_true", help="Probe as diagnose does, not as a load run.")
    parser.add_argument("--no-uvloop", action="store_true", help="Run the probe on asyncio's own loop.")
    parser.add_argument("--json", type=Path, help="Also write the rows as JSON here.")
    args = parser.parse_args()
    if args.no_uvloop:
        sys.modules["uvloop"] = None  # type: ignore[assignment]  # makes `import uvloop` fail
    mp.set_start_method("spawn")
    os.sched_setaffinity(0, set(args.client_cores or [args.client_core]))
    client_mode = _realtime(os.SCHED_RR, 5)
    tmp = Path(os.environ.get("TMPDIR", "/tmp")) / f"probe-fidelity-{os.getpid()}"
    tmp.mkdir(parents=True, exist_ok=True)
    rows = []
    print("| client | workers | conc | ok / sent | TTFT err p50 / p99 / max (ms) | ITL err p50 / p99 / max (ms) | "
          "TTFT inflation p50 / p99 / max (ms) | CPU µs/chunk | chunks/s (ideal) | suspect | stamps / sends | "
          "kernel-to-loop gap p99 (ms) | kernel-to-reader gap p99 (ms) |")
    print("|---|---:|---:|---:|---|---|---|---:|---:|---|---|---:|---:|")
    for c in args.concurrency:
        row = run_one(c, args.server_core, tmp, args.workers, args.per_stream, args.diagnosis)
        row["client_sched"] = client_mode
        rows.append(row)
        print(f"| {row['client']} | {row['workers']} | {c} | {row['ok']} / {row['sent']} | {row['ttft_err_ms']} | {row['itl_err_ms']} | "
              f"{row['ttft_inflation_ms']} | {row['cpu_us_per_chunk']} | {row['chunks_per_s']} ({row['ideal_chunks_per_s']}) | "
              f"{'yes' if row['client_suspect'] else 'no'} | {row['stamp_clock'] or 'loop'} / {row['send_clock'] or 'loop'} | "
              f"{row['kernel_gap_p99_ms'] if row['kernel_gap_p99_ms'] is not None else '-'} | "
              f"{row['read_gap_p99_ms'] if row['read_gap_p99_ms'] is not None else '-'} |", flush=True)
    print(f"server core {args.server_core} ({rows[0]['server_sched'] if rows else '-'}), "
          f"client cores {sorted(os.sched_getaffinity(0))} ({client_mode})")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
