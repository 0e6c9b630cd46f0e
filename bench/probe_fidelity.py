"""How accurately does the stream probe time tokens? Its stamps against a server's send log.

Method (as in ../shared/perf/peer-timing-fidelity.md, so the numbers compare): a vLLM-shaped
SSE server (tests/support/sse_server.py) in its own process pinned to core 0 sends the first
token 50 ms after it has read the request, then one every 20 ms, 100 tokens, and logs
``perf_counter_ns`` right after each chunk's write. The probe runs in this process pinned to
core 1, closed loop, max(15, 4 x concurrency) requests. On Linux ``perf_counter`` is
CLOCK_MONOTONIC for every process, so stamps subtract directly.

- TTFT error: the probe's first-token stamp minus the server's send time of that chunk.
- ITL error: the probe's gap minus the server's gap, for the same two consecutive tokens.
- TTFT inflation: the TTFT the probe reports (from the scheduled send) minus the server's
  (request read -> first token sent): the time the client took to put its request on the wire.
- CPU us/chunk: this process's CPU time during the run over the token chunks received.

Usage: ``python bench/probe_fidelity.py [--concurrency 1 16 64 256] [--json out.json]``.
uvloop is used when it is installed (the probe's own choice); ``--no-uvloop`` hides it.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from doctor.clock import Clock  # noqa: E402
from doctor.collect import CollectConfig  # noqa: E402
from doctor.probes import stream  # noqa: E402
from doctor.stats import quantile  # noqa: E402

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


def run_one(concurrency: int, server_core: int, client_core: int, tmp: Path) -> dict[str, object]:
    ready: mp.Queue = mp.Queue()
    stop = mp.Event()
    log_path = tmp / f"server-{concurrency}.json"
    proc = mp.Process(target=_serve, args=(server_core, ready, stop, str(log_path)), daemon=True)
    proc.start()
    port, server_mode = ready.get(timeout=30)
    requests = max(15, 4 * concurrency)
    config = CollectConfig(
        engine=f"http://127.0.0.1:{port}/o/ttft={TTFT_S},itl={ITL_S},n={TOKENS}", route="chat", model="bench",
        requests=requests, warmup=0, concurrency=concurrency, max_tokens=TOKENS, stall_timeout_s=30, deadline_s=600,
    )
    me = psutil.Process()
    clock = Clock()
    cpu0 = me.cpu_times()
    wall0 = time.perf_counter()
    evidence, errors = stream.run_stream_probe(config, clock, lambda _msg: None)
    wall = time.perf_counter() - wall0
    cpu1 = me.cpu_times()
    stop.set()
    proc.join(timeout=30)
    server = json.loads(log_path.read_text())
    assert evidence is not None
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
        reported = t.t_first_token - t.t_scheduled
        inflation.append((reported - (theirs[0] - sent["t_request"]) / 1e9) * 1000)
    cpu_s = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
    per_request = TTFT_S + (TOKENS - 1) * ITL_S
    return {
        "concurrency": concurrency,
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
        "loop_lag_p99_ms": evidence.client.loop_lag_p99_ms,
        "server_sched": server_mode,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64, 256])
    parser.add_argument("--server-core", type=int, default=0)
    parser.add_argument("--client-core", type=int, default=1)
    parser.add_argument("--no-uvloop", action="store_true", help="Run the probe on asyncio's own loop.")
    parser.add_argument("--json", type=Path, help="Also write the rows as JSON here.")
    args = parser.parse_args()
    if args.no_uvloop:
        sys.modules["uvloop"] = None  # type: ignore[assignment]  # makes `import uvloop` fail
    mp.set_start_method("spawn")
    os.sched_setaffinity(0, {args.client_core})
    client_mode = _realtime(os.SCHED_RR, 5)
    tmp = Path(os.environ.get("TMPDIR", "/tmp")) / f"probe-fidelity-{os.getpid()}"
    tmp.mkdir(parents=True, exist_ok=True)
    rows = []
    print("| client | conc | ok / sent | TTFT err p50 / p99 / max (ms) | ITL err p50 / p99 / max (ms) | "
          "TTFT inflation p50 / p99 / max (ms) | CPU µs/chunk | chunks/s (ideal) | suspect |")
    print("|---|---:|---:|---|---|---|---:|---:|---|")
    for c in args.concurrency:
        row = run_one(c, args.server_core, args.client_core, tmp)
        row["client_sched"] = client_mode
        rows.append(row)
        print(f"| {row['client']} | {c} | {row['ok']} / {row['sent']} | {row['ttft_err_ms']} | {row['itl_err_ms']} | "
              f"{row['ttft_inflation_ms']} | {row['cpu_us_per_chunk']} | {row['chunks_per_s']} ({row['ideal_chunks_per_s']}) | "
              f"{'yes' if row['client_suspect'] else 'no'} |", flush=True)
    print(f"server core {args.server_core} ({rows[0]['server_sched'] if rows else '-'}), "
          f"client core {args.client_core} ({client_mode})")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
