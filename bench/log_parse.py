"""Benchmark: the startup-log parser on a generated multi-GB vLLM log, against ``grep -c``.

Not a test (timings are for a person to read): it writes a realistic log (uvicorn access lines,
vLLM request logs whose prompts contain words of the gate, periodic stats lines, warnings,
request errors, tqdm bars and a real startup block every ~100 MB), warms the page cache, then
times in the same run ``grep -c`` with a fixed string, ``grep -c -P`` with the parser's own gate,
and ``read_log`` + ``parse_lines`` in a fresh interpreter whose peak RSS it reports.

    .venv/bin/python bench/log_parse.py --size 1G          # writes /tmp/llm-doctor-bench.log
    .venv/bin/python bench/log_parse.py --size 200M --keep # keep the file for another run

Goal (issue 3): within 3x grep's time, peak RSS under 150 MB. Results: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from doctor.logscan.gate import EXCEPTION_GATE, MESSAGE_GATE  # noqa: E402

LOGS = ROOT / "fixtures" / "logs"
STARTUPS = [  # real startups, each opened by a version banner: a restart every ~100 MB
    "startup-0.32.0-cpu-default.log",
    "startup-0.32.0-cpu-FAILED-kv-too-small-for-max-model-len.log",
    "startup-0.32.0-cpu-num-gpu-blocks-override-32.log",
]
PROMPTS = [
    "Summarise the following support ticket in three sentences.",
    "Which version of the API took longer to respond, and why?",
    "Explain this stack trace: ValueError: No available memory for the cache blocks.",
    "Translate to French: the config: section lists the args: of the server.",
    "Write a haiku about GPUs and the KV cache.",
]
SAMPLING = ("SamplingParams(n=1, presence_penalty=0.0, frequency_penalty=0.0, repetition_penalty=1.0, "
            "temperature=0.7, top_p=0.95, top_k=0, min_p=0.0, seed=None, stop=[], stop_token_ids=[], "
            "max_tokens=512, min_tokens=0, logprobs=None, skip_special_tokens=True)")

PARSE = """
import json, resource, sys, time
start = time.perf_counter()
import doctor.probes.logfile as logfile
from doctor.engine_readers.vllm import parse_lines
if sys.argv[2] == "sequential":
    logfile.PARALLEL_MIN = float("inf")
evidence, errors = logfile.read_log(sys.argv[1])
read = time.perf_counter()
facts = parse_lines(evidence.matched, sys.argv[1])
done = time.perf_counter()
print(json.dumps({"read_s": read - start, "parse_s": done - read, "lines": evidence.lines_total,
                  "kept": len(evidence.matched), "truncated": evidence.truncated, "stats": len(facts.stats),
                  "startups": len(facts.startups), "kv_cache_tokens": facts.value("kv_cache_tokens"),
                  "max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "worker_max_rss_mib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
                  "main_cpu_s": sum(resource.getrusage(resource.RUSAGE_SELF)[:2]),
                  "workers_cpu_s": sum(resource.getrusage(resource.RUSAGE_CHILDREN)[:2]),
                  "workers": logfile._workers() if evidence.bytes_total >= logfile.PARALLEL_MIN else 0}))
"""


def _size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(text[:-1]) * units[text[-1].upper()]) if text[-1].upper() in units else int(text)


def generate(path: Path, size: int, seed: int) -> None:
    rng = random.Random(seed)
    ip = lambda: f"10.0.{rng.randrange(256)}.{rng.randrange(256)}:{rng.randrange(1024, 65535)}"  # noqa: E731
    rid = lambda: f"chatcmpl-{rng.getrandbits(128):032x}"  # noqa: E731
    routes = ["/v1/chat/completions"] * 6 + ["/v1/completions"] * 2 + ["/health", "/metrics", "/v1/models"]
    pool: list[str] = []
    for _ in range(6000):
        pool.append(f'INFO:     {ip()} - "POST {rng.choice(routes)} HTTP/1.1" 200 OK\n')
    for _ in range(2000):
        r = rid()
        pool.append(f"(APIServer pid=1) INFO 11-30 05:39:16 [logger.py:41] Received request {r}: prompt: "
                    f"'{rng.choice(PROMPTS)}', params: {SAMPLING}, prompt_token_ids: None, lora_request: None.\n")
        pool.append(f"(APIServer pid=1) INFO 11-30 05:39:16 [async_llm.py:261] Added request {r}.\n")
    stats = [f"(APIServer pid=1) INFO 11-30 05:39:{s % 60:02d} [loggers.py:335] Engine 000: Avg prompt throughput: "
             f"{rng.uniform(0, 9000):.1f} tokens/s, Avg generation throughput: {rng.uniform(0, 900):.1f} tokens/s, "
             f"Running: {rng.randrange(64)} reqs, Waiting: {rng.randrange(20)} reqs, GPU KV cache usage: "
             f"{rng.uniform(0, 100):.1f}%, Prefix cache hit rate: {rng.uniform(0, 60):.1f}%\n" for s in range(500)]
    rare = [
        ("(APIServer pid=1) WARNING 11-30 05:39:16 [protocol.py:58] The following fields were present in the "
        "request but ignored: {'stream_options'}\n"),
        ("(APIServer pid=1) ERROR 11-30 05:39:16 [serving_chat.py:222] Error in preprocessing prompt inputs\n"
        "ValueError: This model's maximum context length is 8192 tokens. However, you requested 9000 tokens.\n"),
        "Capturing CUDA graph shapes:  45%|████▌     | 30/67 [00:09<00:11,  3.13it/s]\n",
    ]
    blocks = [(LOGS / name).read_text(encoding="utf-8") for name in STARTUPS]
    written = 0
    next_startup = 0
    with path.open("w", encoding="utf-8") as out:
        while written < size:
            if written >= next_startup:
                block = blocks[(next_startup // (100 << 20)) % len(blocks)]
                out.write(block)
                written += len(block)
                next_startup += 100 << 20
            batch = rng.choices(pool, k=10_000)
            for i in range(0, len(batch), 100):  # one stats line per ~100 lines
                batch[i] = rng.choice(stats)
            batch[rng.randrange(len(batch))] = rng.choice(rare)
            text = "".join(batch)
            out.write(text)
            written += len(text.encode())


def _timed(cmd: list[str], repeat: int, env: dict[str, str] | None = None) -> tuple[float, float, str]:
    """Best wall time and best CPU time (user + system) of ``repeat`` runs, and the output.

    CPU time is what the ratio uses: on a shared 2-core machine other processes stretch wall
    time, not the CPU time a command needs.
    """
    best_wall = best_cpu = float("inf")
    out = ""
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False).stdout.strip()
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        best_wall, best_cpu = min(best_wall, wall), min(best_cpu, cpu)
    return best_wall, best_cpu, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="1G", help="log size, e.g. 200M or 1G (default 1G)")
    parser.add_argument("--path", default="/tmp/llm-doctor-bench.log")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", action="store_true", help="keep the generated log (reused if the size matches)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each reader; the best is reported")
    args = parser.parse_args()
    path, size = Path(args.path), _size(args.size)

    if not (path.exists() and abs(path.stat().st_size - size) < (64 << 20)):
        t = time.perf_counter()
        generate(path, size, args.seed)
        print(f"generated {path} ({path.stat().st_size / 2**20:,.0f} MiB) in {time.perf_counter() - t:.1f} s")
    try:
        with path.open("rb") as f:  # warm the page cache so that every reader below starts equal
            while f.read(8 << 20):
                pass
        gate = f"{MESSAGE_GATE.pattern.decode('latin-1')}|{EXCEPTION_GATE.pattern.decode()}"
        c_env = {**os.environ, "LC_ALL": "C"}
        runs = {
            "grep_fixed": _timed(["grep", "-c", "-F", "KV cache", str(path)], args.repeat),
            "grep_gate": _timed(["grep", "-c", "-P", gate, str(path)], args.repeat, env=c_env),
            "parser": _timed([sys.executable, "-c", PARSE, str(path), "parallel"], args.repeat),
            "sequential": _timed([sys.executable, "-c", PARSE, str(path), "sequential"], args.repeat),
        }
        result = json.loads(runs["parser"][2])
        # What the parallel read takes on an idle machine: the main process plus one worker's share
        # (the parts are equal); on a busy one the workers wait for CPUs and wall time shows little.
        if result["workers"]:
            result["parallel_critical_path_cpu_s"] = result["main_cpu_s"] + result["workers_cpu_s"] / result["workers"]
        result["size_mib"] = path.stat().st_size / 2**20
        for name, (wall, cpu, _out) in runs.items():
            result[f"{name}_wall_s"], result[f"{name}_cpu_s"] = wall, cpu
        result["grep_fixed_count"], result["grep_gate_count"] = int(runs["grep_fixed"][2]), int(runs["grep_gate"][2])
        print(json.dumps(result, indent=2))
        fixed, gate = result["grep_fixed_cpu_s"], result["grep_gate_cpu_s"]
        rows = [
            ("grep -c -F 'KV cache'", "grep_fixed"),
            ("grep -c -P (the parser's gate)", "grep_gate"),
            ("read_log + parse_lines, 1 process", "sequential"),
            (f"read_log + parse_lines, {result['workers'] or 1} processes", "parser"),
        ]
        print(f"\n{result['size_mib']:,.0f} MiB, {result['lines']:,} lines; peak RSS {result['max_rss_mib']:.0f} MiB "
              f"(+ {result['worker_max_rss_mib']:.0f} MiB per worker process)\n")
        print("| reader | wall | CPU | CPU / grep -F | CPU / grep -P |\n|---|---|---|---|---|")
        for label, name in rows:
            cpu = result[f"{name}_cpu_s"]
            print(f"| {label} | {result[f'{name}_wall_s']:.2f} s | {cpu:.2f} s | x{cpu / fixed:.1f} | x{cpu / gate:.1f} |")
        if "parallel_critical_path_cpu_s" in result:
            path_s = result["parallel_critical_path_cpu_s"]
            print(f"| {rows[-1][0]}: critical path (idle machine) | | {path_s:.2f} s | x{path_s / fixed:.1f} "
                  f"| x{path_s / gate:.1f} |")
    finally:
        if not args.keep:
            path.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
